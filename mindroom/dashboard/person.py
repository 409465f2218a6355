"""A person's own view of what the companions know about them: the link, the session.

``!memory`` in a DM with a companion answers with a personal link (``/me/login?...``): the
person's Matrix ID, an expiry (15 minutes) and an HMAC of both under the dashboard's token, so
nobody can make one without the token and a link cannot be stretched to another person. The
link is only sent in a room that is the person's alone with mindroom
(:meth:`mindroom.adapters.matrix.client.MatrixAccount.only_with`, by allow-list): in any other room
someone else could open it. Opening it sets a session
cookie for ``/me`` only (HttpOnly, SameSite=Lax so the click from a Matrix client carries it,
12 hours), signed the same way. A person's session opens nothing but their own private
memories; the admin's token opens nothing under ``/me``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import socket
import time
from pathlib import Path
from urllib.parse import urlencode

from mindroom.atomic import atomic_write
from mindroom.config.schema import DashboardConfig

LINK_TTL_S = 15 * 60
SESSION_TTL_S = 12 * 3600
# Written while a dashboard listens: "<port> <pid>" (the port it listens on, its process's id).
PORT_FILE = "dashboard-port"


def _sign(token: str, purpose: str, user_id: str, expires: int) -> str:
    message = f"{purpose}\n{user_id}\n{expires}".encode()
    return hmac.new(token.encode(), message, hashlib.sha256).hexdigest()


def record_port(data_dir: Path, port: int) -> None:
    """Say that this process's dashboard listens on ``port`` (until :func:`forget_port`)."""
    atomic_write(data_dir / PORT_FILE, f"{port} {os.getpid()}\n")


def forget_port(data_dir: Path) -> None:
    """This process's dashboard stopped listening: its record goes (another's stays)."""
    path = data_dir / PORT_FILE
    with contextlib.suppress(OSError, ValueError):
        if int(path.read_text(encoding="utf-8").split()[1]) == os.getpid():
            path.unlink()


def running_port(data_dir: Path) -> int | None:
    """The port of the dashboard running on this storage, if one is: the recorded port, when
    the process that recorded it is alive and something listens there (a crash leaves the
    record behind; it is then stale and ignored)."""
    try:
        fields = (data_dir / PORT_FILE).read_text(encoding="utf-8").split()
        port = int(fields[0])
        pid = int(fields[1]) if len(fields) > 1 else None  # a record of an older version
    except (OSError, ValueError, IndexError):
        return None
    if pid is not None and not _alive(pid):
        return None
    return port if _listening(port) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _listening(port: int) -> bool:
    from mindroom.dashboard.access import LOOPBACK

    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex((LOOPBACK, port)) == 0


def person_link(
    data_dir: Path, settings: DashboardConfig, user_id: str, now: float | None = None
) -> str | None:
    """The personal link for ``user_id``; None when no dashboard runs on this storage."""
    port = running_port(data_dir)
    if port is None:
        return None
    from mindroom.dashboard.access import LOOPBACK, dashboard_token

    token = dashboard_token(data_dir)
    expires = int((now or time.time()) + LINK_TTL_S)
    base = (settings.public_url or f"http://{LOOPBACK}:{port}").rstrip("/")
    query = urlencode({"u": user_id, "exp": expires, "sig": _sign(token, "link", user_id, expires)})
    return f"{base}/me/login?{query}"


def check_link(
    token: str, user_id: str, expires: str, signature: str, now: float | None = None
) -> str | None:
    """Why the link does not open a session (None: it does)."""
    try:
        until = int(expires)
    except ValueError:
        return "this link is not one mindroom made"
    if not _same(signature, _sign(token, "link", user_id, until)):
        return "this link is not one mindroom made"
    if until < (now or time.time()):
        return "this link has expired: send !memory to your companion for a new one"
    return None


def session_cookie(token: str, user_id: str, now: float | None = None) -> str:
    """The cookie value of a person's session."""
    expires = int((now or time.time()) + SESSION_TTL_S)
    encoded = base64.urlsafe_b64encode(user_id.encode()).decode()
    return f"{encoded}.{expires}.{_sign(token, 'session', user_id, expires)}"


def session_user(token: str, cookie: str, now: float | None = None) -> tuple[str, int] | None:
    """The person a session cookie belongs to and when it ends (None: no valid session)."""
    try:
        encoded, expires, signature = cookie.split(".")
        user_id = base64.urlsafe_b64decode(encoded.encode()).decode()
        until = int(expires)
    except (ValueError, UnicodeDecodeError):
        return None
    if not _same(signature, _sign(token, "session", user_id, until)):
        return None
    return (user_id, until) if until >= (now or time.time()) else None


def person_csrf(token: str, user_id: str, session_until: int) -> str:
    """The CSRF field of a person's forms, for their current session."""
    return _sign(token, "csrf", user_id, session_until)


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), expected.encode())
