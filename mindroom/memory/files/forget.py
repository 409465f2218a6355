"""Erase entries for good: out of their files, their history and the scope's derived state.

A person's delete keeps the text in the history (it can be restored); forget-me must not.
:func:`erase_entries` removes each entry from its file by the normal write protocol (locks,
team mirrors), recording only a textless ``forget`` record of its id (so the removal is
explained and never taken for a hand edit, whose record would keep the text: see
:mod:`mindroom.memory.files.hand_edits`), then rewrites the history without any other record of
those ids (atomically: a temporary file and a rename), and brings the keyword index up to
date so its rows go too. Scrubbing the SQLite files (free pages, FTS segments, the WAL)
is the caller's (:func:`mindroom.people.data.scrub_sqlite`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from functools import partial

from mindroom.atomic import atomic_write
from mindroom.memory.files.history import HistoryRecord
from mindroom.memory.files.markdown import MemoryEntry, remove_entry
from mindroom.memory.files.protocol import file_lock
from mindroom.memory.files.store import FileMemory

logger = logging.getLogger(__name__)

FORGET_ACTOR = "forget-me"


def _textless_forget(line: str) -> bool:
    """Whether a history line is a ``forget`` record, which holds an id and no text."""
    try:
        record = json.loads(line)
    except ValueError:
        return False
    return record.get("op") == "forget" and record.get("old") is None and not record.get("new")


def erase_entries(memory: FileMemory, entries: Iterable[MemoryEntry]) -> int:
    """Remove ``entries`` from ``memory`` and its history; returns how many were removed."""
    doomed = list(entries)
    if not doomed:
        return 0
    removed = 0
    for entry in doomed:
        old, new = memory.as_one_write(partial(_remove, memory, entry))
        removed += old != new
    forget_history(memory, {e.id for e in doomed})
    memory.index.sync()
    logger.info("memory %s: %d entries erased with their history", memory.scope_id, removed)
    return removed


def _remove(memory: FileMemory, entry: MemoryEntry) -> tuple[str, str]:
    """Take ``entry`` out of its file, recording only that it was forgotten (no text)."""

    def edit(document: str) -> str | None:
        return remove_entry(document, entry.path, entry.id)

    def record() -> HistoryRecord:
        return memory.history.append(
            actor=FORGET_ACTOR, op="forget", entry_id=entry.id, path=entry.path, old=None, new=None
        )

    return memory.write(entry.path, edit, record)


def forget_history(memory: FileMemory, ids: set[str]) -> int:
    """Rewrite the scope's history without the records of ``ids``; returns how many went."""
    path = memory.history.path
    if not ids or not path.exists():
        return 0
    with file_lock(memory.history._lock_dir, path):
        kept, dropped = [], 0
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
            try:
                record_id = json.loads(line).get("id")
            except ValueError:
                record_id = None
            if record_id in ids and not _textless_forget(line):
                dropped += 1
            else:
                kept.append(line)
        if dropped:
            atomic_write(path, "".join(kept))
    return dropped
