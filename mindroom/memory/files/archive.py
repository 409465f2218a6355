"""The archive: memory that consolidation merged or superseded, kept, never deleted.

An archived entry moves from its file to ``memory/archive/YYYY-MM.md`` (the month it was
archived), with its id and text unchanged, followed by one comment line that says where it came
from and what replaced it::

    - Alice likes tea <!-- m-1a2b3c4d -->
    <!-- archived 2026-11-24 from memory/2026-11-01.md; merged into m-9f9f9f9f -->

People can read the archive like any memory file; search, recall and listing leave it out
(:data:`mindroom.memory.search.index.ARCHIVE_DIR`). ``mindroom memory restore ID`` brings an entry
back into the file it came from. Only mindroom entries (``m-`` ids) are archived: a line a
person wrote is never moved or rewritten by consolidation.

Both moves write the receiving file first and then take the entry out of the other one, each
through the write protocol; the history records the move (``archive`` or ``restore``) before the
file it leaves changes. So a crash between the two steps leaves the entry in both places, never
in neither, and :func:`reconcile_archive_sync` (run before every move and every consolidation
pass) drops the archived copy of an entry that is live with the same text: live memory wins.
Moves and reconciling of one scope take one lock (across processes), so a reconcile never
sees a move half done. The removal from the
live file compares the text first: an entry a person changed since it was read stays, and the
archive copy just written is taken back.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from mindroom.errors import MemoryStoreError
from mindroom.memory.files.history import HistoryRecord
from mindroom.memory.files.markdown import (
    MemoryEntry,
    append_entry,
    append_new_entry,
    parse_entries,
    remove_entry,
)
from mindroom.memory.files.protocol import file_lock, read_text
from mindroom.memory.policy.consent import KEPT
from mindroom.memory.scope import ENTRYPOINT, confined_path
from mindroom.memory.search.index import ARCHIVE_DIR, memory_files

if TYPE_CHECKING:
    from mindroom.memory.files.store import FileMemory

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

_NOTE_RE = re.compile(
    r"^<!-- archived (?P<on>\d{4}-\d{2}-\d{2}) from (?P<source>.+?)(?:; (?P<why>.*?))? -->[ \t]*$"
)


@dataclass(frozen=True)
class ArchivedEntry:
    """An entry in the archive: the entry (its path is the archive file), where it came from,
    the day it was archived and why (``merged into m-...``)."""

    entry: MemoryEntry
    source: str
    archived_on: str
    why: str


def archive_file(day: dt.date) -> str:
    """The archive file of the month of ``day``."""
    return f"{ARCHIVE_DIR}/{day:%Y-%m}.md"


def _note(on: dt.date, source: str, why: str) -> str:
    clean = " ".join(f"{source}; {why}".replace("-->", "- ->").split())
    return f"<!-- archived {on.isoformat()} from {clean} -->"


def _lines(document: str) -> list[str]:
    return document.split("\n")


def archived_entries(memory: FileMemory) -> list[ArchivedEntry]:
    """Every entry in the scope's archive files, oldest file first."""
    found: list[ArchivedEntry] = []
    for relative, path in memory_files(memory.scope.root, archive=True):
        if not relative.startswith(ARCHIVE_DIR + "/"):
            continue
        document = read_text(path, relative)
        lines = _lines(document)
        for entry in parse_entries(document, relative):
            after = lines[entry.end_line] if entry.end_line < len(lines) else ""
            note = _NOTE_RE.match(after.removesuffix("\r"))
            source = note.group("source") if note else ENTRYPOINT
            found.append(
                ArchivedEntry(
                    entry,
                    source,
                    note.group("on") if note else "",
                    (note.group("why") or "") if note else "",
                )
            )
    return found


def _without(document: str, relative: str, entry: MemoryEntry) -> str | None:
    """``document`` without ``entry`` (and its archive note); None when it is not there as read."""
    current = next((e for e in parse_entries(document, relative) if e.id == entry.id), None)
    if current is None or current.text != entry.text:
        return None
    lines = _lines(document)
    if current.end_line < len(lines) and _NOTE_RE.match(lines[current.end_line].rstrip("\r")):
        del lines[current.end_line]
        document = "\n".join(lines)
    return remove_entry(document, relative, entry.id)


def _append(document: str, entry: MemoryEntry, note: str | None) -> str | None:
    """``document`` with ``entry``: with a note line after it at its end (into the archive),
    without one where new memories go (back into its file); None when its id is there."""
    if any(e.id == entry.id for e in parse_entries(document, "")):
        return None
    if note is None:
        return append_new_entry(document, entry.id, entry.text, entry.fields)
    return append_entry(document, entry.id, entry.text, entry.fields) + note + "\n"


def _live(memory: FileMemory) -> set[tuple[str, str]]:
    """``(id, text)`` of every live entry."""
    memory.index.sync()
    return {(row[1], row[2]) for row in memory.index.snapshot()}


_held = threading.local()


@contextmanager
def _one_move(memory: FileMemory) -> Iterator[None]:
    """Moves (and reconciling) of one scope, one at a time across threads and processes: a
    reconcile between a move's two steps would take the entry for a copy left by a crash and
    drop the archived one just before the move takes out the live one. Re-entrant within a
    thread; taken inside a team's mirror lock (:meth:`FileMemory.as_one_write`), never around
    it, so the two are always taken in one order."""
    held: dict[Path, int] = getattr(_held, "roots", None) or {}
    _held.roots = held
    root = memory.scope.root.resolve()
    if held.get(root):
        held[root] += 1
        try:
            yield
        finally:
            held[root] -= 1
        return
    with file_lock(memory.scope.state_dir / "locks", root / ARCHIVE_DIR):
        held[root] = 1
        try:
            yield
        finally:
            del held[root]


def _exclusive(memory: FileMemory, operation: Callable[[], _T]) -> _T:
    """``operation`` as one write of the scope (a team's mirror lock) and its one move."""

    def locked() -> _T:
        with _one_move(memory):
            return operation()

    return memory.as_one_write(locked)


def reconcile_archive_sync(memory: FileMemory) -> int:
    """Drop the archived copy of every entry that is also live with the same id and text (a
    move cut short by a crash, either way); returns how many copies were dropped. An archived
    entry whose id is live with another text (a line copied by hand, marker and all) stays."""

    def reconcile() -> int:
        archived = archived_entries(memory)
        if not archived:
            return 0
        live = _live(memory)
        dropped = 0
        for item in archived:
            if (item.entry.id, item.entry.text) in live:
                _, relative = confined_path(memory.scope.root, item.entry.path)
                old, new = memory.write(
                    relative, partial(_without, relative=relative, entry=item.entry), None
                )
                dropped += old != new
        if dropped:
            logger.info(
                "memory %s: %d archived copies of live entries dropped", memory.scope_id, dropped
            )
        return dropped

    return _exclusive(memory, reconcile)


def archive_entry_sync(
    memory: FileMemory,
    entry: MemoryEntry,
    *,
    into: str | None,
    why: str,
    actor: str,
    today: dt.date,
    reconcile: bool = True,
) -> bool:
    """Move ``entry`` (as read: same id and text) to the archive; False when it changed or
    went since it was read (then nothing moves). ``into`` is the id that replaces it. A caller
    making many moves that reconciled once before them passes ``reconcile=False`` (a copy a
    crash left is harmless until the next reconcile; a move in progress elsewhere holds the
    lock)."""
    if entry.hand_written:
        raise MemoryStoreError(f"{entry.id} is a line a person wrote: it is never archived")
    target = archive_file(today)

    def move() -> bool:
        if reconcile:
            reconcile_archive_sync(memory)
        before, after = memory.write(
            target,
            lambda doc: _append(doc, entry, _note(today, entry.path, why)),
            None,
            consent=KEPT,  # a move: the text was stored before
        )
        kept = any(e.id == entry.id and e.text == entry.text for e in parse_entries(after, target))
        if not kept:  # the id is archived this month with another text: leave it all as it is
            logger.warning(
                "memory %s: %s not archived: %s holds that id with another text",
                memory.scope_id,
                entry.id,
                target,
            )
            return False

        def record() -> HistoryRecord:
            return memory.history.append(
                actor=actor,
                op="archive",
                entry_id=entry.id,
                path=entry.path,
                old=entry.text,
                new=None,
                meta={"archive": target, "into": into, "why": why},
            )

        old, new = memory.write(entry.path, lambda doc: _without(doc, entry.path, entry), record)
        if old != new:
            return True
        if before != after:  # take back the copy this move wrote (not one archived earlier)
            archived = MemoryEntry(entry.id, entry.text, target, 0, 0)
            memory.write(target, lambda doc: _without(doc, target, archived), None)
        return False

    return _exclusive(memory, move)


def restore_archived_sync(memory: FileMemory, entry_id: str, *, actor: str) -> MemoryEntry | None:
    """Bring the archived entry ``entry_id`` back into the file it came from (MEMORY.md if that
    path is no longer usable); None when the archive does not hold it."""

    def move() -> MemoryEntry | None:
        reconcile_archive_sync(memory)
        item = next((a for a in archived_entries(memory) if a.entry.id == entry_id), None)
        if item is None:
            return None
        try:
            _, source = confined_path(memory.scope.root, item.source)
        except MemoryStoreError:
            source = ENTRYPOINT
        if source.startswith(ARCHIVE_DIR + "/") or not source.endswith(".md"):
            source = ENTRYPOINT

        def record() -> HistoryRecord:
            return memory.history.append(
                actor=actor,
                op="restore",
                entry_id=entry_id,
                path=source,
                old=None,
                new=item.entry.text,
                meta={"archive": item.entry.path},
            )

        old, new = memory.write(
            source, lambda doc: _append(doc, item.entry, None), record, consent=KEPT
        )
        if old == new:  # the id is live there with another text: keep the archived one
            raise MemoryStoreError(
                f"memory {entry_id} is in {source} already (with other text); the archived "
                f"text stays in {item.entry.path}: copy it by hand if you want both"
            )
        memory.write(item.entry.path, lambda doc: _without(doc, item.entry.path, item.entry), None)
        restored = next((e for e in parse_entries(new, source) if e.id == entry_id), None)
        if restored is None:
            raise MemoryStoreError(f"memory {entry_id} was restored but is no longer in {source}")
        return restored

    return _exclusive(memory, move)
