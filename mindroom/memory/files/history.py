"""The audit trail of a scope: every write, appended to a JSONL file.

Each record has the time, the actor (``agent``, ``tool``, ``flush``, ``cli``...), the operation,
the memory id, the file, and the old and new text. A deleted entry lives on here, which is
what ``mindroom memory restore`` reads. The history is append-only and never rewritten.

A record is written (and fsynced) *before* the file change it describes, as its intent: a
crash between the two leaves a record without its change, never a change without its record.
A write that turns out not to happen after its record was written (a person's save made it
unnecessary, or the write failed) is followed by an ``abort`` record with the same id; so is
one whose process was killed before the change, when the scope is next opened (the store keeps
an intent marker per write in flight, see :class:`mindroom.memory.files.store.FileMemory`).

A record may carry an ``op_key``, the idempotency key of a tool call (see
:mod:`mindroom.adapters.agno.memory_tools`): a repeated call with a recorded key is answered from
the
record instead of written twice.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from mindroom.memory.files.markdown import hand_id
from mindroom.memory.files.protocol import file_lock


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
        self._offset = 0  # how much of the file _last has read
        self._last: dict[str, HistoryRecord] = {}

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

    def append_decided(
        self, decide: Callable[[dict[str, HistoryRecord]], list[HistoryRecord]]
    ) -> list[HistoryRecord]:
        """Append the records ``decide`` returns given the last record about each entry id (see
        :meth:`last_words`), both under the history's lock: so two processes that see the same
        change decide about it one after the other, and it is recorded once."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(self._lock_dir, self.path):
            now = time.time()
            records = [replace(r, time=now) for r in decide(self._read_last_words())]
            if not records:
                return []
            data = "".join(json.dumps(asdict(r), ensure_ascii=False) + "\n" for r in records)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                view = memoryview(data.encode("utf-8"))
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        return records

    def last_words(self) -> dict[str, HistoryRecord]:
        """The last record that changed a file about each entry id (see :func:`last_word_keys`)."""
        with file_lock(self._lock_dir, self.path):
            return dict(self._read_last_words())

    def _read_last_words(self) -> dict[str, HistoryRecord]:
        """The last words, brought up to the file (read from where it was read last: the file
        is append-only); the history's lock is held."""
        with self._guard:
            try:
                with self.path.open("rb") as handle:
                    size = os.fstat(handle.fileno()).st_size
                    if size < self._offset:  # not the file read before: read it whole
                        self._offset, self._last = 0, {}
                    handle.seek(self._offset)
                    data = handle.read(size - self._offset)
            except FileNotFoundError:
                self._offset, self._last = 0, {}
                return self._last
            complete = data[: data.rfind(b"\n") + 1]  # a torn last line waits
            self._offset += len(complete)
            for line in complete.decode("utf-8", errors="replace").splitlines():
                try:
                    record = HistoryRecord(**json.loads(line))
                except (ValueError, TypeError):
                    continue
                for key in last_word_keys(record):
                    if record.op == "abort":
                        self._last.pop(key, None)
                    else:
                        self._last[key] = record
            return self._last

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


# records that change no entry in a file: they are never an entry's last word
_NO_FILE_CHANGE = ("link", "consent", "repair")


def last_word_keys(record: HistoryRecord) -> list[str]:
    """The entry ids ``record`` is the last word about: its own, the id a hand-written line
    takes after an update (its id follows its text), the ``h-`` id of a line that became a
    mindroom entry ``m-`` + the same hex, and the entries a merge took in."""
    if record.op in _NO_FILE_CHANGE or not record.id:
        return []
    keys = [record.id]
    if record.op == "update" and record.id.startswith("h-") and record.new:
        keys += [hand_id(record.path, record.new), "m-" + record.id[2:]]
    if record.id.startswith("m-") and record.op in ("update", "restore", "ttl"):
        keys.append("h-" + record.id[2:])
    sources = (record.meta or {}).get("sources") if record.op == "merge" else None
    if isinstance(sources, list):
        keys += [str(source) for source in sources]
    return keys
