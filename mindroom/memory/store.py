"""File memory: a scope's markdown files, its search index and its history, together.

This is the ``file`` backend. The markdown files are the source of truth; every method reads
them (through the index, which syncs with them first) and every write goes through
:func:`mindroom.memory.files.edit_file` (locked, re-read, atomic) and is recorded in the
history. The blocking work runs in a thread so the event loop never waits on disk.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

from mindroom.errors import MemoryStoreError
from mindroom.memory.files import edit_file, read_text
from mindroom.memory.history import History, HistoryRecord
from mindroom.memory.index import MemoryIndex, SearchHit, memory_files
from mindroom.memory.markdown import (
    MemoryEntry,
    append_entry,
    hand_id,
    new_entry_id,
    normalize_text,
    parse_entries,
    remove_entry,
    replace_entry,
)
from mindroom.memory.scope import ENTRYPOINT, MemoryScope, confined_path

MAX_READ_LINES = 400


class FileMemory:
    """The file memory of one scope."""

    def __init__(self, scope: MemoryScope) -> None:
        self.scope = scope
        self.scope_id = scope.scope_id
        self.index = MemoryIndex(scope.state_dir / "index.db", scope.root)
        self.history = History(scope.state_dir / "history.jsonl", self._locks)

    @property
    def _locks(self) -> Path:
        return self.scope.state_dir / "locks"

    def close(self) -> None:
        """Close the index."""
        self.index.close()

    def prepare(self) -> None:
        """Bring the files to a consistent state before reading them (mirrors repair here)."""

    # -- synchronous core (runs in a worker thread) --------------------------------------------

    def _entries(self, relative: str) -> list[MemoryEntry]:
        path, relative = confined_path(self.scope.root, relative)
        return parse_entries(read_text(path), relative)

    def find(self, entry_id: str) -> MemoryEntry:
        """The entry ``entry_id`` as it is in its file now."""
        entry_id = entry_id.strip()
        self.index.sync()
        for relative in self.index.locate(entry_id):
            for entry in self._entries(relative):
                if entry.id == entry_id:
                    return entry
        raise MemoryStoreError(f"no memory with id {entry_id!r} (search or list to find ids)")

    def add_sync(self, text: str, *, actor: str, path: str | None = None) -> MemoryEntry:
        """Append a new entry to ``path`` (default ``MEMORY.md``)."""
        text = _checked(text)
        target, relative = confined_path(self.scope.root, path or ENTRYPOINT)
        entry_id = new_entry_id()
        edit_file(target, self._locks, lambda doc: append_entry(doc, entry_id, text))
        self.history.append(
            actor=actor, op="add", entry_id=entry_id, path=relative, old=None, new=text
        )
        return next(e for e in self._entries(relative) if e.id == entry_id)

    def append_unique_sync(self, text: str, *, actor: str, path: str) -> MemoryEntry | None:
        """Append ``text`` to ``path`` unless an entry with the same text is already there."""
        text = _checked(text)
        target, relative = confined_path(self.scope.root, path)
        entry_id = new_entry_id()

        def edit(doc: str) -> str | None:
            existing = {_same(e.text) for e in parse_entries(doc, relative)}
            return None if _same(text) in existing else append_entry(doc, entry_id, text)

        old, new = edit_file(target, self._locks, edit)
        if old == new:
            return None
        self.history.append(
            actor=actor, op="add", entry_id=entry_id, path=relative, old=None, new=text
        )
        return next(e for e in self._entries(relative) if e.id == entry_id)

    def update_sync(self, entry_id: str, text: str, *, actor: str) -> MemoryEntry:
        """Replace the text of ``entry_id`` in its file."""
        text = _checked(text)
        entry = self.find(entry_id)
        target, _ = confined_path(self.scope.root, entry.path)
        old, new = edit_file(
            target, self._locks, lambda doc: replace_entry(doc, entry.path, entry.id, text)
        )
        if old == new and entry.text != text:
            raise MemoryStoreError(f"memory {entry_id!r} changed while updating; try again")
        self.history.append(
            actor=actor, op="update", entry_id=entry.id, path=entry.path, old=entry.text, new=text
        )
        # a hand-written line's id follows its text: find the entry where it stood
        entries = self._entries(entry.path)
        wanted = hand_id(entry.path, text) if entry.hand_written else entry.id
        return next(
            (e for e in entries if e.id == wanted),
            next(e for e in entries if e.start_line == entry.start_line),
        )

    def delete_sync(self, entry_id: str, *, actor: str) -> MemoryEntry:
        """Remove ``entry_id`` from its file; the history keeps its text."""
        entry = self.find(entry_id)
        target, _ = confined_path(self.scope.root, entry.path)
        old, new = edit_file(
            target, self._locks, lambda doc: remove_entry(doc, entry.path, entry.id)
        )
        if old == new:
            raise MemoryStoreError(f"memory {entry_id!r} changed while deleting; try again")
        self.history.append(
            actor=actor, op="delete", entry_id=entry.id, path=entry.path, old=entry.text, new=None
        )
        return entry

    def restore_sync(self, entry_id: str, *, actor: str) -> MemoryEntry:
        """Bring back a deleted entry, with its id, into the file it was deleted from."""
        deletions = [r for r in self.history.records(entry_id) if r.op == "delete"]
        if not deletions:
            raise MemoryStoreError(f"the history has no deletion of {entry_id!r}")
        record = deletions[-1]
        assert record.old is not None
        target, relative = confined_path(self.scope.root, record.path)
        if any(e.id == entry_id for e in self._entries(relative)):
            raise MemoryStoreError(f"memory {entry_id!r} is already in {relative}")
        # a hand-written line comes back as a regular entry
        new_id = new_entry_id() if record.id.startswith("h-") else record.id
        edit_file(target, self._locks, lambda doc: append_entry(doc, new_id, record.old or ""))
        self.history.append(
            actor=actor, op="restore", entry_id=new_id, path=relative, old=None, new=record.old
        )
        return next(e for e in self._entries(relative) if e.id == new_id)

    def list_sync(self, limit: int = 50) -> list[MemoryEntry]:
        """Entries of MEMORY.md, then daily files newest first, then other files."""
        files = [relative for relative, _ in memory_files(self.scope.root)]
        daily = sorted((f for f in files if f.startswith("memory/")), reverse=True)
        ordered = [f for f in files if f == ENTRYPOINT] + daily
        ordered += [f for f in files if f not in ordered]
        found: list[MemoryEntry] = []
        for relative in ordered:
            found.extend(self._entries(relative))
            if len(found) >= limit:
                break
        return found[:limit]

    def read_file_sync(self, path: str, from_line: int = 1, lines: int = 100) -> str:
        """Numbered lines ``from_line``.. of a memory file."""
        target, relative = confined_path(self.scope.root, path)
        if not target.is_file():
            raise MemoryStoreError(f"no memory file {relative!r}")
        all_lines = _lines(read_text(target))
        start = max(1, from_line)
        count = max(1, min(lines, MAX_READ_LINES))
        chosen = all_lines[start - 1 : start - 1 + count]
        body = "\n".join(f"{n:>5}  {line}" for n, line in enumerate(chosen, start))
        rest = len(all_lines) - (start - 1 + len(chosen))
        more = f"\n({rest} more lines after this)" if rest > 0 else ""
        span = f"lines {start}-{start + len(chosen) - 1} of {len(all_lines)}"
        return f"{relative} ({span}):\n{body}{more}"

    def head(self, relative: str, max_lines: int) -> tuple[list[str], int]:
        """The first ``max_lines`` lines of a file and its total line count ([] when missing)."""
        target, _ = confined_path(self.scope.root, relative)
        lines = _lines(read_text(target))
        return lines[:max_lines], len(lines)

    def history_of(self, entry_id: str | None = None) -> list[HistoryRecord]:
        """History records (of one entry when given)."""
        return self.history.records(entry_id)

    # -- the async backend interface ----------------------------------------------------------

    async def add(self, text: str, *, actor: str, path: str | None = None) -> MemoryEntry:
        return await asyncio.to_thread(self.add_sync, text, actor=actor, path=path)

    async def search(self, query: str, limit: int = 5) -> list[SearchHit]:
        return await asyncio.to_thread(self.index.search, query, limit)

    async def list(self, limit: int = 50) -> list[MemoryEntry]:
        return await asyncio.to_thread(self.list_sync, limit)

    async def get(self, entry_id: str) -> MemoryEntry:
        return await asyncio.to_thread(self.find, entry_id)

    async def update(self, entry_id: str, text: str, *, actor: str) -> MemoryEntry:
        return await asyncio.to_thread(self.update_sync, entry_id, text, actor=actor)

    async def delete(self, entry_id: str, *, actor: str) -> MemoryEntry:
        return await asyncio.to_thread(self.delete_sync, entry_id, actor=actor)

    async def read_file(self, path: str, from_line: int = 1, lines: int = 100) -> str:
        return await asyncio.to_thread(self.read_file_sync, path, from_line, lines)


def today(now: dt.datetime | None = None) -> str:
    """Today's date as daily files name it (local time)."""
    return (now or dt.datetime.now()).strftime("%Y-%m-%d")


def _lines(text: str) -> list[str]:
    """Lines as entries count them: only "\n" ends a line (a "\r" before it is dropped)."""
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    return lines[:-1] if lines and lines[-1] == "" else lines


def _checked(text: str) -> str:
    try:
        return normalize_text(text)
    except ValueError as exc:
        raise MemoryStoreError(f"cannot store an empty memory: {exc}") from None


def _same(text: str) -> str:
    return " ".join(text.split()).casefold()
