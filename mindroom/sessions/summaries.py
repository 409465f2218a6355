"""Compaction summaries without the model call: the instructions, how a long history is cut
into chunks, and the notes (tool failures, memory file operations) read from a session's runs.

The model calls and reading a session from Agno's store are
:mod:`mindroom.adapters.agno.summaries`; everything here is plain data in, plain data out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mindroom.memory.extraction import ChatLine

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
