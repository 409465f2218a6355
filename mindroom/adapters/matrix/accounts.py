"""Matrix accounts of mindroom: register once, then log in with saved credentials.

Credentials live in ``mindroom_data/credentials.json`` (mode 0600), keyed by homeserver URL and
localpart. A saved access token is reused on every start, so a restart creates no new device; an
expired token is replaced by a password login on the same device ID.

Registration uses the homeserver's shared secret when one is given
(``MATRIX_REGISTRATION_SHARED_SECRET``), else open registration (``m.login.dummy``).

Each account's device encrypts (see :mod:`mindroom.adapters.matrix.crypto`): its keys live under
``mindroom_data/crypto/<localpart>/``, unlocked by the ``pickle_key`` saved with its
credentials. A device whose key store is gone is not reused: the account logs in as a new
device (its old keys are published and would no longer match).
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import nio

from mindroom.adapters.matrix.client import RoomRulesClient
from mindroom.adapters.matrix.crypto import (
    E2E_AVAILABLE,
    client_config,
    ensure_cross_signing,
    keep_keys,
    store_dir,
    store_file,
)
from mindroom.adapters.matrix.registration import register_with_shared_secret
from mindroom.atomic import acquire_lock, atomic_write, release_lock
from mindroom.errors import MatrixError

logger = logging.getLogger(__name__)

CLIENT_CONFIG = nio.AsyncClientConfig(encryption_enabled=False, max_timeouts=None)
ACCOUNT_PREFIX = "mindroom_"
LOCK_WAIT_S = 30.0  # another process saving its account holds the lock for milliseconds
TOKEN_SUFFIX = ".token"  # the entry (and key store) of an account logged in by matrix.logins


def localpart(name: str) -> str:
    """The localpart of the account mindroom runs for ``name`` (an agent, a team, the router)."""
    return ACCOUNT_PREFIX + name


@dataclass
class Credentials:
    """What it takes to act as one account."""

    user_id: str
    password: str
    access_token: str = ""
    device_id: str = ""
    pickle_key: str = ""  # unlocks the device's key store (mindroom_data/crypto/<localpart>)
    keys_published: bool = False  # the device published encryption keys (its store must stay)


class CredentialStore:
    """A small JSON file of credentials, written atomically with mode 0600."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _read(self) -> dict[str, dict[str, dict[str, Any]]]:
        try:
            if self.path.stat().st_mode & 0o077:
                logger.warning("%s was readable by others; restricting it to 0600", self.path)
                self.path.chmod(0o600)
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise MatrixError(f"{self.path}: unreadable credentials file: {exc}") from None
        return data if isinstance(data, dict) else {}

    def accounts(self) -> list[tuple[str, str]]:
        """Every saved (homeserver, localpart)."""
        return [(hs, lp) for hs, users in self._read().items() for lp in users]

    def get(self, homeserver: str, localpart: str) -> Credentials | None:
        """Saved credentials of ``localpart`` on ``homeserver``, if any."""
        entry = self._read().get(homeserver, {}).get(localpart)
        if not entry:
            return None
        known = {f.name for f in fields(Credentials)}
        return Credentials(**{k: v for k, v in entry.items() if k in known})

    def rehome(self, old: str, new: str) -> bool:
        """Move the accounts saved for homeserver URL ``old`` to ``new`` (the same server,
        reached at another address); accounts already saved under ``new`` are kept."""
        with self._turn():
            data = self._read()
            moved = data.pop(old, None)
            if not moved or old == new:
                return False
            data[new] = {**moved, **data.get(new, {})}
            atomic_write(self.path, json.dumps(data, indent=2), mode=0o600)
            return True

    def put(self, homeserver: str, localpart: str, creds: Credentials) -> None:
        """Save credentials (atomic rename; the file is never readable by others). Processes
        sharing the storage take turns: none loses another's account."""
        with self._turn():
            data = self._read()
            data.setdefault(homeserver, {})[localpart] = asdict(creds)
            atomic_write(self.path, json.dumps(data, indent=2), mode=0o600)

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        """This process's turn to change the file (a lock beside it, ``credentials.lock``)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = acquire_lock(self.path.with_suffix(".lock"), LOCK_WAIT_S)
        try:
            yield
        finally:
            release_lock(fd)


def agent_credentials(data_dir: Path) -> CredentialStore:
    """Where the agents' accounts are kept (``mindroom_data/credentials.json``)."""
    return CredentialStore(data_dir / "credentials.json")


def new_client(homeserver: str, user: str = "") -> nio.AsyncClient:
    """An unencrypted nio client (registration, one-off requests)."""
    return nio.AsyncClient(homeserver, user, config=CLIENT_CONFIG)


def _account_client(
    homeserver: str, user: str, store_path: Path, pickle_key: str
) -> nio.AsyncClient:
    """The client of a running account: encrypting (with a ``pickle_key``), its keys in
    ``store_path``."""
    config = client_config(pickle_key, max_timeouts=None)
    return RoomRulesClient(homeserver, user, store_path=str(store_path), config=config)


async def _register(
    homeserver: str, localpart: str, password: str, device_name: str, shared_secret: str | None
) -> None:
    if shared_secret:
        await register_with_shared_secret(homeserver, shared_secret, localpart, password)
        return
    client = new_client(homeserver, localpart)
    try:
        response = await client.register(localpart, password, device_name)
    finally:
        await client.close()
    if isinstance(response, nio.RegisterResponse):
        return
    errcode = getattr(response, "status_code", None)
    raise MatrixError(
        f"cannot register @{localpart} on {homeserver}: {response.message} ({errcode}). "
        "Enable open registration or set MATRIX_REGISTRATION_SHARED_SECRET.",
        errcode,
    )


async def login_account(
    homeserver: str,
    localpart: str,
    store: CredentialStore,
    *,
    device_name: str = "mindroom",
    shared_secret: str | None = None,
    encrypt: bool = True,
) -> nio.AsyncClient:
    """A logged-in client for ``localpart``, registering the account on first use; with
    ``encrypt`` its device reads and writes encrypted rooms (see the module docstring)."""
    creds = store.get(homeserver, localpart)
    keys = store_dir(store.path.parent, localpart)
    if creds and not creds.pickle_key and encrypt:  # saved by a version without encryption
        creds.pickle_key = secrets.token_urlsafe(32)
        store.put(homeserver, localpart, creds)
    pickle_key = (creds.pickle_key if creds else "") if encrypt else ""
    if creds and creds.access_token and (_store_kept(keys, creds) or not encrypt):
        client = _account_client(homeserver, creds.user_id, keys, pickle_key)
        client.restore_login(creds.user_id, creds.device_id, creds.access_token)
        whoami = await client.whoami()
        if isinstance(whoami, nio.WhoamiResponse):
            return await _ready(client, keys, store, homeserver, localpart)
        await client.close()
        logger.info("saved token of %s no longer works (%s); logging in", localpart, whoami)
    if creds is None:
        password = secrets.token_urlsafe(24)
        try:
            await _register(homeserver, localpart, password, device_name, shared_secret)
        except MatrixError as exc:
            if exc.errcode in ("M_USER_IN_USE", "M_EXCLUSIVE"):
                raise MatrixError(
                    f"account @{localpart} already exists on {homeserver} but its password is "
                    f"not in {store.path.parent.name}/{store.path.name} (under the storage "
                    "root); restore that file or delete the account",
                    exc.errcode,
                ) from None
            raise
        creds = Credentials(
            user_id=f"@{localpart}", password=password, pickle_key=secrets.token_urlsafe(32)
        )
        store.put(homeserver, localpart, creds)  # the password is saved before anything else
        pickle_key = creds.pickle_key if encrypt else ""
    client = _account_client(homeserver, localpart, keys, pickle_key)
    if creds.device_id and _store_kept(keys, creds):
        client.device_id = creds.device_id
    elif creds.device_id:
        logger.warning(
            "the encryption keys of %s's device %s are gone from %s; logging in as a new device",
            localpart,
            creds.device_id,
            keys,
        )
    response = await client.login(creds.password, device_name=device_name)
    if not isinstance(response, nio.LoginResponse):
        await client.close()
        raise MatrixError(f"cannot log in as @{localpart} on {homeserver}: {response.message}")
    store.put(
        homeserver,
        localpart,
        Credentials(
            response.user_id,
            creds.password,
            response.access_token,
            response.device_id,
            creds.pickle_key,
        ),
    )
    logger.info("logged in as %s (device %s)", response.user_id, response.device_id)
    return await _ready(client, keys, store, homeserver, localpart)


def _store_kept(keys: Path, creds: Credentials) -> bool:
    """False when the device published keys and its key store is gone (reusing the device
    would publish keys it no longer has)."""
    if not E2E_AVAILABLE or not creds.device_id or not creds.keys_published:
        return True
    return store_file(keys, creds.user_id, creds.device_id).exists()


async def _ready(
    client: nio.AsyncClient, keys: Path, store: CredentialStore, homeserver: str, localpart: str
) -> nio.AsyncClient:
    """Upload the device's keys and cross-sign it (once; later starts only check)."""
    if client.olm is None:
        return client
    await keep_keys(client)
    creds = store.get(homeserver, localpart)
    if creds is not None and not creds.keys_published and not client.should_upload_keys:
        creds.keys_published = True
        store.put(homeserver, localpart, creds)
    try:
        password = creds.password if creds else ""
        outcome = await ensure_cross_signing(client, keys, password)
    except Exception:  # cross-signing is for other clients' trust: never worth the start
        logger.exception("cross-signing %s failed", client.user_id)
    else:
        if outcome != "cross-signed":
            logger.warning("%s is not cross-signed: %s", client.user_id, outcome)
    return client


async def open_account(
    homeserver: str,
    name: str,
    store: CredentialStore,
    *,
    token: tuple[str, str] | None,
    device_name: str,
    shared_secret: str | None,
) -> nio.AsyncClient:
    """The logged-in client of mindroom's account ``name`` (the router, an agent, a team):
    with ``token`` (access token, device ID from ``matrix.logins``) as given, else with saved
    credentials, registering the account on first use."""
    if token is not None:  # logged in elsewhere: no password, no registration
        return await token_account(
            homeserver,
            localpart(name),
            store,
            access_token=token[0],
            device_id=token[1],
            config_key=f"matrix.logins.{name}",
        )
    return await login_account(
        homeserver, localpart(name), store, device_name=device_name, shared_secret=shared_secret
    )


async def token_account(
    homeserver: str,
    localpart: str,
    store: CredentialStore,
    *,
    access_token: str,
    device_id: str,
    config_key: str,
) -> nio.AsyncClient:
    """A client for an account logged in elsewhere (``matrix.logins``): its token and device
    are used as given; only the key store's pickle key is saved (never the token)."""
    probe = new_client(homeserver)
    probe.access_token = access_token
    try:
        whoami = await probe.whoami()
    finally:
        await probe.close()
    if not isinstance(whoami, nio.WhoamiResponse):
        errcode = getattr(whoami, "status_code", None)
        raise MatrixError(
            f"the access token in {config_key} was refused by {homeserver}: "
            f"{errcode or 'error'}: {whoami.message}",
            errcode,
        )
    # saved apart from the password login's entry and key store: a person switching between
    # the two loses neither
    entry = f"{localpart}{TOKEN_SUFFIX}"
    saved = store.get(homeserver, entry)
    creds = Credentials(
        whoami.user_id,
        "",
        "",
        device_id,
        saved.pickle_key if saved and saved.pickle_key else secrets.token_urlsafe(32),
        bool(saved and saved.keys_published and saved.device_id == device_id),
    )
    store.put(homeserver, entry, creds)
    keys = store_dir(store.path.parent, entry)
    client = _account_client(homeserver, whoami.user_id, keys, creds.pickle_key)
    client.restore_login(whoami.user_id, device_id, access_token)
    logger.info("%s uses the access token in %s (device %s)", whoami.user_id, config_key, device_id)
    return await _ready(client, keys, store, homeserver, entry)


async def set_display_name(client: nio.AsyncClient, display_name: str) -> None:
    """Set the account's display name when it differs (one request when it is already right)."""
    current = await client.get_displayname(client.user_id)
    if (
        isinstance(current, nio.ProfileGetDisplayNameResponse)
        and current.displayname == display_name
    ):
        return
    response = await client.set_displayname(display_name)
    if isinstance(response, nio.ErrorResponse):
        logger.warning("cannot set display name of %s: %s", client.user_id, response.message)
