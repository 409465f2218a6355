"""Edits people make to memory files by hand, in the history: so ``restore`` and the
dashboard's history cover them.

When the index re-reads a file that changed (:meth:`MemoryIndex.sync
<mindroom.memory.search.index.MemoryIndex.sync>`: the watcher, a search, a restart), it hands this
module the entries it knew and the entries the file holds now. The difference, by id, is what
changed since the index last read the file: mindroom's own writes (each recorded in the history
before its file changed) and a person's edits. A change the history's last word about that id
already explains (:func:`explained`) is left alone; each other one is recorded once, as the
person's (actor :data:`HAND_ACTOR`): ``delete`` with the text and fields the entry had,
``add``, or ``update`` with the old and new text and fields (a hand-written line whose text
changed in place, whose ``h-`` id follows its text, is an ``update`` of its old id).

The decision and the record are made under the history's lock against the history as it is
then, so two processes that re-read the same change record it once; and the index commits its
new rows only after the records are written, so a crash in between re-derives the same
difference from the files and finds it recorded. A change made while mindroom was down is seen
at the first re-read after it starts. What cannot be seen: an edit undone before the index read
the file again, an entry a person removed before the index ever read it, and an edit made
before the index was deleted or rebuilt (``memory reindex``): the index is the baseline.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from mindroom.memory.files.fields import EntryFields, parse_fields, render_fields
from mindroom.memory.files.history import History, HistoryRecord
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.search.index import ARCHIVE_DIR

logger = logging.getLogger(__name__)

HAND_ACTOR = "person (hand edit)"
_REMOVALS = ("delete", "archive", "forget")  # forget: erased for good, textless
_PRESENCE = ("add", "restore", "update", "merge", "ttl")


@dataclass(frozen=True)
class HandChange:
    """One entry that changed in a file: ``old`` None (added), ``new`` None (removed)."""

    path: str
    old: MemoryEntry | None
    new: MemoryEntry | None

    @property
    def id(self) -> str:
        entry = self.old or self.new
        assert entry is not None
        return entry.id


def changes(path: str, old: list[MemoryEntry], new: list[MemoryEntry]) -> list[HandChange]:
    """The entries of file ``path`` that differ, by id, between ``old`` and ``new``; a
    hand-written line removed and another added at the same line are one change of text."""
    before = {e.id: e for e in old}
    after = {e.id: e for e in new}
    found: list[HandChange] = []
    for entry_id, entry in before.items():
        now = after.get(entry_id)
        if now is None or (now.text, now.fields) != (entry.text, entry.fields):
            found.append(HandChange(path, entry, now))
    found += [HandChange(path, None, e) for i, e in after.items() if i not in before]
    return _paired(path, found)


def _paired(path: str, found: list[HandChange]) -> list[HandChange]:
    """``found`` with each removed hand-written line and the hand-written line added at the
    same line number as one change."""
    removed = {
        c.old.start_line: c.old
        for c in found
        if c.new is None and c.old is not None and c.old.hand_written
    }
    used: set[int] = set()
    result: list[HandChange] = []
    for change in found:
        new = change.new
        added_by_hand = change.old is None and new is not None and new.hand_written
        line = new.start_line if added_by_hand and new is not None else None
        if line is not None and line in removed and line not in used:
            used.add(line)
            result.append(HandChange(path, removed[line], new))
            continue
        result.append(change)
    return [
        c
        for c in result
        if not (c.new is None and c.old and c.old.start_line in used and c.old.hand_written)
    ]


def explained(change: HandChange, last: HistoryRecord | None) -> bool:
    """Whether the history's last word about the entry (``last``) already accounts for the
    change: mindroom wrote it (its record comes first), or it was recorded before."""
    if last is None:
        return False
    derived = last.id != change.id  # the record is about the entry under another id
    if change.new is None:  # removed from this file
        moved_away = last.path != change.path or derived
        renamed = last.op == "update" and change.id.startswith("h-")
        return last.op in _REMOVALS or moved_away or renamed
    if change.old is None:  # added to this file
        # the archive is mindroom's: a move writes the archive copy before its record
        archived = change.path.startswith(ARCHIVE_DIR + "/")
        here = last.path == change.path or last.op == "restore"
        return (last.op in _PRESENCE and here) or archived
    if last.op not in _PRESENCE or last.path != change.path or last.new != change.new.text:
        return False
    written = (last.meta or {}).get("fields")
    if written is not None:
        return parse_fields(str(written)) == change.new.fields
    return _undated(change.old.fields) == _undated(change.new.fields)


def _undated(fields: EntryFields) -> EntryFields:
    return replace(fields, updated=None)


def record_for(change: HandChange) -> HistoryRecord:
    """The history record of a person's change."""
    old, new = change.old, change.new
    meta: dict[str, str] = {}
    if new is not None:
        meta["fields"] = render_fields(new.fields)
    if old is not None:
        meta["old_fields" if new is not None else "fields"] = render_fields(old.fields)
    op = "delete" if new is None else "add" if old is None else "update"
    return HistoryRecord(
        time=0.0,
        actor=HAND_ACTOR,
        op=op,
        id=change.id,
        path=change.path,
        old=old.text if old else None,
        new=new.text if new else None,
        meta={key: value for key, value in meta.items() if value} or None,
    )


def record_hand_edits(
    history: History, path: str, old: list[MemoryEntry], new: list[MemoryEntry]
) -> list[HistoryRecord]:
    """Record the changes of file ``path`` from ``old`` to ``new`` that the history does not
    explain, as the person's; the records written."""
    found = changes(path, old, new)
    if not found:
        return []

    def decide(last: dict[str, HistoryRecord]) -> list[HistoryRecord]:
        return [record_for(c) for c in found if not explained(c, last.get(c.id))]

    written = history.append_decided(decide)
    if written:
        logger.info(
            "memory file %s edited by hand: %s",
            path,
            ", ".join(f"{r.op} {r.id}" for r in written),
        )
    return written
