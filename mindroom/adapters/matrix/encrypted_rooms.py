"""Which rooms of mindroom's accounts are end-to-end encrypted, for ``mindroom doctor``.

With matrix-nio's e2e extra (a dependency of mindroom) agents read and answer encrypted rooms
with their device keys (:mod:`mindroom.adapters.matrix.crypto`); the doctor lists the encrypted
rooms
and warns about an account whose key store is gone (what was encrypted for its old device
cannot be read again, unless the key backup has it: :func:`check_key_backup`). Installed
without the extra, an agent in an encrypted room tells it once (:mod:`mindroom.pipeline.notices`)
and
cannot answer there, and the doctor warns about each such room. It reads them with each
account's saved access token and never logs in: an account without a saved login (mindroom
has not run yet) or with a token the homeserver no longer accepts is reported as not checked,
and nothing changes on the homeserver or in the credentials file.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import nio

from mindroom.adapters.matrix.accounts import TOKEN_SUFFIX, Credentials, CredentialStore, localpart
from mindroom.adapters.matrix.crypto import E2E_AVAILABLE, store_file
from mindroom.adapters.matrix.key_backup import RECOVERY_ENV, last_outcome, recovery_key
from mindroom.checks import Check
from mindroom.errors import ConfigError, MatrixError

NOT_SUPPORTED = "end-to-end encrypted rooms cannot be read: matrix-nio's e2e extra is not installed"
SUPPORTED = "end-to-end encryption is on (matrix-nio with vodozemac)"
ENCRYPTION_FIX = "pip install 'matrix-nio[e2e]>=0.26,<0.27' (or create the DM without encryption)"
KEYS_FIX = (
    "restore mindroom_data/crypto/ from a backup; otherwise the agent runs as a new device and "
    "reads messages encrypted for the old one only from the key backup (`mindroom keys`)"
)
RECOVERY_FIX = (
    f"set {RECOVERY_ENV} to the recovery key that made the backup (printed by `mindroom keys "
    "recovery-key` on the machine that made it)"
)
CHECK_TIMEOUT_S = 20.0
# Bounded, unlike the bot's clients (which wait out a homeserver that is down): a doctor answers.
_CLIENT_CONFIG = nio.AsyncClientConfig(encryption_enabled=False, max_timeouts=1, request_timeout=10)


@dataclass
class _Rooms:
    """What one account's rooms look like: how many, and the encrypted ones' members."""

    joined: set[str] = field(default_factory=set)
    encrypted: dict[str, set[str]] = field(default_factory=dict)


def encryption_not_checked(why: str) -> Check:
    """The one line when the rooms cannot be read: the limitation is said all the same."""
    if E2E_AVAILABLE:
        return Check("encryption", True, f"rooms not checked ({why}); {SUPPORTED}")
    return Check(
        "encryption",
        True,
        f"not checked ({why}); {NOT_SUPPORTED}",
        "create DMs with the agents without encryption",
        warning=True,
    )


async def _rooms_of(homeserver: str, user_id: str, device_id: str, token: str) -> _Rooms:
    """The joined rooms of an account, read with its saved token; MatrixError when refused."""
    client = nio.AsyncClient(homeserver, user_id, config=_CLIENT_CONFIG)
    client.restore_login(user_id, device_id, token)
    try:
        joined = await client.joined_rooms()
        if not isinstance(joined, nio.JoinedRoomsResponse):
            raise MatrixError(joined.message)
        rooms = _Rooms(set(joined.rooms))
        for room_id in joined.rooms:
            state = await client.room_get_state_event(room_id, "m.room.encryption")
            if not isinstance(state, nio.RoomGetStateEventResponse):
                continue  # M_NOT_FOUND: not encrypted
            members = await client.joined_members(room_id)
            rooms.encrypted[room_id] = (
                {m.user_id for m in members.members}
                if isinstance(members, nio.JoinedMembersResponse)
                else set()
            )
        return rooms
    finally:
        await client.close()


def _tally(
    names: list[str], found: list[_Rooms | BaseException], unchecked: list[str]
) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """The rooms each account of ``names`` is in (joined room -> the names in it) and the
    encrypted ones (room -> its members), from the accounts' lookups ``found``; an account
    whose lookup failed is added to ``unchecked``."""
    rooms: dict[str, set[str]] = {}
    encrypted: dict[str, set[str]] = {}
    for name, result in zip(names, found, strict=True):
        if isinstance(result, BaseException):
            unchecked.append(name)
            continue
        for room_id in result.joined:
            rooms.setdefault(room_id, set()).add(name)
        encrypted.update(result.encrypted)
    return rooms, encrypted


async def check_encrypted_rooms(
    homeserver: str, credentials: CredentialStore, names: Sequence[str]
) -> list[Check]:
    """A line on the rooms the accounts of ``names`` are in, and a warning per encrypted one."""
    url = homeserver.rstrip("/")
    try:
        saved = {
            lp: creds
            for hs, lp in credentials.accounts()
            if hs.rstrip("/") == url and (creds := credentials.get(hs, lp)) and creds.access_token
        }
    except MatrixError as exc:
        return [encryption_not_checked(str(exc))]
    accounts = {name: saved[localpart(name)] for name in names if localpart(name) in saved}
    if not accounts:
        return [encryption_not_checked(f"no agent has logged in to {url} from this storage yet")]
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            found = await asyncio.gather(
                *(
                    _rooms_of(url, c.user_id, c.device_id, c.access_token)
                    for c in accounts.values()
                ),
                return_exceptions=True,
            )
    except TimeoutError:
        return [encryption_not_checked(f"the homeserver took over {CHECK_TIMEOUT_S:.0f} s")]
    own = {c.user_id for c in saved.values()}
    unchecked = [n for n in names if n not in accounts]
    rooms, encrypted = _tally(list(accounts), found, unchecked)
    if len(unchecked) == len(names):
        return [encryption_not_checked("the homeserver refused the agents' saved logins")]
    count = len(encrypted)
    summary = (
        f"{count} of the {len(rooms)} rooms the agents are in "
        f"{'is' if count == 1 else 'are'} end-to-end encrypted"
        if count
        else f"none of the {len(rooms)} rooms the agents are in is end-to-end encrypted"
    )
    if unchecked:
        summary += f" (not checked: {', '.join(unchecked)}: no saved login)"
    if E2E_AVAILABLE:
        checks = [Check("encryption", True, f"{summary}; {SUPPORTED}")]
        return checks + _lost_keys(credentials, accounts)
    checks = [Check("encryption", True, summary)]
    for room_id, members in sorted(encrypted.items()):
        people = ", ".join(sorted(members - own)) or "no one else"
        agents = ", ".join(sorted(rooms.get(room_id, ())))
        checks.append(
            Check(
                "encryption",
                True,
                f"{room_id} (with {people}) is end-to-end encrypted; {agents} cannot read it",
                ENCRYPTION_FIX,
                warning=True,
            )
        )
    return checks


def _lost_keys(credentials: CredentialStore, accounts: dict[str, Credentials]) -> list[Check]:
    """A warning per account whose device published keys and whose key store is gone."""
    found = []
    for name, creds in accounts.items():
        keys = credentials.path.parent / "crypto" / localpart(name)
        if creds.keys_published and not store_file(keys, creds.user_id, creds.device_id).exists():
            found.append(
                Check(
                    "encryption",
                    True,
                    f"{name}: the encryption keys of device {creds.device_id} are gone from {keys}",
                    KEYS_FIX,
                    warning=True,
                )
            )
    return found


def check_key_backup(data_dir: Path, names: Sequence[str], enabled: bool) -> list[Check]:
    """A line on the key backup (from what each account's last run recorded: nothing is
    asked of the homeserver), and a warning per account running without one."""
    if not E2E_AVAILABLE:
        return []
    if not enabled:
        return [
            Check(
                "key backup",
                True,
                "off (matrix.key_backup: false): a re-installed bot "
                "cannot read earlier encrypted messages",
                warning=True,
            )
        ]
    try:
        recovery = recovery_key(data_dir, create=False)
    except ConfigError as exc:
        return [Check("key backup", False, str(exc), RECOVERY_FIX)]
    if recovery is None:
        return [Check("key backup", True, "no recovery key yet: the first start makes one")]
    on: dict[str, int] = {}
    checks: list[Check] = []
    for name in names:
        for folder in (localpart(name), f"{localpart(name)}{TOKEN_SUFFIX}"):
            outcome = last_outcome(data_dir / "crypto" / folder)
            if outcome is None:
                continue
            _, state, detail, count = outcome
            if state == "on":
                on[name] = on.get(name, 0) + count
            else:
                checks.append(
                    Check(
                        "key backup",
                        True,
                        f"{name}: no key backup: {detail}",
                        RECOVERY_FIX,
                        warning=True,
                    )
                )
    summary = (
        f"room keys of {len(on)} of {len(names)} accounts backed up on the homeserver "
        f"({sum(on.values())} keys); recovery key from {recovery.source}"
    )
    if recovery.source != RECOVERY_ENV:
        summary += " (keep a copy off this machine: `mindroom keys recovery-key`)"
    return [Check("key backup", True, summary), *checks]
