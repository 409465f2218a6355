"""Keep the session index of past conversations in step with the conversations.

With ``memory.sources: [memory, sessions]`` every finished turn counts toward its session's
next delta sync: once ``memory.session_index_messages`` new messages wait (two a turn), the
session's transcript is read from Agno's store and the messages past the index's cursor are
added to the index of the conversation's own memory scope (a private companion's: the
person's). When a conversation leaves a session (stale, ``!new``, compacted, rotated) the rest
is added at once. The answer path runs this after the reply was posted, in the background.

A conversation that simply stops keeps its last few messages out of the index until it goes
on or ends; a lower ``session_index_messages`` (1: every turn) trades that for a read of the
session after every turn.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from mindroom.adapters.agno.runner import AgentRuntime
from mindroom.config.schema import Config
from mindroom.memory.backend import keeps_files
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.audience import AudienceBook, narrower, word_for
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.search.session_source import index_transcript, session_audience

logger = logging.getLogger(__name__)

MESSAGES_PER_TURN = 2
REMEMBERED = 10_000  # sessions whose waiting turns are counted (oldest forgotten first)


class TranscriptIndexer:
    """Delta-syncs conversations into their scopes' session indexes (see the module)."""

    def __init__(
        self,
        config: Callable[[], Config],
        runtime: AgentRuntime,
        memories: MemoryRegistry,
        audience: Callable[[str, str | None], RoomAudience | None] = lambda s, r: None,
    ) -> None:
        self._config = config
        self._runtime = runtime
        self._memories = memories
        self._audience = audience  # who can read a session's room now (None: not known)
        self._waiting: dict[str, int] = {}  # session -> turns since its last sync (this run)

    def _scope(
        self, owner: str, requester: str | None, members: Sequence[str]
    ) -> FileMemory | None:
        if members:
            memory = self._memories.for_team(list(members), requester)
        else:
            memory = self._memories.for_agent(owner, requester)
        return memory if keeps_files(memory) else None

    async def turn_finished(
        self, owner: str, session_id: str, requester: str | None, members: Sequence[str] = ()
    ) -> int:
        """Count a finished turn of ``session_id``; sync it when enough messages wait."""
        config = self._config()
        if not config.memory.sessions_source:
            return 0
        waiting = self._waiting.pop(session_id, 0) + 1
        if waiting * MESSAGES_PER_TURN < config.memory.session_index_messages:
            self._waiting[session_id] = waiting
            while len(self._waiting) > REMEMBERED:
                del self._waiting[next(iter(self._waiting))]
            return 0
        return await self.sync(owner, session_id, requester, members)

    async def sync(
        self,
        owner: str,
        session_id: str,
        requester: str | None,
        members: Sequence[str] = (),
        *,
        final: bool = False,
    ) -> int:
        """Add what the index lacks of ``session_id`` (all of it when ``final``: the session
        ended); returns the lines added."""
        config = self._config()
        if not config.memory.sessions_source:
            return 0
        self._waiting.pop(session_id, None)
        memory = await asyncio.to_thread(self._scope, owner, requester, members)
        if memory is None:  # mem0 or no memory: nothing to index into
            return 0
        messages = await self._runtime.session_transcript(
            owner, session_id, requester, team=bool(members)
        )
        room = self._audience(session_id, requester)
        word = (
            await asyncio.to_thread(_narrowest, memory, session_id, room)
            if room is not None
            else None
        )
        added = await asyncio.to_thread(
            index_transcript,
            memory,
            session_id,
            messages,
            min_new=1,
            final=final,
            audience=word,
        )
        if added:
            logger.debug("indexed %d lines of session %s in %s", added, session_id, memory.scope_id)
        return added


def _narrowest(memory: FileMemory, session_id: str, room: RoomAudience) -> str | None:
    """The audience word of ``session_id``'s lines: who can read its room now, narrowed by
    who could when its earlier lines were indexed. The index keeps one word per conversation,
    so someone who joins the room later (a DM that becomes a group, a closed room's newcomer)
    never opens what was said before they came; it only ever narrows."""
    book = AudienceBook(memory.scope.state_dir)
    now = word_for(room, book)
    before = session_audience(memory, session_id)
    return now if before is None else narrower([before, now], book)
