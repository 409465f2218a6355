"""The runtime's work on stored sessions outside a turn: read them, extract, curate, summarize.

:class:`SessionWork` is the part of :class:`~mindroom.adapters.agno.runner.AgentRuntime` that the
flush, compaction and the session index use: each call reads a session through the runtime's
session stores (leased, so none is closed under it) or asks a model without a session.
"""

from __future__ import annotations

from collections.abc import Sequence

from agno.db.base import AsyncBaseDb
from agno.models.base import Model

from mindroom.adapters.agno.extraction import (
    curate_facts,
    extract_facts,
    read_chat,
    read_transcript,
)
from mindroom.adapters.agno.session_stores import SessionStores
from mindroom.adapters.agno.summaries import session_notes, staged_summary
from mindroom.memory.extraction import ChatLine
from mindroom.memory.search.session_index import TranscriptMessage
from mindroom.sessions.summaries import SessionNotes


class SessionWork:
    """Session reads and model asks of a runtime (see the module docstring)."""

    _stores: SessionStores

    def _db(self, agent: str, requester: str | None = None) -> AsyncBaseDb:
        raise NotImplementedError

    def _model(self, key: str) -> Model:
        raise NotImplementedError

    def _owner_db(self, owner: str, requester: str | None, team: bool) -> AsyncBaseDb:
        return self._db(f"team_{owner}" if team else owner, None if team else requester)

    async def session_chat(
        self, owner: str, session_id: str, requester: str | None, team: bool
    ) -> tuple[list[ChatLine], float]:
        """Chat history of a session of agent (or team) ``owner`` and its ``updated_at``."""
        with self._stores.leasing():
            return await read_chat(self._owner_db(owner, requester, team), session_id, team)

    async def extract(
        self,
        model_key: str,
        lines: list[ChatLine],
        known: list[str],
        *,
        token: str,
        max_chars: int,
        categories: Sequence[str] = ("general",),
    ) -> list[str]:
        """The durable facts in ``lines``, by model ``model_key`` (see extraction)."""
        return await extract_facts(
            self._model(model_key),
            lines,
            known,
            no_reply_token=token,
            max_chars=max_chars,
            categories=categories,
        )

    async def curate(
        self, model_key: str, daily: list[str], long_term: list[str], *, limit: int, token: str
    ) -> list[str]:
        """Facts from daily notes to promote into MEMORY.md (see extraction)."""
        return await curate_facts(
            self._model(model_key), daily, long_term, limit=limit, no_reply_token=token
        )

    async def summarize(
        self, model_key: str, lines: list[ChatLine], *, chunk_chars: int, instructions: str = ""
    ) -> str:
        """A summary of ``lines`` that lets the conversation go on without them (staged in
        chunks of ``chunk_chars``, see :mod:`mindroom.adapters.agno.summaries`)."""
        return await staged_summary(
            self._model(model_key), lines, chunk_chars=chunk_chars, instructions=instructions
        )

    async def session_notes(
        self, owner: str, session_id: str, requester: str | None, team: bool
    ) -> SessionNotes:
        """Tool failures and memory file operations of a session, for its compaction."""
        with self._stores.leasing():
            return await session_notes(self._owner_db(owner, requester, team), session_id, team)

    async def session_transcript(
        self, owner: str, session_id: str, requester: str | None, team: bool
    ) -> list[TranscriptMessage]:
        """The user and assistant messages of a session, with their times."""
        with self._stores.leasing():
            db = self._owner_db(owner, requester, team)
            return await read_transcript(db, session_id, team)
