"""The session of each turn: begin it (fresh or stale), compact it, rotate it, count it.

The answer path asks :class:`SessionKeeper` which session a planned turn runs in
(:meth:`~SessionKeeper.begin`, then :meth:`~SessionKeeper.prepare` for compaction), records
what the model reported after it (:meth:`~SessionKeeper.finished`), and recovers a turn the
model refused as too long (:meth:`~SessionKeeper.compact` with ``overflow``, then
:meth:`~SessionKeeper.rotate`). Chat commands (``!compact``, ``!status``) and ``mindroom
sessions`` read the same book.

A session that ends (stale, ``!new``, rotated) is handed to the background flush at once (a
stale one usually was flushed already: it was idle), and its transcript's last turns to the
session index when ``memory.sources`` has ``sessions``; the reply never waits for either.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable

from mindroom.adapters.agno.turn_types import TurnResult
from mindroom.config.schema import Config
from mindroom.pipeline.turns import TurnPlan
from mindroom.sessions.book import SessionRecord, SessionStart
from mindroom.sessions.compaction import Compacted, Compactor
from mindroom.sessions.freshness import ConversationKind, policy_for, stale_reason
from mindroom.store.ledger import Ledger

logger = logging.getLogger(__name__)

FRESH_NOTE = (
    "This message starts a fresh session: the earlier conversation here ended ({reason}). "
    "Its history is not in this prompt; what mattered is in your memory. If it helps, say "
    "briefly that this is a new conversation."
)

SessionEnded = Callable[[TurnPlan, str], Awaitable[None]]
"""Called with the turn's plan and the ended session when a conversation leaves a session."""


def kind_of(plan: TurnPlan, direct: bool) -> ConversationKind:
    """Where the planned turn's conversation happens."""
    if plan.thread_root is not None:
        return ConversationKind.THREAD
    return ConversationKind.DM if direct else ConversationKind.GROUP


class SessionKeeper:
    """Sessions of one bot's conversations (see the module docstring)."""

    def __init__(
        self,
        config: Callable[[], Config],
        ledger: Ledger,
        compactor: Compactor,
        ended: SessionEnded | None = None,
    ) -> None:
        self._config = config
        self.book = ledger.sessions
        self.compactor = compactor
        self._ended = ended

    async def begin(
        self, plan: TurnPlan, *, direct: bool, room_keys: Iterable[str]
    ) -> SessionStart:
        """The session ``plan``'s turn runs in (a fresh one when the old one went stale)."""
        kind = kind_of(plan, direct)
        policy = policy_for(self._config(), kind, [plan.room_id, *room_keys])
        now = time.time()
        fresh = SessionRecord(
            key=plan.conversation,
            owner=plan.owner,
            requester=plan.requester if plan.private else "",
            room_id=plan.room_id,
            thread_root=plan.thread_root or "",
            kind=kind.value,
            base=plan.session_id,
            session_id=plan.session_id,
        )
        start = await self.book.begin(
            fresh, now, lambda known: stale_reason(known.last_active_at, now, policy)
        )
        if start.ended is not None:
            logger.info(
                "%s starts a fresh session in %s: %s", plan.owner, plan.room_id, start.reason
            )
            await self._end(plan, start.ended)
        return start

    def fresh_note(self, start: SessionStart) -> str:
        """What the agent is told in the first turn of a session that replaced a stale one."""
        if start.ended is None or start.record.reason == "!new":
            return ""
        if not self._config().sessions.notify:
            return ""
        return FRESH_NOTE.format(reason=start.reason)

    async def prepare(self, plan: TurnPlan, session: str, incoming: str) -> tuple[str, str]:
        """The Agno session and the carried text of the turn (compacting when due)."""
        if plan.team is not None:
            return session, ""
        return await self.compactor.prepare(plan.agent, session, plan.scope_requester, incoming)

    async def compact(
        self, record: SessionRecord, *, instructions: str = "", overflow: bool = False
    ) -> Compacted | None:
        """Compact the current session of ``record``'s conversation now (agents only)."""
        return await self.compactor.compact(
            record.owner,
            record.session_id,
            record.requester or None,
            instructions=instructions,
            overflow=overflow,
        )

    async def rotate(self, plan: TurnPlan, reason: str) -> SessionRecord | None:
        """Continue ``plan``'s conversation in a new session (overflow, a corrupt history)."""
        record = await self.book.rotate(plan.conversation, time.time(), reason)
        if record is not None:
            logger.warning("%s: a new session in %s (%s)", plan.owner, plan.room_id, reason)
            await self._end(plan, record.previous)
        return record

    async def finished(self, plan: TurnPlan, session: str, result: TurnResult) -> None:
        """Save what the model reported for a turn of ``session`` (its book session)."""
        await self.book.record_turn(
            plan.conversation, session, result.usage, time.time(), answered=result.ok
        )

    async def _end(self, plan: TurnPlan, ended: str) -> None:
        if self._ended is None:
            return
        try:
            await self._ended(plan, ended)
        except Exception:  # the end of a session is housekeeping: never worth the reply
            logger.exception("%s: handing the ended session %s on failed", plan.owner, ended)
