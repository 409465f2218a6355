"""The silent extraction turn: a finished stretch of conversation in, durable facts out.

It reads a session through Agno's session API (never raw SQL), run by run, so every message
keeps the Matrix ID of the person whose turn it was. The transcript names each speaker
(``@alice:example.org: ...``) and the model is asked for the facts worth keeping, one per line,
in the conversation's language, given what memory already holds so it does not repeat it.

The chat lines, the instructions, the chunking and the reading of the answer are plain memory
logic in :mod:`mindroom.memory.extraction`; this module makes the model call and reads Agno's
session store. No Matrix access, no tools, no session of its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from agno.agent import Agent
from agno.db.base import SessionType
from agno.models.base import Model
from agno.run.base import RunStatus

from mindroom.errors import ModelError
from mindroom.memory.extraction import (
    ChatLine,
    curation_instructions,
    curation_prompt,
    extraction_instructions,
    extraction_prompt,
    parse_facts,
)
from mindroom.memory.search.session_index import TranscriptMessage


async def read_chat(db: object, session_id: str, team: bool) -> tuple[list[ChatLine], float]:
    """The chat history (user and assistant messages) of a session, and its ``updated_at``.

    Walks the session's top-level runs as Agno's ``get_chat_history`` does (member runs of a
    team and messages replayed from history are skipped), keeping each run's ``user_id``.
    """
    kind = SessionType.TEAM if team else SessionType.AGENT
    session = await db.get_session(session_id=session_id, session_type=kind)  # type: ignore[attr-defined]
    if session is None:
        return [], 0.0
    lines = []
    for run in session.runs or []:
        if getattr(run, "parent_run_id", None) is not None:
            continue  # a team member's own run: the leader's run holds the conversation
        user_id = getattr(run, "user_id", None)
        for message in run.messages or []:
            if message.role not in ("user", "assistant") or getattr(message, "from_history", False):
                continue
            content = message.content
            text = content if isinstance(content, str) else str(content or "")
            lines.append(ChatLine(message.role, text, user_id))
    return lines, float(session.updated_at or 0)


async def read_transcript(db: object, session_id: str, team: bool) -> list[TranscriptMessage]:
    """The user and assistant messages of a session with their times (for the session index,
    :mod:`mindroom.memory.search.session_source`), walked as :func:`read_chat` walks them."""
    kind = SessionType.TEAM if team else SessionType.AGENT
    session = await db.get_session(session_id=session_id, session_type=kind)  # type: ignore[attr-defined]
    if session is None:
        return []
    messages = []
    for run in session.runs or []:
        if getattr(run, "parent_run_id", None) is not None:
            continue
        user_id = getattr(run, "user_id", None)
        run_at = float(getattr(run, "created_at", 0) or 0)
        for message in run.messages or []:
            if message.role not in ("user", "assistant") or getattr(message, "from_history", False):
                continue
            content = message.content
            text = content if isinstance(content, str) else str(content or "")
            at = float(getattr(message, "created_at", 0) or run_at)
            messages.append(TranscriptMessage(message.role, text, user_id, at))
    return messages


async def extract_facts(
    model: Model,
    lines: Sequence[ChatLine],
    known: Sequence[str],
    *,
    no_reply_token: str,
    max_chars: int,
    categories: Sequence[str] = ("general",),
) -> list[str]:
    """Ask ``model`` for the durable facts in ``lines``, each tagged with one of ``categories``
    (see :mod:`mindroom.memory.files.facts`)."""
    prompt = extraction_prompt(lines, known, no_reply_token=no_reply_token, max_chars=max_chars)
    agent = Agent(
        model=model,
        instructions=extraction_instructions(no_reply_token, categories),
        markdown=False,
        telemetry=False,
    )
    output = await agent.arun(prompt)
    if output.status == RunStatus.error:
        raise ModelError(str(output.content or "extraction failed"))
    return parse_facts(str(output.content or ""), no_reply_token)


async def curate_facts(
    model: Model,
    daily_notes: Sequence[str],
    long_term: Sequence[str],
    *,
    limit: int,
    no_reply_token: str,
) -> list[str]:
    """Durable facts from ``daily_notes`` worth promoting into the long-term file."""
    prompt = curation_prompt(daily_notes, long_term, no_reply_token)
    agent = Agent(
        model=model,
        instructions=curation_instructions(no_reply_token, limit),
        markdown=False,
        telemetry=False,
    )
    output = await agent.arun(prompt)
    if output.status == RunStatus.error:
        raise ModelError(str(output.content or "curation failed"))
    return parse_facts(str(output.content or ""), no_reply_token)[:limit]
