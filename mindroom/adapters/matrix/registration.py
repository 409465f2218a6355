"""User registration through Synapse's shared-secret admin API.

What it does: :func:`register_with_shared_secret` asks ``/_synapse/admin/v1/register`` for a
nonce, signs it with the server's ``registration_shared_secret`` (HMAC-SHA1) and registers the
user, turning any refusal into :class:`~mindroom.errors.HomeserverError` with the Matrix
``errcode`` the server sent. It works against any Synapse whose shared secret is known: the
embedded one and remote ones alike.

What it does not do: open (``m.login.dummy``) registration, logging in, or saving credentials
(see :mod:`mindroom.adapters.matrix.accounts`). It does not import Synapse or PyYAML and starts no
server, so it is cheap to import anywhere.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from typing import TYPE_CHECKING, Any

from mindroom.errors import HomeserverError

if TYPE_CHECKING:
    import aiohttp

logger = logging.getLogger(__name__)


async def register_with_shared_secret(
    homeserver_url: str,
    shared_secret: str,
    username: str,
    password: str,
    *,
    admin: bool = False,
    displayname: str | None = None,
) -> str:
    """Register a user through Synapse's shared-secret admin API; return the full user id.

    Works against any Synapse whose ``registration_shared_secret`` is known (no Synapse import).
    Raises :class:`HomeserverError` with ``errcode`` set from the server's answer, e.g.
    ``M_USER_IN_USE`` when the user already exists.
    """
    import aiohttp  # here: ``run --local`` launches Synapse before importing the HTTP stack

    endpoint = homeserver_url.rstrip("/") + "/_synapse/admin/v1/register"
    timeout = aiohttp.ClientTimeout(total=30)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as session:
            async with session.get(endpoint) as response:
                body = await _json_or_raise(response, f"Asking {endpoint} for a nonce")
            nonce = body.get("nonce")
            if not isinstance(nonce, str):
                raise HomeserverError(f"{endpoint} answered without a nonce.")
            mac = hmac.new(shared_secret.encode("utf-8"), digestmod=hashlib.sha1)
            for part in (nonce, username, password):
                mac.update(part.encode("utf-8"))
                mac.update(b"\x00")
            mac.update(b"admin" if admin else b"notadmin")
            payload: dict[str, Any] = {
                "nonce": nonce,
                "username": username,
                "password": password,
                "admin": admin,
                "mac": mac.hexdigest(),
            }
            if displayname is not None:
                payload["displayname"] = displayname
            async with session.post(endpoint, json=payload) as response:
                body = await _json_or_raise(response, f"Registering user {username!r}")
    except aiohttp.ClientError as exc:
        raise HomeserverError(f"Cannot reach {endpoint}: {exc}") from exc
    except TimeoutError as exc:
        raise HomeserverError(f"{endpoint} did not answer within 30 s.") from exc
    user_id = body.get("user_id")
    if not isinstance(user_id, str):
        raise HomeserverError(f"Registering user {username!r}: the answer had no user_id.")
    logger.info("Registered %s%s", user_id, " (admin)" if admin else "")
    return user_id


async def _json_or_raise(response: aiohttp.ClientResponse, what: str) -> dict[str, Any]:
    try:
        body = await response.json(content_type=None)
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
    if response.status != 200:
        errcode = body.get("errcode") if isinstance(body.get("errcode"), str) else None
        error = body.get("error") or response.reason or "no details"
        code = f" {errcode}" if errcode else ""
        raise HomeserverError(f"{what} failed: HTTP {response.status}{code}: {error}", errcode)
    return body
