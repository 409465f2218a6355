"""The durable record that makes replies exactly-once across restarts.

One SQLite file (``mindroom_data/ledger.db``, WAL, busy timeout), or one PostgreSQL database
that several processes share (:mod:`mindroom.store.database`), holds:

* ``handled``: every triggering event mindroom decided to answer, claimed *before* the reply is
  produced and marked done after it was sent. A restart (clean or ``kill -9``) finds claimed but
  unfinished events and answers them again; ``reply_parts`` makes that answer edit what the
  earlier run posted instead of posting twice. A finished row says who answered
  (``answered_by``: the dashboard's "Answered by").
* ``sync_tokens``: each account's last processed sync (or shared inbox,
:mod:`mindroom.cluster.inbox`)
  position, so messages that arrived while the bot was down are delivered after a restart.
* ``reply_parts``: the message each part of a reply was posted as, keyed by the triggering event,
  the agent and the part's index; a row is written before the part is sent and completed with
  its event ID right after, so a resumed reply edits what an earlier run posted.
* ``prompts``: the questions posted to one person that a reaction answers
  (:mod:`mindroom.store.prompts`).
* ``session_generations``: bumped by ``!new`` to start a fresh conversation in a room or thread.
* ``compactions``: long threads continue in a new session carrying a summary of the old one.
* ``memory_forgets``: a person's ``!memory forget`` waiting for their confirmation, and their
  last confirmed one (``!memory undo`` restores it for a day); entry ids only, no text.
* ``flush_sessions`` and ``flush_curation``: the memory flush's control state (which sessions
  are dirty, how far they were extracted, who is extracting one now). Every process (the bot,
  ``mindroom memory flush``) works on these rows with atomic statements, so two of them never
  extract the same chunk and neither undoes the other's progress.

Each table is one small class of :mod:`mindroom.store.ledger_tables` owning its SQL;
:class:`Ledger` composes them on its one connection (``ledger.handled``, ``ledger.flush``, ...).

This is control state, not user data: deleting the file loses no memory, it only forgets which
messages were already answered.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mindroom.cluster.inbox import Inbox
from mindroom.cluster.leases import Leases
from mindroom.sessions.book import SessionBook
from mindroom.store.database import Database
from mindroom.store.ledger_schema import MIGRATIONS
from mindroom.store.ledger_tables import (
    Compactions,
    FlushCuration,
    FlushSessions,
    ForgetRecord,
    Handled,
    MemoryForgets,
    PendingEvent,
    ReplyParts,
    SessionGenerations,
    SyncTokens,
)
from mindroom.store.prompts import Prompts

__all__ = ["LEDGER_FILE", "ForgetRecord", "Ledger", "PendingEvent", "ledger_target"]

LEDGER_FILE = "ledger.db"


def ledger_target(database: str | None, data_dir: Path) -> Path | str:
    """The ledger's database: ``storage.database`` (PostgreSQL) when set, else the SQLite
    file under ``data_dir``."""
    return database or data_dir / LEDGER_FILE


class Ledger:
    """Async access to the ledger database: its tables on one connection. Open with
    :meth:`open`, close with :meth:`close`.

    The methods below the tables delegate to ``handled``, ``sync_tokens``, ``generations`` and
    ``replies``, whose calls are many (the flush's and the compactions' are called on their
    tables directly)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._writes: set[asyncio.Future[Any]] = set()  # running writes (see whole_writes)
        self.owner: str | None = None  # this process, when several share the database
        self.sessions = SessionBook(db, self._writes)  # conversations' sessions (same file)
        self.handled = Handled(db, self._writes)
        self.sync_tokens = SyncTokens(db, self._writes)
        self.generations = SessionGenerations(db, self._writes)
        self.compactions = Compactions(db, self._writes)
        self.replies = ReplyParts(db, self._writes)
        self.flush = FlushSessions(db, self._writes)
        self.curation = FlushCuration(db, self._writes)
        self.forgets = MemoryForgets(db, self._writes)  # ``!memory forget`` and ``undo``
        self.prompts = Prompts(db, self._writes)  # questions a person answers by reacting

    @classmethod
    async def open(cls, target: Path | str) -> Ledger:
        """Open the ledger at ``target`` (a SQLite file, or a PostgreSQL URL), up to date."""
        return cls(await Database.open(target, MIGRATIONS))

    def leases(self, owner: str) -> Leases:
        """Leases and hand-overs of process ``owner`` on this ledger's database."""
        return Leases(self._db, self._writes, owner)

    def inbox(self) -> Inbox:  # the appservice's, shared by several processes
        return Inbox(self._db, self._writes)

    @property
    def shared(self) -> bool:
        """True on PostgreSQL, which several processes may share."""
        return self._db.dialect == "postgresql"

    async def close(self) -> None:
        """Close the connection once the writes running on it are committed."""
        while self._writes:
            await asyncio.wait(set(self._writes))
        await self._db.close()

    async def claim(
        self,
        event_id: str,
        room_id: str,
        responders: tuple[str, ...],
        source: dict[str, Any],
        *,
        lead: str | None = None,
        owner: str | None = None,
    ) -> bool:
        """:meth:`Handled.claim`, by this process (:attr:`owner`) unless ``owner`` is given."""
        return await self.handled.claim(
            event_id, room_id, responders, source, lead=lead, owner=owner or self.owner
        )

    async def is_handled(self, event_id: str) -> bool:
        """:meth:`Handled.is_handled`."""
        return await self.handled.is_handled(event_id)

    async def finish(
        self, event_id: str, status: str = "done", answered_by: tuple[str, ...] = ()
    ) -> None:
        """:meth:`Handled.finish`."""
        await self.handled.finish(event_id, status, answered_by)

    async def pending(self, newer_than: float) -> list[PendingEvent]:
        """:meth:`Handled.pending`."""
        return await self.handled.pending(newer_than)

    async def expire(self, older_than: float) -> int:
        """:meth:`Handled.expire`."""
        return await self.handled.expire(older_than)

    async def sync_token(self, account: str) -> str | None:
        """:meth:`SyncTokens.get`."""
        return await self.sync_tokens.get(account)

    async def save_sync_token(self, account: str, token: str) -> None:
        """:meth:`SyncTokens.save`."""
        await self.sync_tokens.save(account, token)

    async def session_generation(self, room_id: str, thread_root: str | None) -> int:
        """:meth:`SessionGenerations.get`."""
        return await self.generations.get(room_id, thread_root)

    async def new_session(self, room_id: str, thread_root: str | None) -> int:
        """:meth:`SessionGenerations.new`."""
        return await self.generations.new(room_id, thread_root)

    async def reply_parts(self, trigger_id: str, agent: str) -> dict[int, str | None]:
        """:meth:`ReplyParts.parts`."""
        return await self.replies.parts(trigger_id, agent)

    async def begin_reply_part(self, trigger_id: str, agent: str, part: int) -> None:
        """:meth:`ReplyParts.begin`."""
        await self.replies.begin(trigger_id, agent, part)

    async def record_reply_part(
        self, trigger_id: str, agent: str, part: int, event_id: str
    ) -> None:
        """:meth:`ReplyParts.record`."""
        await self.replies.record(trigger_id, agent, part, event_id)

    async def forget_finished_reply_parts(self) -> int:
        """:meth:`ReplyParts.forget_finished`."""
        return await self.replies.forget_finished()
