"""The session book: which Agno session each conversation is in now, and that session's life.

One row per conversation (``conversation_sessions`` in ``mindroom_data/ledger.db``), keyed by
the conversation: an agent or team in a room or thread, and the person for a private one
(:attr:`mindroom.pipeline.turns.TurnPlan.conversation`). The row names the conversation's current
session and keeps what ``!status`` shows: when it started and why, when it was last active,
its turns and token counts (from the model's usage reports, saved after every turn).

A conversation's session changes when:

* ``!new`` / ``!reset`` starts a new *base* (the plan's session id carries the generation):
  the row starts over (counts at zero; the compaction count is per session, so it is zero too);
* it went stale (:mod:`mindroom.sessions.freshness`): a DM or a room answered in the timeline,
  at the daily boundary or after being idle;
* a turn could not recover from a context overflow, or its stored history is corrupt
  (:meth:`SessionBook.rotate`).

A rotated session is ``<base>~s<serial>``; the session before it is kept in Agno's store (the
flush extracts what it still holds). Without a row (a conversation from before this book),
the session is the base itself, so conversations go on across the upgrade.

The book shares the ledger's database connection (and its running writes, see
:mod:`mindroom.store.whole_writes`); an asyncio lock makes "read the row, decide, write it" one
step,
so two messages arriving together in a stale DM start one fresh session, not two.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mindroom.adapters.agno.turn_types import TurnUsage
from mindroom.store.database import Database
from mindroom.store.whole_writes import whole

COLUMNS = (
    "key, owner, requester, room_id, thread_root, kind, base, session_id, serial, started_at,"
    " last_active_at, turns, input_tokens, output_tokens, context_tokens, model, reason,"
    " previous"
)

_REPLACED = ", ".join(  # a row put again replaces the one there (every column but the key)
    f"{c} = excluded.{c}" for c in (c.strip() for c in COLUMNS.split(",")) if c != "key"
)


@dataclass(frozen=True)
class SessionRecord:
    """A conversation's current session and what is known about it."""

    key: str  # the conversation (see the module docstring)
    owner: str  # the agent or team
    requester: str  # the person of a private conversation; '' when shared
    room_id: str
    thread_root: str  # '' outside a thread
    kind: str  # thread, dm or group (mindroom.sessions.freshness.ConversationKind)
    base: str  # the plan's session id (changes with !new)
    session_id: str  # the current session (before compaction's suffix)
    serial: int = 0  # rotations since the base (freshness, overflow, corruption)
    started_at: float = 0.0
    last_active_at: float = 0.0
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    context_tokens: int = 0  # the prompt size of the last turn (its input tokens)
    model: str = ""
    reason: str = ""  # why this session started
    previous: str = ""  # the session before it in this conversation

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens of every turn of this session."""
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True)
class SessionStart:
    """The session a turn runs in; ``ended`` is the session it replaces, when it replaced one
    just now (for this turn's message), with ``reason`` saying why."""

    record: SessionRecord
    ended: str | None = None
    reason: str | None = None

    @property
    def session_id(self) -> str:
        return self.record.session_id


def rotated_id(base: str, serial: int) -> str:
    """The session a conversation continues in after ``serial`` rotations."""
    return f"{base}~s{serial}" if serial else base


def _record(row: Any) -> SessionRecord:
    return SessionRecord(**row._mapping)  # by column name (SQLAlchemy's view of a row)


class SessionBook:
    """Async access to ``conversation_sessions`` (see the module docstring)."""

    def __init__(self, db: Database, writes: set[asyncio.Future[Any]]) -> None:
        self._db = db
        self._writes = writes
        self._lock = asyncio.Lock()

    async def get(self, key: str) -> SessionRecord | None:
        """The conversation ``key``'s row."""
        async with self._db.query(
            f"SELECT {COLUMNS} FROM conversation_sessions WHERE key = ?", (key,)
        ) as cursor:
            row = await cursor.fetchone()
        return _record(row) if row else None

    async def find(self, session_id: str) -> SessionRecord | None:
        """The row whose current session, or conversation, is ``session_id`` (or starts it)."""
        async with self._db.query(
            f"SELECT {COLUMNS} FROM conversation_sessions WHERE session_id = ? OR key = ?"
            " ORDER BY session_id = ? DESC LIMIT 1",
            (session_id, session_id, session_id),
        ) as cursor:
            row = await cursor.fetchone()
        return _record(row) if row else None

    async def in_room(self, room_id: str, thread_root: str | None) -> list[SessionRecord]:
        """The conversations of one room's timeline, or of one thread."""
        async with self._db.query(
            f"SELECT {COLUMNS} FROM conversation_sessions WHERE room_id = ? AND thread_root = ?"
            " ORDER BY last_active_at DESC",
            (room_id, thread_root or ""),
        ) as cursor:
            return [_record(row) for row in await cursor.fetchall()]

    async def listing(self, owner: str | None = None, limit: int = 50) -> list[SessionRecord]:
        """Conversations, the most recently active first (of one agent or team when given)."""
        where, args = ("WHERE owner = ?", (owner,)) if owner else ("", ())
        async with self._db.query(
            f"SELECT {COLUMNS} FROM conversation_sessions {where}"
            " ORDER BY last_active_at DESC LIMIT ?",
            (*args, limit),
        ) as cursor:
            return [_record(row) for row in await cursor.fetchall()]

    async def begin(
        self, fresh: SessionRecord, now: float, stale: Callable[[SessionRecord], str | None]
    ) -> SessionStart:
        """The session of a turn arriving ``now`` in the conversation ``fresh`` describes.

        ``fresh`` is the row a new conversation gets (its ``base`` is the plan's session id);
        ``stale`` says why an existing row's session is stale (None: fresh). The row's last
        activity becomes ``now``.
        """
        async with self._lock:
            known = await self.get(fresh.key)
            if known is None:
                record = dataclasses.replace(
                    fresh, session_id=fresh.base, started_at=now, last_active_at=now, reason="new"
                )
                await self._put(record)
                return SessionStart(record)
            if known.base != fresh.base:  # !new / !reset: a new base, counts start over
                record = dataclasses.replace(
                    fresh,
                    session_id=fresh.base,
                    started_at=now,
                    last_active_at=now,
                    reason="!new",
                    previous=known.session_id,
                )
                await self._put(record)
                return SessionStart(record, known.session_id, "a fresh conversation (!new)")
            reason = stale(known) if known.turns else None
            if reason is not None:
                record = self._rotated(known, now, reason)
                await self._put(record)
                return SessionStart(record, known.session_id, reason)
            record = dataclasses.replace(known, last_active_at=now)
            await self._touch(record.key, now)
            return SessionStart(record)

    async def rotate(self, key: str, now: float, reason: str) -> SessionRecord | None:
        """Continue conversation ``key`` in a new session (overflow, corruption); None when
        the conversation is not in the book."""
        async with self._lock:
            known = await self.get(key)
            if known is None:
                return None
            record = self._rotated(known, now, reason)
            await self._put(record)
            return record

    @staticmethod
    def _rotated(known: SessionRecord, now: float, reason: str) -> SessionRecord:
        serial = known.serial + 1
        return dataclasses.replace(
            known,
            session_id=rotated_id(known.base, serial),
            serial=serial,
            started_at=now,
            last_active_at=now,
            turns=0,
            input_tokens=0,
            output_tokens=0,
            context_tokens=0,
            reason=reason,
            previous=known.session_id,
        )

    @whole
    async def record_turn(
        self, key: str, session_id: str, usage: TurnUsage, now: float, *, answered: bool = True
    ) -> None:
        """Count a finished turn of ``session_id`` in conversation ``key``: its tokens, and the
        turn itself when it was ``answered`` (a turn of a session the conversation has since
        left counts nowhere)."""
        await self._db.execute(
            "UPDATE conversation_sessions SET turns = turns + ?,"
            " input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,"
            " context_tokens = ?, model = CASE WHEN ? = '' THEN model ELSE ? END,"
            f" last_active_at = {self._db.greatest}(last_active_at, ?)"
            " WHERE key = ? AND session_id = ?",
            (
                int(answered),
                usage.input_tokens,
                usage.output_tokens,
                usage.input_tokens,
                usage.model,
                usage.model,
                now,
                key,
                session_id,
            ),
        )
        await self._db.commit()

    @whole
    async def set_last_active(self, key: str, when: float) -> None:
        """Set when conversation ``key`` was last active (an operator's tool; tests age rows)."""
        await self._db.execute(
            "UPDATE conversation_sessions SET last_active_at = ? WHERE key = ?", (when, key)
        )
        await self._db.commit()

    @whole
    async def _touch(self, key: str, now: float) -> None:
        await self._db.execute(
            f"UPDATE conversation_sessions SET last_active_at = {self._db.greatest}("
            "last_active_at, ?) WHERE key = ?",
            (now, key),
        )
        await self._db.commit()

    @whole
    async def _put(self, record: SessionRecord) -> None:
        values = dataclasses.astuple(record)
        marks = ", ".join("?" * len(values))
        await self._db.execute(
            f"INSERT INTO conversation_sessions ({COLUMNS}) VALUES ({marks})"
            f" ON CONFLICT (key) DO UPDATE SET {_REPLACED}",
            values,
        )
        await self._db.commit()
