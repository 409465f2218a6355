"""Server-side key backup, so a re-installed bot reads its encrypted rooms again.

Every room key an agent's device receives is backed up on the homeserver (``/room_keys``,
algorithm ``m.megolm_backup.v1.curve25519-aes-sha2``, as Element does): each Megolm session
is encrypted to the backup's Curve25519 public key (vodozemac's ``PkEncryption``, the ECIES
of libolm that Element and matrix-rust-sdk use), so the homeserver holds them unreadable.

The private key comes from one **recovery key** for all of mindroom's accounts: each account's
backup key is derived from it with HKDF-SHA256 and the account's user ID, so adding an agent
needs nothing new. The recovery key is read from ``MINDROOM_RECOVERY_KEY`` (the environment or
the ``.env`` beside ``config.yaml``), else from ``mindroom_data/crypto/recovery-key``, made on
the first encrypted start (mode 0600). It is written like Element's recovery keys (base58, a
prefix and a parity byte), so a mistyped key is refused at start instead of silently making a
new backup. ``mindroom keys recovery-key`` prints it: keep a copy off the machine, since the
file goes with the key stores it would restore.

A new device (a first start, or one whose key store is gone) restores the whole backup once;
a message whose key is missing later is looked up in the backup by its session before the
sender is asked to send it again. A backup already on the homeserver that was made with
another key is never replaced: the account runs without backup and the log (and ``doctor``)
says which recovery key is needed. ``matrix.key_backup: false`` turns it off.

What is kept locally (``backup.db`` beside the account's key stores): which sessions went to
which backup version, whether this device has restored, and the last state for ``doctor``.
Keys read from the backup are trusted as the account's own: only the account (or the
homeserver's operator) can write to its backup.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import nio
import vodozemac
from Crypto.Hash import SHA256
from Crypto.Protocol.KDF import HKDF
from nio.crypto.sessions import InboundGroupSession

from mindroom.adapters.matrix.crypto import api_call
from mindroom.atomic import fsync_dir, write_temp
from mindroom.errors import ConfigError
from mindroom.store.migrations import open_store, transaction
from mindroom.store.schemas import KEY_BACKUP

logger = logging.getLogger(__name__)

ALGORITHM = "m.megolm_backup.v1.curve25519-aes-sha2"
MEGOLM = "m.megolm.v1.aes-sha2"
RECOVERY_ENV = "MINDROOM_RECOVERY_KEY"
RECOVERY_FILE = "recovery-key"
STATE_FILE = "backup.db"
_VERSION = "/_matrix/client/v3/room_keys/version"
_KEYS = "/_matrix/client/v3/room_keys/keys"
_UPLOAD_BATCH = 100

# -- the recovery key -----------------------------------------------------------------------------

_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_PREFIX = b"\x8b\x01"


def _parity(data: bytes) -> int:
    parity = 0
    for byte in data:
        parity ^= byte
    return parity


def encode_recovery_key(key: bytes) -> str:
    """``key`` (32 bytes) as a recovery key: base58 of prefix, key and parity, in fours."""
    data = _PREFIX + key
    data += bytes([_parity(data)])
    number = int.from_bytes(data, "big")
    digits = ""
    while number:
        number, rest = divmod(number, 58)
        digits = _B58[rest] + digits
    digits = "1" * (len(data) - len(data.lstrip(b"\0"))) + digits
    return " ".join(digits[i : i + 4] for i in range(0, len(digits), 4))


def decode_recovery_key(text: str) -> bytes:
    """The 32-byte key of a recovery key; ValueError saying what is wrong with it."""
    digits = "".join(text.split())
    number = 0
    for char in digits:
        if char not in _B58:
            raise ValueError(f"{char!r} is not a character of a recovery key")
        number = number * 58 + _B58.index(char)
    body = number.to_bytes((number.bit_length() + 7) // 8, "big") if number else b""
    data = b"\0" * (len(digits) - len(digits.lstrip("1"))) + body
    if len(data) != len(_PREFIX) + 33 or not data.startswith(_PREFIX):
        raise ValueError("it is not a recovery key (wrong length or prefix)")
    if _parity(data[:-1]) != data[-1]:
        raise ValueError("its check digit does not match: a character is mistyped")
    return data[len(_PREFIX) : -1]


@dataclass(frozen=True)
class RecoveryKey:
    """mindroom's recovery key and where it came from (for the log and ``doctor``)."""

    key: bytes
    source: str

    @property
    def text(self) -> str:
        return encode_recovery_key(self.key)


def recovery_key(data_dir: Path, *, create: bool = True) -> RecoveryKey | None:
    """The recovery key: ``MINDROOM_RECOVERY_KEY``, else the file under ``data_dir``, else
    (``create``) a new one saved there. ConfigError for a malformed key; None when there is
    none and ``create`` is off."""
    given = os.environ.get(RECOVERY_ENV, "").strip()
    if given:
        try:
            return RecoveryKey(decode_recovery_key(given), RECOVERY_ENV)
        except ValueError as exc:
            raise ConfigError(f"{RECOVERY_ENV} is not usable: {exc}") from None
    path = data_dir / "crypto" / RECOVERY_FILE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        if not create:
            return None
        made = RecoveryKey(os.urandom(32), str(path))
        temp = write_temp(path, made.text + "\n", mode=0o600)
        try:  # a link never replaces: of processes starting together, one key is kept
            os.link(temp, path)
        except FileExistsError:
            return recovery_key(data_dir, create=False)
        finally:
            temp.unlink(missing_ok=True)
        fsync_dir(path.parent)
        logger.warning(
            "made a recovery key for the encryption key backup in %s: keep a copy off this "
            "machine (`mindroom keys recovery-key` prints it; give it back as %s): a "
            "re-installed bot needs it to read earlier encrypted messages",
            path,
            RECOVERY_ENV,
        )
        return made
    try:
        return RecoveryKey(decode_recovery_key(text), str(path))
    except ValueError as exc:
        raise ConfigError(f"{path} is not usable: {exc}") from None


def backup_secret_key(recovery: bytes, user_id: str) -> vodozemac.Curve25519SecretKey:
    """The backup key of account ``user_id``: derived from the recovery key, one per account."""
    seed = HKDF(recovery, 32, b"", SHA256, context=f"mindroom key backup v1 {user_id}".encode())
    assert isinstance(seed, bytes)
    return vodozemac.Curve25519SecretKey.from_bytes(seed)


# -- one session's backup data --------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def seal(public: vodozemac.Curve25519PublicKey, session: InboundGroupSession) -> dict[str, Any]:
    """The ``KeyBackupData`` of ``session``, its key encrypted to the backup's public key."""
    plain = {
        "algorithm": MEGOLM,
        "sender_key": session.sender_key,
        "sender_claimed_keys": {"ed25519": session.ed25519},
        "forwarding_curve25519_key_chain": session.forwarding_chain,
        "session_key": session.export_session(session.first_known_index),
    }
    message = vodozemac.PkEncryption.from_key(public).encrypt(json.dumps(plain).encode())
    return {
        "first_message_index": session.first_known_index,
        "forwarded_count": len(session.forwarding_chain),
        "is_verified": False,
        "session_data": {
            "ephemeral": _b64(message.ephemeral_key),
            "ciphertext": _b64(message.ciphertext),
            "mac": _b64(message.mac),
        },
    }


def unseal(
    secret: vodozemac.Curve25519SecretKey, room_id: str, data: dict[str, Any]
) -> InboundGroupSession:
    """The session in one ``KeyBackupData``; ValueError when it cannot be read."""
    try:
        sealed = data["session_data"]
        message = vodozemac.Message(
            _unb64(sealed["ciphertext"]), _unb64(sealed["mac"]), _unb64(sealed["ephemeral"])
        )
        plain = json.loads(vodozemac.PkDecryption.from_key(secret).decrypt(message))
        if plain.get("algorithm", MEGOLM) != MEGOLM:
            raise ValueError(f"a session of {plain.get('algorithm')}")
        return InboundGroupSession.import_session(
            plain["session_key"],
            plain["sender_claimed_keys"]["ed25519"],
            plain["sender_key"],
            room_id,
            plain.get("forwarding_curve25519_key_chain") or [],
        )
    except ValueError:
        raise
    except Exception as exc:  # vodozemac's errors, a missing field: one unreadable entry
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


# -- the account's backup -------------------------------------------------------------------------


class _State:
    """``backup.db``: what this account backed up and restored, and the last outcome."""

    def __init__(self, path: Path) -> None:
        # no WAL (one process per account's key stores); the schema: mindroom.store.schemas
        self.db = open_store(path, KEY_BACKUP, wal=False, autocommit=True)
        os.chmod(path, 0o600)

    def backed_up(self, version: str) -> dict[tuple[str, str], int]:
        rows = self.db.execute(
            "SELECT room_id, session_id, first_index FROM backed_up WHERE version = ?", (version,)
        )
        return {(row["room_id"], row["session_id"]): row["first_index"] for row in rows}

    def mark(self, version: str, sessions: Iterable[tuple[str, str, int]]) -> None:
        with transaction(self.db):
            self.db.executemany(
                "INSERT OR REPLACE INTO backed_up VALUES (?, ?, ?, ?)",
                [(version, room, session, index) for room, session, index in sessions],
            )

    def restored(self, device_id: str) -> bool:
        row = self.db.execute("SELECT 1 FROM restored WHERE device_id = ?", (device_id,))
        return row.fetchone() is not None

    def mark_restored(self, device_id: str, version: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO restored VALUES (?, ?)", (device_id, version))

    def record(self, version: str | None, state: str, detail: str) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO outcome VALUES (1, ?, ?, ?)", (version, state, detail)
        )

    def close(self) -> None:
        self.db.close()


def last_outcome(store_path: Path) -> tuple[str | None, str, str, int] | None:
    """What the account's backup last did: (version, state, detail, sessions backed up), read
    without changing anything (for ``doctor``); None when it never ran."""
    path = store_path / STATE_FILE
    if not path.exists():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    try:
        row = db.execute("SELECT version, state, detail FROM outcome").fetchone()
        if row is None:
            return None
        (count,) = db.execute(
            "SELECT count(*) FROM backed_up WHERE version = ?", (row["version"],)
        ).fetchone()
        return row["version"], row["state"], row["detail"], count
    except sqlite3.Error:
        return None
    finally:
        db.close()


class KeyBackup:
    """One account's backup version: uploads new room keys, restores and looks up old ones."""

    def __init__(
        self,
        client: nio.AsyncClient,
        version: str,
        secret: vodozemac.Curve25519SecretKey,
        state: _State,
    ) -> None:
        self.client = client
        self.version = version
        self.secret = secret
        self.public = secret.public_key()
        self.state = state
        self._sent = state.backed_up(version)

    @classmethod
    async def open(cls, client: nio.AsyncClient, recovery: RecoveryKey) -> KeyBackup | None:
        """The account's backup (made on the homeserver when it has none), after restoring it
        once into a new device; None (logged, recorded for ``doctor``) when it cannot be used."""
        if client.olm is None or not client.store_path:
            return None
        state = _State(Path(client.store_path) / STATE_FILE)
        secret = backup_secret_key(recovery.key, client.user_id)
        public = secret.public_key().to_base64()
        try:
            version, why = await _current_version(client, public)
        except Exception as exc:  # the homeserver: the account runs on, without backup
            version, why = None, f"the homeserver's backup could not be read ({exc})"
        if version is None:
            logger.warning("%s: no key backup: %s", client.user_id, why)
            state.record(None, "off", why)
            state.close()
            return None
        backup = cls(client, version, secret, state)
        if not state.restored(client.device_id):
            restored = await backup.restore()
            logger.info(
                "%s: restored %d room keys from key backup version %s",
                client.user_id,
                restored,
                version,
            )
            state.mark_restored(client.device_id, version)
        state.record(version, "on", why)
        return backup

    def close(self) -> None:
        self.state.close()

    def _pending(self) -> Iterator[InboundGroupSession]:
        assert self.client.olm is not None
        for session in self.client.olm.inbound_group_store:
            known = self._sent.get((session.room_id, session.id))
            if known is None or session.first_known_index < known:
                yield session

    async def upload(self) -> int:
        """Back up the room keys not backed up yet; how many went up. Failures are logged:
        the next sync tries again."""
        if self.client.olm is None:
            return 0
        pending = list(self._pending())
        sent = 0
        for start in range(0, len(pending), _UPLOAD_BATCH):
            batch = pending[start : start + _UPLOAD_BATCH]
            rooms: dict[str, dict[str, Any]] = {}
            for session in batch:
                sessions = rooms.setdefault(session.room_id, {"sessions": {}})["sessions"]
                sessions[session.id] = seal(self.public, session)
            status, answer = await api_call(
                self.client, "PUT", f"{_KEYS}?version={quote(self.version)}", {"rooms": rooms}
            )
            if status != 200:
                logger.warning(
                    "%s: backing up %d room keys failed (%s: %s)",
                    self.client.user_id,
                    len(batch),
                    status,
                    answer.get("error", answer),
                )
                return sent
            marks = [(s.room_id, s.id, s.first_known_index) for s in batch]
            self.state.mark(self.version, marks)
            self._sent.update({(room, sid): index for room, sid, index in marks})
            sent += len(batch)
        if sent:
            logger.debug("%s: backed up %d room keys", self.client.user_id, sent)
        return sent

    async def restore(self) -> int:
        """Import every session of the backup the device lacks (or holds from a later
        message on); how many were imported."""
        status, answer = await api_call(
            self.client, "GET", f"{_KEYS}?version={quote(self.version)}"
        )
        if status != 200:
            logger.warning(
                "%s: reading key backup %s failed (%s: %s)",
                self.client.user_id,
                self.version,
                status,
                answer.get("error", answer),
            )
            return 0
        entries = [
            (room_id, session_id, data)
            for room_id, room in (answer.get("rooms") or {}).items()
            for session_id, data in (room.get("sessions") or {}).items()
        ]
        return self._import(entries)

    async def fetch(self, room_id: str, session_id: str) -> bool:
        """Look up one session in the backup (a message whose key never reached this device);
        True when it was imported and the message can be decrypted now."""
        path = f"{_KEYS}/{quote(room_id, safe='')}/{quote(session_id, safe='')}"
        status, answer = await api_call(self.client, "GET", f"{path}?version={quote(self.version)}")
        if status != 200:
            return False  # M_NOT_FOUND: the backup does not have it either
        return self._import([(room_id, session_id, answer)]) > 0

    def _import(self, entries: list[tuple[str, str, dict[str, Any]]]) -> int:
        olm = self.client.olm
        assert olm is not None
        marks: list[tuple[str, str, int]] = []
        imported = 0
        for room_id, session_id, data in entries:
            try:
                session = unseal(self.secret, room_id, data)
            except ValueError as exc:
                logger.warning(
                    "%s: room key %s in backup %s cannot be read: %s",
                    self.client.user_id,
                    session_id,
                    self.version,
                    exc,
                )
                continue
            if session.id != session_id:
                logger.warning(
                    "%s: backup entry %s holds session %s; skipped",
                    self.client.user_id,
                    session_id,
                    session.id,
                )
                continue
            held = olm.inbound_group_store.get(room_id, session.sender_key, session.id)
            if held is not None and held.first_known_index <= session.first_known_index:
                marks.append((room_id, session.id, session.first_known_index))
                continue  # a better copy held here goes up at the next upload
            olm.inbound_group_store[room_id][session.sender_key][session.id] = session
            olm.save_inbound_group_session(session)
            marks.append((room_id, session.id, session.first_known_index))
            imported += 1
        # what came from the backup is in it already (at the index it has there, or better)
        self.state.mark(self.version, marks)
        self._sent.update({(room, sid): index for room, sid, index in marks})
        return imported


async def _current_version(client: nio.AsyncClient, public: str) -> tuple[str | None, str]:
    """The backup version to use (made when there is none), with what was found; None (and
    why) when the homeserver's backup belongs to another key."""
    status, found = await api_call(client, "GET", _VERSION)
    if status == 404:
        auth_data: dict[str, Any] = {"public_key": public}
        assert client.olm is not None
        signature = client.olm.sign_json(auth_data)
        auth_data["signatures"] = {client.user_id: {f"ed25519:{client.device_id}": signature}}
        status, made = await api_call(
            client, "POST", _VERSION, {"algorithm": ALGORITHM, "auth_data": auth_data}
        )
        if status != 200 or "version" not in made:
            return None, f"making a backup failed ({status}: {made.get('error', made)})"
        logger.info("%s: made key backup version %s", client.user_id, made["version"])
        return str(made["version"]), "made"
    if status != 200:
        return None, f"the homeserver answered {status}: {found.get('error', found)}"
    version = str(found.get("version"))
    if found.get("algorithm") != ALGORITHM:
        return None, f"backup version {version} uses {found.get('algorithm')}, not {ALGORITHM}"
    if (found.get("auth_data") or {}).get("public_key") != public:
        return None, (
            f"backup version {version} on the homeserver was made with another recovery key; "
            f"set {RECOVERY_ENV} to the key that made it (mindroom keeps that backup as it is)"
        )
    return version, "found"


async def open_backup(client: nio.AsyncClient, data_dir: Path, enabled: bool) -> KeyBackup | None:
    """The key backup of a logged-in account (None without encryption, when ``enabled`` is off
    or when it cannot be used: logged). ConfigError for a malformed recovery key."""
    if not enabled or client.olm is None:
        return None
    recovery = recovery_key(data_dir)
    assert recovery is not None
    try:
        return await KeyBackup.open(client, recovery)
    except Exception:  # the backup is for a later re-install: never worth this start
        logger.exception("%s: opening the key backup failed", client.user_id)
        return None
