"""A memory file's lines as a model reads them: without guidance for people, and with the
entries a reader may not read masked.

Pure functions, no I/O. Lines are counted the way entries count them (only ``\\n`` ends a
line), so line numbers here are the ones :mod:`mindroom.memory.files.markdown` gives entries.
Every path that shows a memory file's lines to a model (the memory block's ``MEMORY.md``, a
memory read) reads them here, so HTML comments that are not part of an entry (a template's
guidance, see :func:`~mindroom.memory.files.markdown.without_guidance`) never reach it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mindroom.memory.files.markdown import MemoryEntry, parse_entries, without_guidance

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
    """The lines of ``text`` as a model reads them, numbered as in the file: guidance for
    people reads as empty lines, a hidden entry's first line as :data:`HIDDEN` and its other
    lines empty."""
    lines = ["" if line is None else line for line in without_guidance(text)]
    if hide is None:
        return lines
    for e in parse_entries(text, relative):
        if hide(e):
            lines[e.start_line - 1] = HIDDEN
            for n in range(e.start_line, e.end_line):
                lines[n] = ""
    return lines


@dataclass(frozen=True)
class FileHead:
    """The first lines of a memory file as a model reads them (see :func:`head_of`)."""

    lines: list[tuple[int, str]]  # (line number in the file, text), in order
    readable: int  # how many lines the model may read in the whole file
    total: int  # the file's line count


def head_of(text: str, relative: str, max_lines: int, hide: Hide | None = None) -> FileHead:
    """The first ``max_lines`` lines of ``text`` a model may read, with their numbers: without
    guidance for people (and without the empty line a removed comment would leave doubled) and
    without the lines of entries ``hide`` is True for."""
    hidden = hidden_lines(text, relative, hide) if hide is not None else set()
    kept: list[tuple[int, str]] = []
    dropped = False  # a guidance line was left out right before this one
    for n, line in enumerate(without_guidance(text), 1):
        if line is None:
            dropped = True
            continue
        doubled = dropped and not line.strip() and (not kept or not kept[-1][1].strip())
        dropped = False
        if n not in hidden and not doubled:
            kept.append((n, line))
    return FileHead(kept[:max_lines], len(kept), len(file_lines(text)))


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
