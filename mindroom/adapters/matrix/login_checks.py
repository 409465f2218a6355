"""``doctor``: which login each account uses, and whether the homeserver takes it.

Three paths, in the order mindroom tries them at start:

* ``matrix.logins.<name>``: an access token and device ID issued elsewhere (for homeservers
  behind an OIDC provider such as the Matrix Authentication Service, where mindroom can
  neither register nor log in with a password);
* saved credentials (``mindroom_data/credentials.json``): the account's saved token, else its
  password, on the same device;
* registration at the first start (the shared secret, else open registration).

Each configured login and saved token is asked ``whoami``: nothing changes on the homeserver
or in the credentials file.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import nio

from mindroom.adapters.matrix.accounts import CredentialStore, localpart
from mindroom.checks import Check
from mindroom.errors import MatrixError

_CONFIG = nio.AsyncClientConfig(encryption_enabled=False, max_timeouts=1, request_timeout=10)
TIMEOUT_S = 15.0


async def whoami(homeserver: str, token: str) -> tuple[str, str]:
    """The user and device an access token belongs to; MatrixError with the homeserver's
    errcode and words when it is refused."""
    client = nio.AsyncClient(homeserver, config=_CONFIG)
    client.access_token = token
    try:
        async with asyncio.timeout(TIMEOUT_S):
            response = await client.whoami()
    except TimeoutError:
        raise MatrixError(f"the homeserver did not answer within {TIMEOUT_S:.0f} s") from None
    finally:
        await client.close()
    if not isinstance(response, nio.WhoamiResponse):
        errcode = getattr(response, "status_code", None) or "error"
        raise MatrixError(f"{errcode}: {response.message}", errcode)
    return response.user_id, response.device_id or ""


async def _check(
    homeserver: str, name: str, token_login: tuple[str, str] | None, store: CredentialStore
) -> Check:
    check = f"login {name}"
    if token_login is not None:
        token, device = token_login
        try:
            user_id, actual = await whoami(homeserver, token)
        except MatrixError as exc:
            return Check(
                check,
                False,
                f"access token (matrix.logins.{name}) refused: {exc}",
                f"issue a new token and device for it and set matrix.logins.{name}",
            )
        if actual and actual != device:
            return Check(
                check,
                False,
                f"access token for {user_id} belongs to device {actual}, not {device}",
                f"set matrix.logins.{name}.device_id to {actual}",
            )
        return Check(check, True, f"access token for {user_id} (device {device})")
    saved = store.get(homeserver, localpart(name))
    if saved is None:
        return Check(check, True, f"password: @{localpart(name)} is registered at the first start")
    if not saved.access_token:
        return Check(check, True, f"password (saved for {saved.user_id}; logs in at start)")
    try:
        user_id, _ = await whoami(homeserver, saved.access_token)
    except MatrixError as exc:
        return Check(
            check,
            True,
            f"password (saved for {saved.user_id}): its saved token is refused ({exc}); the "
            "next start logs in with the saved password",
        )
    return Check(check, True, f"password (saved for {user_id}, device {saved.device_id})")


async def check_logins(
    homeserver: str,
    names: Sequence[str],
    token_logins: Mapping[str, tuple[str, str]],
    store: CredentialStore,
) -> list[Check]:
    """One line per account: its login path and whether the homeserver takes it."""
    url = homeserver.rstrip("/")
    return list(await asyncio.gather(*(_check(url, n, token_logins.get(n), store) for n in names)))
