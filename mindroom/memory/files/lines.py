"""A memory file's lines as readers see them, with the entries a reader may not read masked.

Pure functions, no I/O. Lines are counted the way entries count them (only ``\\n`` ends a
line), so line numbers here are the ones :mod:`mindroom.memory.files.markdown` gives entries.
"""

from __future__ import annotations

from collections.abc import Callable

from mindroom.memory.files.markdown import MemoryEntry, parse_entries

Hide = Callable[[MemoryEntry], bool]  # which entries a reader may not see
HIDDEN = "(a memory you may not read here)"


def file_lines(text: str) -> list[str]:
    """Lines as entries count them: only "\\n" ends a line (a "\\r" before it is dropped)."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


def hidden_lines(text: str, relative: str, hide: Hide) -> set[int]:
    """The line numbers of the entries of ``text`` that ``hide`` hides."""
    return {
        n
        for e in parse_entries(text, relative)
        if hide(e)
        for n in range(e.start_line, e.end_line + 1)
    }


def masked_lines(text: str, relative: str, hide: Hide | None) -> list[str]:
    """The lines of ``text``, a hidden entry's first line read as :data:`HIDDEN` and its
    other lines empty (so line numbers stay those of the file)."""
    lines = file_lines(text)
    if hide is None:
        return lines
    for e in parse_entries(text, relative):
        if hide(e):
            lines[e.start_line - 1] = HIDDEN
            for n in range(e.start_line, e.end_line):
                lines[n] = ""
    return lines


def numbered_window(name: str, all_lines: list[str], from_line: int, lines: int, cap: int) -> str:
    """``lines`` (at most ``cap``) of ``all_lines`` from line ``from_line``, numbered, headed by
    ``name`` and the span shown, with how many lines follow: what a memory read returns."""
    start = max(1, from_line)
    count = max(1, min(lines, cap))
    chosen = all_lines[start - 1 : start - 1 + count]
    body = "\n".join(f"{n:>5}  {line}" for n, line in enumerate(chosen, start))
    rest = len(all_lines) - (start - 1 + len(chosen))
    more = f"\n({rest} more lines after this)" if rest > 0 else ""
    span = f"lines {start}-{start + len(chosen) - 1} of {len(all_lines)}"
    return f"{name} ({span}):\n{body}{more}"
