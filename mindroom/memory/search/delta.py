"""The memory delta header: what changed in a memory since a thread's last turn.

Each scope's history is its change log; a thread's *revision* is how far into that log the
thread has seen (a record count, and the byte offset it ends at, so a turn reads only what is
new). At a thread's first turn its revision is set to the end of the log and nothing is shown.
At every later turn the records appended since are read, the changes the agent may see are
kept (its allowlist, by the category the record carries), and the recall block starts with at
most :data:`MAX_BULLETS` of them, newest first::

    Memory changes since your last turn here (revision 12 to 15):
    - +created: [profile] Alice's preferred name is Ana (importance 2)
    - ↑updated: [goals] Ship v1 by September
    - ↔merged: 2 notes about lactose intolerance into one

An entry removed since (deleted, archived, expired) is only counted (``−deleted: 1 note``),
and only when the agent could have read it; one found nowhere is not mentioned: a fact a
person deleted never comes back through the header.

Then the thread's revision moves to the end of what was read, by a compare-and-set on its
row, so a change is surfaced once per thread even when two turns of a thread overlap.
Changes a thread's own tool calls made are not repeated to it (the record names the run).

The revisions live in ``deltas.db`` beside the index: control state; deleting it costs each
thread one turn without a header.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from mindroom.memory.files.archive import archived_entries
from mindroom.memory.files.history import HistoryRecord
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.filters import MemoryFilter
from mindroom.memory.policy.gate import EntryState, StoredEntry, may_read
from mindroom.memory.policy.view import AgentView
from mindroom.store.migrations import open_store, transaction
from mindroom.store.schemas import THREAD_REVISIONS

MAX_BULLETS = 3
_MARKS = {
    "add": "+created",
    "update": "↑updated",
    "merge": "↔merged",
    "delete": "−deleted",
    "archive": "−deleted",
    "ttl": "−deleted",
    "restore": "restored",
}
_GONE = ("delete", "archive", "ttl")  # records of a removal


@dataclass(frozen=True)
class Delta:
    """What a thread has not seen: the bullets, and the revisions they span."""

    since: int
    until: int
    bullets: list[str]

    def render(self) -> str:
        if not self.bullets:
            return ""
        head = f"Memory changes since your last turn here (revision {self.since} to {self.until}):"
        return "\n".join([head, *self.bullets])


def _read_since(path: Path, offset: int) -> tuple[list[HistoryRecord], int]:
    """The whole records appended to ``path`` after byte ``offset``, and where they end (a
    torn last line is left for next time)."""
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if offset > size:  # the history was replaced: start over from its end
                return [], size
            handle.seek(offset)
            data = handle.read()
    except FileNotFoundError:
        return [], 0
    end = data.rfind(b"\n") + 1
    records = []
    for line in data[:end].splitlines():
        try:
            records.append(HistoryRecord(**json.loads(line)))
        except (ValueError, TypeError):
            continue
    return records, offset + end


def _as_stored(memory: FileMemory, ids: list[str]) -> dict[str, tuple[MemoryEntry, EntryState]]:
    """Each entry of ``ids`` as it is stored now: live (or expired) in the memory files, else
    in the archive; an entry found in neither is left out (its text is never shown)."""
    found: dict[str, tuple[MemoryEntry, EntryState]] = {}
    wanted = frozenset(ids)
    memory.index.sync()  # once: then the index is the files as they are now
    for expired in (False, True):  # one query each, whatever the number of changes
        where = MemoryFilter(ids=wanted, soft_deleted=expired).where()
        for entry in memory.index.select(where, len(wanted), synced=True):
            found.setdefault(entry.id, (entry, StoredEntry.of(entry).state))
    missing = wanted - set(found)
    if missing:
        for archived in archived_entries(memory):
            if archived.entry.id in missing:
                found[archived.entry.id] = (archived.entry, EntryState.ARCHIVED)
    return found


def _bullet(record: HistoryRecord, entry: MemoryEntry, view: AgentView, created: bool) -> str:
    """One change to a live entry the agent may see (``record`` the newest; ``created``: the
    entry is new since the thread's last turn), with the entry's text as it is now."""
    mark = _MARKS[record.op]
    if record.op in _GONE:  # it was removed, and is back now
        mark = "restored"
    elif created and record.op == "update":
        mark = _MARKS["add"]
    fields = entry.fields
    text = " ".join(entry.text.split())
    if len(text) > 160:
        text = text[:159] + "…"
    if record.op == "merge":
        sources = (record.meta or {}).get("sources") or []
        text = f"{len(sources) or 2} notes into one: {text}"
    importance = f" (importance {fields.importance})" if fields.importance else ""
    return f"- {mark}: [{fields.category_or(view.access.default)}] {text}{importance}"


def _bullets(memory: FileMemory, records: list[HistoryRecord], view: AgentView) -> list[str]:
    """What the agent may see of ``records`` (oldest first), newest first: each changed entry
    once, judged by the read gate on the entry as it is stored now (its category, type and
    state, whatever the record says), at most :data:`MAX_BULLETS`; entries removed since
    are counted, never quoted."""
    latest: dict[str, HistoryRecord] = {}
    created: set[str] = set()  # added since the thread's last turn
    for record in reversed(records):
        if record.op in _MARKS and record.id and record.id not in latest:
            latest[record.id] = record
        created |= {record.id} if record.op == "add" else set()
    stored = _as_stored(memory, list(latest))
    reader = view.reader()
    bullets: list[str] = []
    removed = 0
    for entry_id, record in latest.items():
        if entry_id not in stored:
            continue  # nowhere now: nothing of it is shown
        entry, state = stored[entry_id]
        now = StoredEntry.of(entry, state)
        if state is EntryState.LIVE:
            if may_read(reader, now) and len(bullets) < MAX_BULLETS:
                bullets.append(_bullet(record, entry, view, entry_id in created))
        elif may_read(reader, replace(now, state=EntryState.LIVE)):
            removed += 1  # one the agent could have read: say that it went, not what it said
    if removed:
        bullets.append(f"- −deleted: {removed} note{'s' if removed > 1 else ''}")
    return bullets


class ThreadRevisions:
    """The revisions of one scope's threads (``deltas.db``); one thread at a time uses it."""

    def __init__(self, memory: FileMemory) -> None:
        self._memory = weakref.ref(memory)  # kept open per memory: never keeps it alive
        self._path = memory.scope.state_dir / "deltas.db"
        self._db: sqlite3.Connection = open_store(self._path, THREAD_REVISIONS)
        self._inode = self._path.stat().st_ino
        self._lock = threading.Lock()

    @property
    def memory(self) -> FileMemory:
        memory = self._memory()
        if memory is None:
            raise RuntimeError("the memory of these thread revisions is gone")
        return memory

    def close(self) -> None:
        with self._lock:  # not under a take running in another thread
            self._db.close()

    def current(self) -> bool:
        """Whether the file this connection opened is still the scope's ``deltas.db`` (not
        deleted or replaced since)."""
        try:
            return self._path.stat().st_ino == self._inode
        except OSError:
            return False

    def take(self, thread_id: str, view: AgentView, *, advance: bool = True) -> Delta:
        """What ``thread_id`` has not seen yet; with ``advance`` it counts as seen now."""
        with self._lock:
            return self._take(thread_id, view, advance)

    def _take(self, thread_id: str, view: AgentView, advance: bool) -> Delta:
        row = self._db.execute(
            "SELECT rev, offset FROM thread_revisions WHERE thread_id = ?", (thread_id,)
        ).fetchone()
        history = self.memory.history.path
        if row is None:
            end = history.stat().st_size if history.exists() else 0
            if advance:
                with transaction(self._db) as db:
                    db.execute(
                        "INSERT OR IGNORE INTO thread_revisions VALUES (?, 0, ?, ?)",
                        (thread_id, end, time.time()),
                    )
            return Delta(0, 0, [])
        rev, offset = int(row["rev"]), int(row["offset"])
        records, end = _read_since(history, offset)
        new_rev = rev + len(records)
        shown = [r for r in records if (r.meta or {}).get("run") != thread_id]
        bullets = _bullets(self.memory, shown, view)
        if advance and end != offset:
            with transaction(self._db) as db:
                moved = db.execute(
                    "UPDATE thread_revisions SET rev = ?, offset = ?, updated_at = ?"
                    " WHERE thread_id = ? AND offset = ?",
                    (new_rev, end, time.time(), thread_id, offset),
                ).rowcount
            if not moved:  # another turn of this thread took these changes: shown once
                return Delta(rev, new_rev, [])
        return Delta(rev, new_rev, bullets)


def thread_revisions(memory: FileMemory) -> ThreadRevisions:
    """``memory``'s thread revisions, kept open while the memory is (closed with it): a turn's
    recall does not open, migrate-check and close ``deltas.db`` (a close checkpoints its WAL)
    each time. A file deleted or replaced since is opened again."""
    return memory.held(
        "thread-revisions", lambda kept: kept.current(), lambda: ThreadRevisions(memory)
    )


@contextlib.contextmanager
def revisions_of(memory: FileMemory) -> Iterator[ThreadRevisions]:
    """The thread revisions a turn reads: a shared scope's kept open
    (:func:`thread_revisions`); a person's private scope's opened for the turn and closed
    after, as many of those are open at once within the descriptor budget of
    :mod:`mindroom.app.resources`."""
    if memory.scope.person_key is None:
        yield thread_revisions(memory)
        return
    revisions = ThreadRevisions(memory)
    try:
        yield revisions
    finally:
        revisions.close()
