"""Recall in every turn: the memory block put into the agent's context before it answers.

The system recalls; the model does not have to remember to. The block holds ``MEMORY.md``
(capped, with a marker saying how many lines were left out and how to read them), today's and
yesterday's daily files (capped), and the best search hits for the user's message from the
scope's other files. It is clearly delimited and names its files, so the agent does not
re-read them.
"""

from __future__ import annotations

import datetime as dt

from mindroom.memory.scope import ENTRYPOINT
from mindroom.memory.store import FileMemory

OPEN = "<memory>"
CLOSE = "</memory>"


def _section(memory: FileMemory, relative: str, title: str, max_lines: int) -> str | None:
    lines, total = memory.head(relative, max_lines)
    if not any(line.strip() for line in lines):
        return None
    body = "\n".join(lines)
    if total > len(lines):
        left = total - len(lines)
        body += (
            f"\n[... {left} more lines not shown: read them with "
            f'memory_get("{relative}", {len(lines) + 1}, {left})]'
        )
    return f"### {title}: {relative}\n{body}"


def build_recall(
    memory: FileMemory,
    query: str,
    *,
    max_entrypoint_lines: int,
    max_daily_lines: int,
    hits: int,
    now: dt.datetime | None = None,
    label: str = "",
) -> str:
    """The recall block of ``memory`` for a turn answering ``query`` ('' when it is empty)."""
    memory.prepare()
    now = now or dt.datetime.now()
    today = now.strftime("%Y-%m-%d")
    yesterday = (now - dt.timedelta(days=1)).strftime("%Y-%m-%d")
    shown = {ENTRYPOINT, memory.scope.daily_path(today), memory.scope.daily_path(yesterday)}
    sections = [
        _section(memory, ENTRYPOINT, "Long-term memory", max_entrypoint_lines),
        _section(memory, memory.scope.daily_path(today), "Today", max_daily_lines),
        _section(memory, memory.scope.daily_path(yesterday), "Yesterday", max_daily_lines),
    ]
    found = memory.index.search(query, hits, exclude_paths=frozenset(shown)) if hits else []
    if found:
        lines = [f"- [{hit.entry.path}:{hit.entry.start_line}] {hit.entry.text}" for hit in found]
        sections.append("### Related memories (search)\n" + "\n".join(lines))
    present = [s for s in sections if s]
    if not present:
        return ""
    scope = f" ({label})" if label else ""
    intro = (
        f"Your memory{scope}, loaded from your memory files for this turn. It is already "
        "here: do not read these files again. Use the memory tools to add, update or delete."
    )
    return "\n\n".join([OPEN, intro, *present, CLOSE])
