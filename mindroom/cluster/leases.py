"""Which process runs which account when several share one database: leases and hand-overs.

With ``storage.database`` set, several ``mindroom run`` processes (on one machine or many)
share the ledger. Each account (an agent, a team, the router) is run by one process at a time:
the one whose row in ``leases`` names it and has not expired. A holder renews its leases every
third of ``storage.failover_seconds``; a lease left unrenewed that long (its process was killed,
its machine lost) is taken by another process, which starts the account there.

``processes`` lists the running processes with the accounts each is pinned to
(``mindroom run --agents``). A pinned account that another process runs (it took it while the
pinned one was down) is handed back once the pinned process is seen again.

Work moves with the leases through the ledger's ``handled`` rows. Each names its ``agent`` (the
account whose holder answers it) and its ``owner`` (the process working on it):

* A message is claimed only by the holder of its lead account, with ``owner`` its own id.
* A message whose answer belongs to an account another process runs (the router model chose
  it, an answer handed off to it) is *handed over*: a row of its own, ``queued`` for that
  account, taken by its holder.
* A row whose owner is not the holder of its account (the owner died or lost the lease) is
  *orphaned*: the holder takes it and answers it again, as a restart resumes its own.

Each step is one conditional statement, so two processes never take the same row or lease.
Times are the processes' clocks: they must agree to well within ``failover_seconds`` (NTP).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from mindroom.store.database import Database
from mindroom.store.whole_writes import whole

HANDOVER_SEP = ">"  # a hand-over's row key: <event id>><account>
UNASSIGNED = "router"  # whose holder takes rows that name no account (claimed before leases)


@dataclass(frozen=True)
class Lease:
    """Who runs account ``name`` until ``expires_at`` (Unix time)."""

    name: str
    owner: str
    expires_at: float


@dataclass(frozen=True)
class ProcessInfo:
    """A running ``mindroom run`` as its last heartbeat described it."""

    owner: str
    pins: tuple[str, ...]
    host: str
    pid: int
    seen_at: float


@dataclass(frozen=True)
class Orphan:
    """A row whose account this process now runs but another process was answering."""

    key: str
    status: str
    owner: str | None
    agent: str | None = None  # the account it is filed under (None: the router's)


def handover_key(event_id: str, agent: str) -> str:
    """The ledger key of ``event_id`` handed over to ``agent``."""
    return f"{event_id}{HANDOVER_SEP}{agent}"


class Leases:
    """Leases, heartbeats and hand-overs of process ``owner`` on the ledger's database."""

    def __init__(self, db: Database, writes: set[asyncio.Future[Any]], owner: str) -> None:
        self._db = db
        self._writes = writes  # the ledger's: closing it waits for these too
        self.owner = owner

    # -- leases -----------------------------------------------------------------------------

    @whole
    async def acquire(self, name: str, ttl: float, now: float | None = None) -> bool:
        """Take (or keep) the lease on ``name`` for ``ttl`` seconds; False while another
        process holds it unexpired."""
        now = time.time() if now is None else now
        cursor = await self._db.execute(
            "INSERT INTO leases (name, owner, expires_at, taken_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (name) DO UPDATE SET owner = excluded.owner,"
            " expires_at = excluded.expires_at,"
            " taken_at = CASE WHEN leases.owner = excluded.owner THEN leases.taken_at"
            " ELSE excluded.taken_at END"
            " WHERE leases.owner = excluded.owner OR leases.expires_at < ?",
            (name, self.owner, now + ttl, now, now),
        )
        await self._db.commit()
        return cursor.rowcount == 1

    @whole
    async def renew(self, names: set[str], ttl: float, now: float | None = None) -> set[str]:
        """Extend the leases on ``names`` this process still holds; returns those."""
        if not names:
            return set()
        now = time.time() if now is None else now
        held = set()
        for name in sorted(names):  # one row each: a lost lease is told apart
            cursor = await self._db.execute(
                "UPDATE leases SET expires_at = ? WHERE name = ? AND owner = ?",
                (now + ttl, name, self.owner),
            )
            if cursor.rowcount == 1:
                held.add(name)
        await self._db.commit()
        return held

    @whole
    async def release(self, names: set[str]) -> None:
        """Give up the leases on ``names`` (another process may take them at once)."""
        for name in sorted(names):
            await self._db.execute(
                "DELETE FROM leases WHERE name = ? AND owner = ?", (name, self.owner)
            )
        await self._db.commit()

    async def holders(self) -> dict[str, Lease]:
        """Every lease, expired or not, by account name."""
        async with self._db.query("SELECT name, owner, expires_at FROM leases") as cursor:
            rows = await cursor.fetchall()
        return {row.name: Lease(row.name, row.owner, row.expires_at) for row in rows}

    # -- processes --------------------------------------------------------------------------

    @whole
    async def heartbeat(
        self, pins: tuple[str, ...], host: str, pid: int, now: float | None = None
    ) -> None:
        """Say this process is alive, pinned to ``pins``."""
        now = time.time() if now is None else now
        await self._db.execute(
            "INSERT INTO processes (owner, pins, host, pid, started_at, seen_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (owner) DO UPDATE SET"
            " pins = excluded.pins, seen_at = excluded.seen_at",
            (self.owner, json.dumps(list(pins)), host, pid, now, now),
        )
        await self._db.commit()

    @whole
    async def leave(self, forget_before: float | None = None) -> None:
        """This process stops: its leases are released and its heartbeat removed (with those
        of processes not seen since ``forget_before``)."""
        await self._db.execute("DELETE FROM leases WHERE owner = ?", (self.owner,))
        await self._db.execute("DELETE FROM processes WHERE owner = ?", (self.owner,))
        if forget_before is not None:
            await self._db.execute("DELETE FROM processes WHERE seen_at < ?", (forget_before,))
        await self._db.commit()

    async def processes(self, seen_after: float) -> list[ProcessInfo]:
        """The processes whose heartbeat is newer than ``seen_after``."""
        async with self._db.query(
            "SELECT owner, pins, host, pid, seen_at FROM processes WHERE seen_at >= ?"
            " ORDER BY started_at",
            (seen_after,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [
            ProcessInfo(r.owner, tuple(json.loads(r.pins)), r.host, r.pid, r.seen_at) for r in rows
        ]

    # -- accounts ---------------------------------------------------------------------------

    @whole
    async def note_account(self, name: str, user_id: str) -> None:
        """Record the Matrix user of account ``name`` (other processes route by it)."""
        await self._db.execute(
            "INSERT INTO agent_accounts (name, user_id) VALUES (?, ?)"
            " ON CONFLICT (name) DO UPDATE SET user_id = excluded.user_id",
            (name, user_id),
        )
        await self._db.commit()

    async def accounts(self) -> dict[str, str]:
        """The Matrix user of every account any process ran, by name."""
        async with self._db.query("SELECT name, user_id FROM agent_accounts") as cursor:
            return {row.name: row.user_id for row in await cursor.fetchall()}

    # -- work -------------------------------------------------------------------------------

    @whole
    async def hand_over(
        self, event_id: str, room_id: str, agent: str, source: dict[str, Any]
    ) -> bool:
        """Queue ``event_id`` for the holder of ``agent``; False when it already was."""
        cursor = await self._db.execute(
            "INSERT INTO handled (event_id, room_id, responders, source, status, claimed_at,"
            " agent, owner) VALUES (?, ?, ?, ?, 'queued', ?, ?, NULL)"
            " ON CONFLICT (event_id) DO NOTHING",
            (
                handover_key(event_id, agent),
                room_id,
                json.dumps([agent]),
                json.dumps(source),
                time.time(),
                agent,
            ),
        )
        await self._db.commit()
        return cursor.rowcount == 1

    async def orphans(self, agents: set[str], newer_than: float) -> list[Orphan]:
        """Unfinished rows of ``agents`` claimed after ``newer_than`` that this process is not
        answering: queued for one of them, or left by another owner (oldest first)."""
        if not agents:
            return []
        names = sorted(agents)
        marks = ", ".join("?" for _ in names)
        unassigned = " OR agent IS NULL" if UNASSIGNED in agents else ""
        async with self._db.query(
            "SELECT event_id, status, owner, agent FROM handled"
            " WHERE status IN ('claimed', 'queued') AND claimed_at >= ?"
            f" AND (agent IN ({marks}){unassigned})"
            " AND (owner IS NULL OR owner <> ?) ORDER BY claimed_at",
            (newer_than, *names, self.owner),
        ) as cursor:
            rows = await cursor.fetchall()
        return [Orphan(row.event_id, row.status, row.owner, row.agent) for row in rows]

    @whole
    async def take(self, orphan: Orphan) -> tuple[str, tuple[str, ...], dict[str, Any]] | None:
        """Make ``orphan`` this process's: its (room, responders, source); None when another
        process took it first or it was finished meanwhile."""
        cursor = await self._db.execute(
            "UPDATE handled SET status = 'claimed', owner = ?"
            " WHERE event_id = ? AND status = ? AND COALESCE(owner, '') = ?",
            (self.owner, orphan.key, orphan.status, orphan.owner or ""),
        )
        if cursor.rowcount != 1:
            await self._db.commit()
            return None
        async with self._db.query(
            "SELECT room_id, responders, source FROM handled WHERE event_id = ?", (orphan.key,)
        ) as rows:
            row = await rows.fetchone()
        await self._db.commit()
        return row.room_id, tuple(json.loads(row.responders)), json.loads(row.source)
