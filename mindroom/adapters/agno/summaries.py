"""Compaction summaries: staged for long histories, with the turns' tool failures and file work.

:func:`staged_summary` summarizes a conversation so it can go on without its older messages.
A history longer than one chunk (``chunk_chars``, a share of the model's context) is
summarized in stages: each chunk on its own, then one merge of the partial summaries, so no
single call is asked to read more than fits. ``instructions`` (``!compact <instructions>``)
steer what the summary keeps.

:func:`session_notes` reads what the summary must not lose but the model may drop: tool calls
that failed and memory file operations (writes, updates, deletes of memory entries), from the
runs Agno stored. They are listed verbatim beside the summary, not summarized.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agno.agent import Agent
from agno.db.base import SessionType
from agno.models.base import Model
from agno.run.base import RunStatus

from mindroom.errors import ModelError
from mindroom.memory.extraction import ChatLine, transcript

SUMMARY_INSTRUCTIONS = (
    "Summarize the conversation below so that it can continue without it: who said what that "
    "still matters, open questions, decisions, names and numbers. Be concise; write in the "
    "conversation's language."
)
MERGE_INSTRUCTIONS = (
    "Below are summaries of consecutive parts of one conversation, oldest first. Merge them "
    "into one summary that lets the conversation continue: keep what still matters, drop what "
    "later parts settled. Be concise; write in the conversation's language."
)
FILE_TOOLS = frozenset(
    {"add_memory", "update_memory", "delete_memory", "memory_add", "memory_update"}
)
MAX_NOTES = 12
NOTE_CHARS = 200


def chunks(lines: Sequence[ChatLine], chunk_chars: int) -> list[list[ChatLine]]:
    """``lines`` cut into consecutive chunks of at most ``chunk_chars`` of transcript (a
    longer single message is a chunk of its own, cut to the size). Pure."""
    out: list[list[ChatLine]] = [[]]
    size = 0
    for line in lines:
        cost = len(line.line) + 1
        if cost > chunk_chars:
            line = ChatLine(
                line.role, line.text[: max(1, chunk_chars - 80)] + " [...]", line.user_id
            )
            cost = len(line.line) + 1
        if out[-1] and size + cost > chunk_chars:
            out.append([])
            size = 0
        out[-1].append(line)
        size += cost
    return [chunk for chunk in out if chunk]


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


@dataclass(frozen=True)
class SessionNotes:
    """Tool failures and memory file operations of a session's runs, oldest first."""

    failures: tuple[str, ...] = ()
    file_operations: tuple[str, ...] = ()

    def render(self) -> str:
        """The notes as sections to carry beside a summary ('' when there are none)."""
        sections = []
        if self.failures:
            sections.append("Tool calls that failed:\n" + "\n".join(self.failures))
        if self.file_operations:
            sections.append("Memory file operations:\n" + "\n".join(self.file_operations))
        return "\n\n".join(sections)


def _short(text: object) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= NOTE_CHARS else flat[: NOTE_CHARS - 3] + "..."


def notes_of(runs: Sequence[object]) -> SessionNotes:
    """The tool failures and memory file operations of ``runs`` (Agno runs). Pure."""
    failures: list[str] = []
    files: list[str] = []
    for run in runs:
        for tool in getattr(run, "tools", None) or []:
            name = getattr(tool, "tool_name", None) or "tool"
            args = getattr(tool, "tool_args", None) or {}
            result = _short(getattr(tool, "result", ""))
            failed = bool(getattr(tool, "tool_call_error", False)) or result.startswith("error")
            call = f"- {name}({_short(', '.join(f'{k}={v}' for k, v in args.items()))})"
            if failed:
                failures.append(f"{call}: {result or 'failed'}")
            elif name in FILE_TOOLS:
                files.append(f"{call}: {result}")
    return SessionNotes(tuple(failures[-MAX_NOTES:]), tuple(files[-MAX_NOTES:]))


async def session_notes(db: object, session_id: str, team: bool) -> SessionNotes:
    """:func:`notes_of` the runs of a stored session (none: no notes)."""
    kind = SessionType.TEAM if team else SessionType.AGENT
    session = await db.get_session(session_id=session_id, session_type=kind)  # type: ignore[attr-defined]
    return notes_of(session.runs or []) if session is not None else SessionNotes()
