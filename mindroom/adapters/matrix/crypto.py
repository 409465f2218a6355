"""End-to-end encryption for mindroom's accounts: the key store, key upkeep, cross-signing.

The crypto is matrix-nio's (0.26, its ``e2e`` extra: vodozemac, the maintained Rust successor
of the deprecated libolm, which has unfixed 2024 advisories, CVE-2024-45191 and -45192). Each
account keeps its Olm account and Megolm sessions in its own SQLite store under
``mindroom_data/crypto/<localpart>/`` (``<user>_<device>.db``), encrypted with a per-account
pickle key kept beside the password in ``credentials.json`` (mode 0600). The store is the
account's memory of every room key it was given: losing it makes older encrypted messages
unreadable, so it is never deleted, and a device whose store is gone is replaced by a new
device rather than reused (its published keys would no longer match).

Key upkeep (:func:`keep_keys`) is what nio's own ``sync_forever`` does after each sync: upload
one-time keys, query the devices of people in encrypted rooms, claim keys for new ones and
send the queued to-device messages (room keys). mindroom runs its own sync loop, so it calls
this after every sync.

Cross-signing (:func:`ensure_cross_signing`): nio has none, so it is done here over the
client-server API. The account gets a master, a self-signing and a user-signing Ed25519 key
(kept in ``cross_signing.json`` beside the store, mode 0600), publishes them (with the
password when the homeserver asks for user-interactive auth) and signs its own device with
the self-signing key, so clients that only share room keys with cross-signed devices (recent
Element settings) share them with the agent. An account without a password (an access-token
login) cannot publish them and says so in the log.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import os
from pathlib import Path
from typing import Any

import aiohttp
import nio
from Crypto.PublicKey import ECC
from Crypto.Signature import eddsa

from mindroom.atomic import atomic_write

logger = logging.getLogger(__name__)

E2E_AVAILABLE: bool = bool(getattr(nio.crypto, "ENCRYPTION_ENABLED", False))
"""True when matrix-nio's e2e extra (vodozemac) is installed."""

CROSS_SIGNING_FILE = "cross_signing.json"
_KEYS_QUERY = "/_matrix/client/v3/keys/query"
_DEVICE_SIGNING = "/_matrix/client/v3/keys/device_signing/upload"
_SIGNATURES = "/_matrix/client/v3/keys/signatures/upload"


def store_dir(data_dir: Path, localpart: str) -> Path:
    """Where account ``localpart`` keeps its encryption keys (created, mode 0700)."""
    path = data_dir / "crypto" / localpart
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def store_file(store_path: Path, user_id: str, device_id: str) -> Path:
    """The key store nio keeps for one device (its file name is nio's)."""
    return store_path / f"{user_id}_{device_id}.db"


@functools.cache
def _key_store() -> type[Any]:
    """nio's key store, minus a write per sync: nio saves the rooms a sync found encrypted
    after every sync, with a SQLite transaction on the event loop even when there are none
    (most syncs), which held up the handling of the message that sync brought. (Built on
    first use: nio has no store without the e2e extra.)"""

    class KeyStore(nio.store.DefaultStore):  # type: ignore[misc,name-defined]
        def save_encrypted_rooms(self, rooms: Any) -> None:
            if rooms:
                super().save_encrypted_rooms(rooms)

    return KeyStore


def client_config(pickle_key: str | None, **options: Any) -> nio.AsyncClientConfig:
    """A client config: encrypting (with ``pickle_key``) when the e2e extra is installed."""
    if E2E_AVAILABLE and pickle_key:
        return nio.AsyncClientConfig(
            encryption_enabled=True,
            pickle_key=pickle_key,
            store_sync_tokens=False,
            store=_key_store(),
            **options,
        )
    return nio.AsyncClientConfig(encryption_enabled=False, **options)


async def keep_keys(client: nio.AsyncClient) -> None:
    """Upload, query and claim keys and send queued to-device messages, as due (no-op
    without encryption). Failures are logged: the next sync tries again."""
    if client.olm is None:
        return
    try:
        if client.should_upload_keys:
            await client.keys_upload()
        if client.should_query_keys:
            await client.keys_query()
        if client.should_claim_keys:
            await client.keys_claim(client.get_users_for_key_claiming())
        await client.send_to_device_messages()
    except Exception:  # a transport failure: keys are kept up at the next sync
        logger.exception("key upkeep of %s failed", client.user_id)


def canonical_json(value: Any) -> bytes:
    """Matrix canonical JSON (what signatures sign)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _unpadded(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


class SigningKey:
    """An Ed25519 signing key of cross-signing, from its 32-byte seed."""

    def __init__(self, seed: bytes | None = None) -> None:
        self.seed = seed or os.urandom(32)
        self._key = ECC.construct(curve="ed25519", seed=self.seed)
        self.public = _unpadded(self._key.public_key().export_key(format="raw"))

    def sign(self, value: dict[str, Any]) -> str:
        """The signature of a JSON object (without its ``signatures`` and ``unsigned``)."""
        signed = {k: v for k, v in value.items() if k not in ("signatures", "unsigned")}
        return _unpadded(eddsa.new(self._key, "rfc8032").sign(canonical_json(signed)))


_USAGES = ("master", "self_signing", "user_signing")


def _load_keys(path: Path) -> dict[str, SigningKey] | None:
    try:
        seeds = json.loads(path.read_text(encoding="utf-8"))
        return {usage: SigningKey(base64.b64decode(seeds[usage])) for usage in _USAGES}
    except (OSError, ValueError, KeyError, TypeError):
        return None


async def api_call(
    client: nio.AsyncClient, method: str, path: str, body: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    """A client-server API call nio has no method for: (HTTP status, the JSON answer)."""
    headers = {"Authorization": f"Bearer {client.access_token}"}
    data = json.dumps(body) if body is not None else None
    response = await client.send(method, path, data, headers)
    try:
        answer = await response.json()
    except (ValueError, aiohttp.ContentTypeError):
        answer = {}
    finally:
        response.release()
    return response.status, answer if isinstance(answer, dict) else {}


def _key_object(user_id: str, usage: str, key: SigningKey) -> dict[str, Any]:
    return {"user_id": user_id, "usage": [usage], "keys": {f"ed25519:{key.public}": key.public}}


async def ensure_cross_signing(
    client: nio.AsyncClient, store_path: Path, password: str | None
) -> str:
    """Make sure the account's cross-signing keys are published and its device is signed by
    them; returns what was done (for the log and ``doctor``)."""
    if client.olm is None:
        return "no encryption"
    user_id, device_id = client.user_id, client.device_id
    path = store_path / CROSS_SIGNING_FILE
    keys = _load_keys(path)
    query = {"device_keys": {user_id: [device_id]}}
    status, found = await api_call(client, "POST", _KEYS_QUERY, query)
    if status != 200:
        return f"keys/query failed ({status})"
    published = found.get("master_keys", {}).get(user_id, {}).get("keys", {})
    device = found.get("device_keys", {}).get(user_id, {}).get(device_id)
    if device is None:
        return "the device's keys are not uploaded yet"
    if keys is None or f"ed25519:{keys['master'].public}" not in published:
        if keys is None:
            keys = {usage: SigningKey() for usage in _USAGES}
            atomic_write(
                path,
                json.dumps({u: base64.b64encode(k.seed).decode() for u, k in keys.items()}),
                mode=0o600,
            )
        outcome = await _publish(client, keys, password)
        if outcome:
            return outcome
    signer = keys["self_signing"]
    signed_by = device.get("signatures", {}).get(user_id, {})
    if f"ed25519:{signer.public}" in signed_by:
        return "cross-signed"
    device.pop("unsigned", None)
    device["signatures"] = {user_id: {f"ed25519:{signer.public}": signer.sign(device)}}
    status, answer = await api_call(client, "POST", _SIGNATURES, {user_id: {device_id: device}})
    if status != 200 or answer.get("failures"):
        return f"signing the device failed ({status}: {answer.get('failures') or answer})"
    logger.info("%s: device %s is cross-signed", user_id, device_id)
    return "cross-signed"


async def _publish(
    client: nio.AsyncClient, keys: dict[str, SigningKey], password: str | None
) -> str | None:
    """Publish the account's cross-signing keys; an error text, or None when done."""
    user_id = client.user_id
    master = keys["master"]
    body: dict[str, Any] = {"master_key": _key_object(user_id, "master", master)}
    for usage in ("self_signing", "user_signing"):
        key_object = _key_object(user_id, usage, keys[usage])
        key_object["signatures"] = {user_id: {f"ed25519:{master.public}": master.sign(key_object)}}
        body[f"{usage}_key"] = key_object
    status, answer = await api_call(client, "POST", _DEVICE_SIGNING, body)
    if status == 401:  # user-interactive auth: the account's password
        if not password:
            return (
                "the homeserver asks for a password to publish cross-signing keys, and this "
                "account logs in with a token"
            )
        body["auth"] = {
            "type": "m.login.password",
            "identifier": {"type": "m.id.user", "user": user_id},
            "password": password,
            "session": answer.get("session"),
        }
        status, answer = await api_call(client, "POST", _DEVICE_SIGNING, body)
    if status != 200:
        return f"publishing cross-signing keys failed ({status}: {answer.get('error', answer)})"
    logger.info("%s: cross-signing keys published", user_id)
    return None
