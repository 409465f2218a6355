"""Follow edits people make to memory files with an editor: re-index, debounced.

Searches sync the index with the files anyway, so a missed event costs nothing but a slower
first search; watching keeps the index warm. Only markdown files count; temp files written by
atomic replaces (dot files) are ignored.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from watchfiles import Change, awatch

from mindroom.people.erasure import ErasureGate

logger = logging.getLogger(__name__)

DEBOUNCE_MS = 300


def _is_memory_file(_change: Change, path: str) -> bool:
    name = Path(path).name
    return name.endswith(".md") and not name.startswith(".")


async def watch_memory_files(
    roots: Sequence[Path],
    on_change: Callable[[set[Path]], None],
    stop: asyncio.Event,
    debounce_ms: int = DEBOUNCE_MS,
    gate: ErasureGate | None = None,
) -> None:
    """Call ``on_change`` (in a worker thread) with the changed files until ``stop`` is set;
    with ``gate`` (the bot's), each call holds it: a re-index never overlaps a forget-me."""
    gate = gate or ErasureGate()
    for root in roots:
        root.mkdir(parents=True, exist_ok=True)
    async for changes in awatch(
        *roots,
        watch_filter=_is_memory_file,
        debounce=debounce_ms,
        stop_event=stop,
        recursive=True,
    ):
        changed = {Path(path) for _, path in changes}
        try:
            async with gate.working():
                await asyncio.to_thread(on_change, changed)
        except Exception:  # the watcher's edge: log and keep watching
            logger.exception("re-indexing after a memory file change failed")
