"""Bringing memory back, and changing an entry's fields: writes by the store's protocol.

``restore`` looks in three places, in order: the archive (consolidation moved the entry
there, :mod:`mindroom.memory.files.archive`), the files themselves (TTL expired it: its marker says
``state=soft_deleted`` until its purge day), and the history (it was deleted; the history
keeps its text and fields). Each way brings back the entry's id and fields.
"""

from __future__ import annotations

from dataclasses import replace

from mindroom.errors import MemoryStoreError
from mindroom.memory.files.fields import EntryFields, parse_fields, render_fields
from mindroom.memory.files.history import HistoryRecord
from mindroom.memory.files.markdown import (
    MemoryEntry,
    append_new_entry,
    new_entry_id,
    parse_entries,
    replace_entry,
)
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.consent import KEPT
from mindroom.memory.scope import confined_path


def restore_sync(memory: FileMemory, entry_id: str, *, actor: str) -> MemoryEntry:
    """Bring back the archived, expired or deleted entry ``entry_id`` (see the module
    docstring)."""
    from mindroom.memory.files.archive import (
        restore_archived_sync,  # the archive builds on the store
    )

    restored = restore_archived_sync(memory, entry_id, actor=actor)
    if restored is not None:
        return restored
    present = memory.lookup(entry_id)
    if present is not None:
        if not present.fields.soft_deleted:
            deleted = any(r.op in ("delete", "archive") for r in memory.history.records(entry_id))
            if deleted:
                raise MemoryStoreError(f"memory {entry_id!r} is already in {present.path}")
            raise MemoryStoreError(
                f"{entry_id!r} is neither archived nor deleted in the history, nor expired "
                f"(it is in {present.path})"
            )
        live = replace(present.fields, state=None, purge=None)
        return set_fields_sync(memory, entry_id, live, actor=actor, op="restore")
    return _from_history(memory, entry_id, actor)


def _from_history(memory: FileMemory, entry_id: str, actor: str) -> MemoryEntry:
    """A deletion, or an archived entry that is no longer in the archive (the history keeps
    the text either way)."""
    deletions = [r for r in memory.history.records(entry_id) if r.op in ("delete", "archive")]
    if not deletions:
        raise MemoryStoreError(f"{entry_id!r} is neither archived nor deleted in the history")
    deleted = deletions[-1]
    assert deleted.old is not None
    _, relative = confined_path(memory.scope.root, deleted.path)
    if any(e.id == entry_id for e in memory.entries_of(relative)):
        raise MemoryStoreError(f"memory {entry_id!r} is already in {relative}")
    # a hand-written line comes back as a regular entry; fields as they were (live again)
    new_id = new_entry_id() if deleted.id.startswith("h-") else deleted.id
    was = parse_fields(str((deleted.meta or {}).get("fields", "")))
    fields = replace(was, state=None, purge=None)

    def record() -> HistoryRecord:
        return memory.history.append(
            actor=actor,
            op="restore",
            entry_id=new_id,
            path=relative,
            old=None,
            new=deleted.old,
            meta={"fields": render_fields(fields)} if fields.category else None,
        )

    def edit(doc: str) -> str | None:
        if any(e.id == new_id for e in parse_entries(doc, relative)):
            return None
        return append_new_entry(doc, new_id, deleted.old or "", fields)

    _, new = memory.write(relative, edit, record, consent=KEPT)  # stored before
    return _written(new, relative, new_id)


def set_fields_sync(
    memory: FileMemory, entry_id: str, fields: EntryFields, *, actor: str, op: str = "update"
) -> MemoryEntry:
    """Give entry ``entry_id`` ``fields`` (its text stays). A hand-written line becomes a
    mindroom entry where it stands (only those carry fields). The history records ``op``
    with the old and new fields."""
    entry = memory.find(entry_id)
    if entry.fields == fields:
        return entry
    new_id = entry.id if not entry.hand_written else "m-" + entry.id[2:]

    def record() -> HistoryRecord:
        return memory.history.append(
            actor=actor,
            op=op,
            entry_id=new_id,
            path=entry.path,
            old=entry.text,
            new=entry.text,
            meta={"fields": render_fields(fields), "old_fields": render_fields(entry.fields)},
        )

    def edit(doc: str) -> str | None:
        current = next((e for e in parse_entries(doc, entry.path) if e.id == entry.id), None)
        if current is None or current.text != entry.text:
            return None  # changed meanwhile: the caller hears so below
        return replace_entry(doc, entry.path, entry.id, entry.text, fields)

    old, new = memory.write(entry.path, edit, record, consent=KEPT)
    if old == new:
        raise MemoryStoreError(f"memory {entry_id!r} changed meanwhile; look it up again")
    found = next(
        (e for e in parse_entries(new, entry.path) if e.start_line == entry.start_line), None
    )
    if found is None:
        raise MemoryStoreError(f"memory {entry_id!r} was changed but is no longer where it was")
    return found


def _written(document: str, relative: str, entry_id: str) -> MemoryEntry:
    entry = next((e for e in parse_entries(document, relative) if e.id == entry_id), None)
    if entry is None:
        raise MemoryStoreError(f"memory {entry_id} was written but is no longer in {relative}")
    return entry
