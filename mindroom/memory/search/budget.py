"""A recall section written within what is left of a turn's character budget. Pure."""

from __future__ import annotations

from collections.abc import Iterable


def budgeted_section(title: str, lines: Iterable[str], budget: list[int]) -> str:
    """``title`` and as many of ``lines`` as fit in ``budget`` (a one-item list, spent: a line
    costs its length and a newline, the first also the title and a blank line); '' when none
    fits. A line too long is skipped, a shorter one after it may still fit."""
    kept: list[str] = []
    for line in lines:
        cost = len(line) + 1 + (0 if kept else len(title) + 2)
        if cost > budget[0]:
            continue
        budget[0] -= cost
        kept.append(line)
    return f"{title}\n" + "\n".join(kept) if kept else ""
