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
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from mindroom.atomic import atomic_write
from mindroom.dashboard import person

TOKEN_FILE = "dashboard-token"
COOKIE = "mindroom_dashboard"
PERSON_COOKIE = "mindroom_person"
PERSON: web.RequestKey[str] = web.RequestKey("person", str)  # the signed-in person, on /me
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


class Access:
    """The token's checks, as aiohttp middleware."""

    def __init__(self, token: str, port: int) -> None:
        self.token = token
        self.port = port
        self.session = _derived(token, "session")
        self.csrf = _derived(token, "csrf")

    def _signed_in(self, request: web.Request) -> bool:
        cookie = request.cookies.get(COOKIE, "")
        if cookie and hmac.compare_digest(cookie, self.session):
            return True
        bearer = request.headers.get("Authorization", "")
        return bearer.startswith("Bearer ") and hmac.compare_digest(bearer[7:], self.token)

    def _local(self, request: web.Request) -> bool:
        host = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
        return host in _LOCAL_HOSTS

    def _same_origin(self, request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        if origin is None:  # older browsers and scripts: the CSRF field still decides
            return True
        return origin in {f"http://{h}:{self.port}" for h in _LOCAL_HOSTS}

    async def check_form(self, request: web.Request) -> Any:  # aiohttp's MultiDictProxy
        """The posted form, once its CSRF field (the admin's, or the signed-in person's) and
        origin are right (else 403)."""
        form = await request.post()
        given = form.get(CSRF_FIELD)
        user = request.get(PERSON)
        expected = self.csrf if user is None else person.person_csrf(self.token, user)
        if (
            not self._same_origin(request)
            or not isinstance(given, str)
            or not hmac.compare_digest(given, expected)
        ):
            raise web.HTTPForbidden(text="this form is stale or came from another site: reload")
        return form

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Loopback host, then the token (URL once, then cookie), on every request."""
        if not self._local(request):
            raise web.HTTPMisdirectedRequest(text="the dashboard answers on 127.0.0.1 only")
        given = request.query.get("token")
        if given is not None:
            if not hmac.compare_digest(given, self.token):
                return _unauthorized()
            query = {k: v for k, v in request.query.items() if k != "token"}
            target = request.path + (f"?{urlencode(query)}" if query else "")
            found = web.Response(status=303, headers={"Location": target})
            found.set_cookie(COOKIE, self.session, httponly=True, samesite="Strict", path="/")
            _secure(found)
            return found
        if request.path == "/me" or request.path.startswith("/me/"):
            if request.path != "/me/login":  # the login checks its link itself
                user = person.session_user(self.token, request.cookies.get(PERSON_COOKIE, ""))
                if user is None:
                    return _unauthorized(PERSON_HINT)
                request[PERSON] = user
        elif not self._signed_in(request):
            return _unauthorized()
        response = await handler(request)
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
