"""Compaction summaries: staged for long histories, with the turns' tool failures and file work.

:func:`staged_summary` summarizes a conversation so it can go on without its older messages.
A history longer than one chunk (``chunk_chars``, a share of the model's context) is
summarized in stages: each chunk on its own, then one merge of the partial summaries, so no
single call is asked to read more than fits. ``instructions`` (``!compact <instructions>``)
steer what the summary keeps.

:func:`session_notes` reads what the summary must not lose but the model may drop: tool calls
that failed and memory file operations (writes, updates, deletes of memory entries), from the
runs Agno stored. They are listed verbatim beside the summary, not summarized.

The instructions, the cutting into chunks and the reading of the notes are plain session
logic in :mod:`mindroom.sessions.summaries`; this module makes the model calls and reads
Agno's session store.
"""

from __future__ import annotations

from collections.abc import Sequence

from agno.agent import Agent
from agno.db.base import SessionType
from agno.models.base import Model
from agno.run.base import RunStatus

from mindroom.errors import ModelError
from mindroom.memory.extraction import ChatLine, transcript
from mindroom.sessions.summaries import (
    MERGE_INSTRUCTIONS,
    SUMMARY_INSTRUCTIONS,
    SessionNotes,
    chunks,
    notes_of,
)


async def _ask(model: Model, instructions: str, text: str) -> str:
    agent = Agent(model=model, instructions=[instructions], markdown=False, telemetry=False)
    output = await agent.arun(text)
    if output.status == RunStatus.error:
        raise ModelError(str(output.content or "summary failed"))
    return str(output.content or "").strip()


async def staged_summary(
    model: Model, lines: Sequence[ChatLine], *, chunk_chars: int, instructions: str = ""
) -> str:
    """A summary of ``lines`` (see the module docstring); one model call when they fit in a
    chunk, else one per chunk and a merge."""
    asked = SUMMARY_INSTRUCTIONS
    if instructions.strip():
        asked += f" Follow these instructions for the summary: {instructions.strip()}"
    parts = chunks(lines, max(1000, chunk_chars))
    if len(parts) <= 1:
        return await _ask(model, asked, transcript(parts[0] if parts else []))
    partial = [await _ask(model, asked, transcript(part)) for part in parts]
    merge = MERGE_INSTRUCTIONS
    if instructions.strip():
        merge += f" Follow these instructions for the summary: {instructions.strip()}"
    numbered = "\n\n".join(f"Part {n}:\n{text}" for n, text in enumerate(partial, 1))
    return await _ask(model, merge, numbered)


async def session_notes(db: object, session_id: str, team: bool) -> SessionNotes:
    """:func:`notes_of` the runs of a stored session (none: no notes)."""
    kind = SessionType.TEAM if team else SessionType.AGENT
    session = await db.get_session(session_id=session_id, session_type=kind)  # type: ignore[attr-defined]
    return notes_of(session.runs or []) if session is not None else SessionNotes()
