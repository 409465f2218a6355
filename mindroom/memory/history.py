"""The audit trail of a scope: every write, appended to a JSONL file.

Each record has the time, the actor (``agent``, ``tool``, ``flush``, ``cli``...), the operation,
the memory id, the file, and the old and new text. A deleted entry lives on here, which is
what ``mindroom memory restore`` reads. The history is append-only and never rewritten.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from mindroom.memory.files import file_lock


@dataclass(frozen=True)
class HistoryRecord:
    """One write to a scope's memory."""

    time: float
    actor: str
    op: str  # add | update | delete | restore | repair
    id: str
    path: str
    old: str | None
    new: str | None


class History:
    """The JSONL history file of one scope."""

    def __init__(self, path: Path, lock_dir: Path) -> None:
        self.path = path
        self._lock_dir = lock_dir

    def append(
        self, *, actor: str, op: str, entry_id: str, path: str, old: str | None, new: str | None
    ) -> HistoryRecord:
        """Record one write (durably: the line is fsynced before returning)."""
        record = HistoryRecord(time.time(), actor, op, entry_id, path, old, new)
        line = json.dumps(asdict(record), ensure_ascii=False) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with file_lock(self._lock_dir, self.path):
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
        return record

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
