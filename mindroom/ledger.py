"""The durable record that makes replies exactly-once across restarts.

One SQLite file (``mindroom_data/ledger.db``, WAL, busy timeout) holds:

* ``handled``: every triggering event mindroom decided to answer, claimed *before* the reply is
  produced and marked done after it was sent. A restart (clean or ``kill -9``) finds claimed but
  unfinished events and answers them; replies are sent with transaction IDs derived from the
  event, so a reply that did reach the homeserver before the crash is not posted twice.
* ``sync_tokens``: each account's last processed sync position, so messages that arrived while
  the bot was down are delivered after a restart instead of being lost.
* ``session_generations``: bumped by ``!new`` to start a fresh conversation in a room or thread.
* ``compactions``: long threads continue in a new session carrying a summary of the old one.

This is control state, not user data: deleting the file loses no memory, it only forgets which
messages were already answered.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiosqlite

_SCHEMA = """
CREATE TABLE IF NOT EXISTS handled (
    event_id   TEXT PRIMARY KEY,
    room_id    TEXT NOT NULL,
    responders TEXT NOT NULL,
    source     TEXT NOT NULL,
    status     TEXT NOT NULL,
    claimed_at REAL NOT NULL,
    done_at    REAL
);
CREATE INDEX IF NOT EXISTS handled_pending ON handled (status, claimed_at);
CREATE TABLE IF NOT EXISTS sync_tokens (
    account TEXT PRIMARY KEY,
    token   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS compactions (
    base_session TEXT PRIMARY KEY,
    generation   INTEGER NOT NULL,
    carried      TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS session_generations (
    room_id     TEXT NOT NULL,
    thread_root TEXT NOT NULL,
    generation  INTEGER NOT NULL,
    PRIMARY KEY (room_id, thread_root)
);
"""


@dataclass(frozen=True)
class PendingEvent:
    """A claimed event whose reply was not confirmed sent."""

    event_id: str
    room_id: str
    responders: tuple[str, ...]
    source: dict[str, Any]


class Ledger:
    """Async access to the ledger database. Open with :meth:`open`, close with :meth:`close`."""

    def __init__(self, db: aiosqlite.Connection) -> None:
        self._db = db

    @classmethod
    async def open(cls, path: Path) -> Ledger:
        """Open (creating if needed) the ledger at ``path``."""
        path.parent.mkdir(parents=True, exist_ok=True)
        db = await aiosqlite.connect(path, timeout=30)
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=NORMAL")
        await db.executescript(_SCHEMA)
        await db.commit()
        return cls(db)

    async def close(self) -> None:
        """Close the connection."""
        await self._db.close()

    async def claim(
        self, event_id: str, room_id: str, responders: tuple[str, ...], source: dict[str, Any]
    ) -> bool:
        """Record that ``event_id`` will be answered; False when it already was claimed."""
        cursor = await self._db.execute(
            "INSERT OR IGNORE INTO handled (event_id, room_id, responders, source, status,"
            " claimed_at) VALUES (?, ?, ?, ?, 'claimed', ?)",
            (event_id, room_id, json.dumps(responders), json.dumps(source), time.time()),
        )
        await self._db.commit()
        return cursor.rowcount == 1

    async def is_handled(self, event_id: str) -> bool:
        """True when ``event_id`` was claimed (answered or being answered) before."""
        async with self._db.execute(
            "SELECT 1 FROM handled WHERE event_id = ?", (event_id,)
        ) as cursor:
            return await cursor.fetchone() is not None

    async def finish(self, event_id: str, status: str = "done") -> None:
        """Mark ``event_id`` answered (or ``skipped``/``failed``)."""
        await self._db.execute(
            "UPDATE handled SET status = ?, done_at = ? WHERE event_id = ?",
            (status, time.time(), event_id),
        )
        await self._db.commit()

    async def pending(self, newer_than: float) -> list[PendingEvent]:
        """Claimed, unfinished events claimed after ``newer_than`` (a Unix time), oldest first."""
        async with self._db.execute(
            "SELECT event_id, room_id, responders, source FROM handled"
            " WHERE status = 'claimed' AND claimed_at >= ? ORDER BY claimed_at",
            (newer_than,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [
            PendingEvent(row[0], row[1], tuple(json.loads(row[2])), json.loads(row[3]))
            for row in rows
        ]

    async def expire(self, older_than: float) -> int:
        """Give up on claimed events from before ``older_than``; returns how many."""
        cursor = await self._db.execute(
            "UPDATE handled SET status = 'expired', done_at = ?"
            " WHERE status = 'claimed' AND claimed_at < ?",
            (time.time(), older_than),
        )
        await self._db.commit()
        return cursor.rowcount

    async def sync_token(self, account: str) -> str | None:
        """The saved sync position of ``account``."""
        async with self._db.execute(
            "SELECT token FROM sync_tokens WHERE account = ?", (account,)
        ) as cursor:
            row = await cursor.fetchone()
        return row[0] if row else None

    async def save_sync_token(self, account: str, token: str) -> None:
        """Remember ``account``'s sync position (after its events were handled)."""
        await self._db.execute(
            "INSERT INTO sync_tokens (account, token) VALUES (?, ?)"
            " ON CONFLICT(account) DO UPDATE SET token = excluded.token",
            (account, token),
        )
        await self._db.commit()

    async def session_generation(self, room_id: str, thread_root: str | None) -> int:
        """How many times ``!new`` restarted the conversation here."""
        async with self._db.execute(
            "SELECT generation FROM session_generations WHERE room_id = ? AND thread_root = ?",
            (room_id, thread_root or ""),
        ) as cursor:
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def new_session(self, room_id: str, thread_root: str | None) -> int:
        """Start a fresh conversation here; returns the new generation."""
        generation = await self.session_generation(room_id, thread_root) + 1
        await self._db.execute(
            "INSERT INTO session_generations (room_id, thread_root, generation) VALUES (?, ?, ?)"
            " ON CONFLICT(room_id, thread_root) DO UPDATE SET generation = excluded.generation",
            (room_id, thread_root or "", generation),
        )
        await self._db.commit()
        return generation

    async def compaction(self, base_session: str) -> tuple[int, str]:
        """How often a session was compacted, and what its summary carries over."""
        async with self._db.execute(
            "SELECT generation, carried FROM compactions WHERE base_session = ?", (base_session,)
        ) as cursor:
            row = await cursor.fetchone()
        return (int(row[0]), str(row[1])) if row else (0, "")

    async def save_compaction(self, base_session: str, generation: int, carried: str) -> None:
        """Record a compaction of ``base_session``."""
        await self._db.execute(
            "INSERT INTO compactions (base_session, generation, carried) VALUES (?, ?, ?)"
            " ON CONFLICT(base_session) DO UPDATE SET generation = excluded.generation,"
            " carried = excluded.carried",
            (base_session, generation, carried),
        )
        await self._db.commit()
