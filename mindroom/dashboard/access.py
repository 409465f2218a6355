"""Who may open the dashboard: a token, a session cookie, CSRF-safe forms, loopback only.

The dashboard listens on 127.0.0.1 only and answers nobody without its **token**, a random
secret kept in ``mindroom_data/dashboard-token`` (mode 0600, made once, so the URL
``mindroom dashboard url`` prints stays valid across restarts). The token arrives once in the
URL (``/?token=...``); the answer sets an HttpOnly, SameSite=Strict cookie holding a value
derived from it (never the token itself) and redirects to the same page without the token,
so it leaves neither the address bar nor the history. Scripts may send
``Authorization: Bearer <token>`` instead. Anything else gets 401.

Forms that change something carry a CSRF field derived from the token, checked in constant
time, and the request's ``Origin`` (when the browser sends one) must be the dashboard itself;
the ``Host`` header must name the loopback address, which defeats DNS rebinding. Every answer
forbids framing and caching and sends no referrer to other sites.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from aiohttp import web

from mindroom.atomic import atomic_write
from mindroom.dashboard import person

TOKEN_FILE = "dashboard-token"
COOKIE = "mindroom_dashboard"
PERSON_COOKIE = "mindroom_person"
PERSON: web.RequestKey[str] = web.RequestKey("person", str)  # the signed-in person, on /me
PERSON_UNTIL: web.RequestKey[int] = web.RequestKey("person_until", int)  # their session's end
CSRF_FIELD = "csrf"
LOOPBACK = "127.0.0.1"
_LOCAL_HOSTS = (LOOPBACK, "localhost", "[::1]")
_HEADERS = {
    "X-Frame-Options": "DENY",
    # not no-referrer: with it Chromium sends "Origin: null" on the dashboard's own forms
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
}


def dashboard_token(data_dir: Path) -> str:
    """The dashboard's token (made and saved on first use)."""
    path = data_dir / TOKEN_FILE
    try:
        token = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        token = ""
    if not token:
        token = secrets.token_urlsafe(32)
        data_dir.mkdir(parents=True, exist_ok=True)
        atomic_write(path, token + "\n", mode=0o600)
    return token


def dashboard_url(port: int, token: str, path: str = "/") -> str:
    """The URL that opens the dashboard (``path``) with its token."""
    return f"http://{LOOPBACK}:{port}{path}?{urlencode({'token': token})}"


def _derived(token: str, purpose: str) -> str:
    return hmac.new(token.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def same(given: str, expected: str) -> bool:
    """Constant-time equality of two strings (any characters: compared as UTF-8 bytes)."""
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())


ADMIN_SESSION_S = 12 * 3600


class Access:
    """The token's checks, as aiohttp middleware.

    ``public_url`` (``dashboard.public_url``) is where people's browsers reach ``/me`` through
    a reverse proxy: that host and origin are accepted for ``/me`` only; every admin page
    still answers on the loopback host alone.
    """

    def __init__(self, token: str, port: int, public_url: str | None = None) -> None:
        self.token = token
        self.csrf = _derived(token, "csrf")
        self.public = urlsplit(public_url) if public_url else None
        self.listening_on(port)

    def listening_on(self, port: int) -> None:
        """The port the dashboard listens on (its own origin), once it is known: a taken
        configured port moves it to the next free one."""
        self.port = port
        self.origins = {f"http://{host}:{port}" for host in _LOCAL_HOSTS}
        if self.public is not None:
            self.origins.add(f"{self.public.scheme}://{self.public.netloc}")

    @property
    def secure_cookies(self) -> bool:
        """Whether people reach it over https (their cookies are then ``Secure``)."""
        return self.public is not None and self.public.scheme == "https"

    def admin_cookie(self, now: float | None = None) -> str:
        """A signed admin session, valid for :data:`ADMIN_SESSION_S`."""
        expires = int((now or time.time()) + ADMIN_SESSION_S)
        return f"{expires}.{_derived(self.token, f'session {expires}')}"

    def _signed_in(self, request: web.Request) -> bool:
        expires, _, signature = request.cookies.get(COOKIE, "").partition(".")
        fresh = expires.isdigit() and int(expires) >= time.time()
        if fresh and same(signature, _derived(self.token, f"session {expires}")):
            return True
        bearer = request.headers.get("Authorization", "")
        return bearer.startswith("Bearer ") and same(bearer[7:], self.token)

    def _host_allowed(self, request: web.Request, personal: bool) -> bool:
        host = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
        if host in _LOCAL_HOSTS:
            return True
        return personal and self.public is not None and request.host == self.public.netloc

    def _same_origin(self, request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        if origin is None:  # older browsers and scripts: the CSRF field still decides
            return True
        return origin in self.origins

    async def check_form(self, request: web.Request) -> Any:  # aiohttp's MultiDictProxy
        """The posted form, once its CSRF field (the admin's, or the signed-in person's, tied
        to their session) and origin are right (else 403)."""
        form = await request.post()
        given = form.get(CSRF_FIELD)
        user = request.get(PERSON)
        expected = (
            self.csrf
            if user is None
            else person.person_csrf(self.token, user, request[PERSON_UNTIL])
        )
        if (
            not self._same_origin(request)
            or not isinstance(given, str)
            or not same(given, expected)
        ):
            raise web.HTTPForbidden(text="this form is stale or came from another site: reload")
        return form

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Loopback host, then the token (URL once, then cookie), on every request; ``/me``
        takes a person's session instead."""
        personal = request.path == "/me" or request.path.startswith("/me/")
        if not self._host_allowed(request, personal):
            return _secured(
                web.Response(status=421, text="the dashboard answers on 127.0.0.1 only")
            )
        given = request.query.get("token")
        if given is not None and not personal:
            if not same(given, self.token):
                return _unauthorized()
            query = {k: v for k, v in request.query.items() if k != "token"}
            target = request.path + (f"?{urlencode(query)}" if query else "")
            found = web.Response(status=303, headers={"Location": target})
            found.set_cookie(
                COOKIE,
                self.admin_cookie(),
                httponly=True,
                samesite="Strict",
                path="/",
                max_age=ADMIN_SESSION_S,
            )
            return _secured(found)
        if personal:
            if request.path not in ("/me/login", "/me/static/style.css"):  # login: its link
                session = person.session_user(self.token, request.cookies.get(PERSON_COOKIE, ""))
                if session is None:
                    return _unauthorized(PERSON_HINT)
                request[PERSON], request[PERSON_UNTIL] = session
        elif not self._signed_in(request):
            return _unauthorized()
        try:
            response = await handler(request)
        except web.HTTPException as exc:  # raised answers (403, 404, 303) get the headers too
            _secure(exc)
            raise
        _secure(response)
        return response


def _secured(response: web.Response) -> web.Response:
    _secure(response)
    return response


def _secure(response: web.StreamResponse) -> None:
    for name, value in _HEADERS.items():
        response.headers.setdefault(name, value)


ADMIN_HINT = (
    "This dashboard needs its token. Open the URL `mindroom dashboard url` prints (run it "
    "beside config.yaml).\n"
)
PERSON_HINT = (
    "This page shows your own memory once you open the link your companion sends you: send "
    "!memory to it in a direct message.\n"
)


def _unauthorized(hint: str = ADMIN_HINT) -> web.Response:
    response = web.Response(status=401, text=hint, content_type="text/plain")
    _secure(response)
    return response
