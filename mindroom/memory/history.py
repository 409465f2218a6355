"""The audit trail of a scope: every write, appended to a JSONL file.

Each record has the time, the actor (``agent``, ``tool``, ``flush``, ``cli``...), the operation,
the memory id, the file, and the old and new text. A deleted entry lives on here, which is
what ``mindroom memory restore`` reads. The history is append-only and never rewritten.

A record is written (and fsynced) *before* the file change it describes, as its intent: a
crash between the two leaves a record without its change, never a change without its record.
A write that turns out not to happen after its record was written (a person's save made it
unnecessary, or the write failed) is followed by an ``abort`` record with the same id; so is
one whose process was killed before the change, when the scope is next opened (the store keeps
an intent marker per write in flight, see :class:`mindroom.memory.store.FileMemory`).

A record may carry an ``op_key``, the idempotency key of a tool call (see
:mod:`mindroom.agents.memory_tools`): a repeated call with a recorded key is answered from the
record instead of written twice.
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from mindroom.memory.files import file_lock


@dataclass(frozen=True)
class HistoryRecord:
    """One write to a scope's memory."""

    time: float
    actor: str
    op: str  # add | update | delete | restore | repair | abort | archive | merge
    id: str
    path: str
    old: str | None
    new: str | None
    op_key: str | None = None
    # archive: {"archive": file, "into": id or None, "why": reason}; merge: {"sources": [ids]}
    meta: dict[str, Any] | None = None


class History:
    """The JSONL history file of one scope."""

    def __init__(self, path: Path, lock_dir: Path) -> None:
        self.path = path
        self._lock_dir = lock_dir
        self._op_keys: dict[str, HistoryRecord] | None = None  # loaded on first use
        self._guard = threading.Lock()

    def append(
        self,
        *,
        actor: str,
        op: str,
        entry_id: str,
        path: str,
        old: str | None,
        new: str | None,
        op_key: str | None = None,
        meta: dict[str, Any] | None = None,
        durable: bool = True,
    ) -> HistoryRecord:
        """Record one write (durably: the line is fsynced before returning; ``durable`` False
        for a record of derived data, such as a link, that a crash may lose)."""
        record = HistoryRecord(time.time(), actor, op, entry_id, path, old, new, op_key, meta)
        line = json.dumps(asdict(record), ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(self._lock_dir, self.path):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode("utf-8"))
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
        if op_key is not None:
            with self._guard:
                if self._op_keys is not None:
                    self._op_keys[op_key] = record
        return record

    def append_many(self, records: list[HistoryRecord]) -> list[HistoryRecord]:
        """Record several writes of one batch (an import) with one write and one fsync; each
        record as :meth:`append` would have written it (its time: now)."""
        now = time.time()
        stamped = [replace(record, time=now) for record in records]
        data = "".join(json.dumps(asdict(r), ensure_ascii=False) + "\n" for r in stamped)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(self._lock_dir, self.path):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                view = memoryview(data.encode("utf-8"))
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        with self._guard:
            if self._op_keys is not None:
                self._op_keys.update({r.op_key: r for r in stamped if r.op_key is not None})
        return stamped

    def by_op_key(self, op_key: str) -> HistoryRecord | None:
        """The record written for the tool call ``op_key``, if any."""
        with self._guard:
            if self._op_keys is None:
                self._op_keys = {r.op_key: r for r in self.records() if r.op_key is not None}
            return self._op_keys.get(op_key)

    def records(self, entry_id: str | None = None) -> list[HistoryRecord]:
        """Every record (of ``entry_id`` when given), oldest first; torn lines are skipped."""
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        found = []
        for line in lines:
            try:
                record = HistoryRecord(**json.loads(line))
            except (ValueError, TypeError):
                continue
            if entry_id is None or record.id == entry_id:
                found.append(record)
        return found
