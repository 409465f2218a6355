"""Write intents: a history record written before its file change, until the change is known.

:meth:`FileMemory._write <mindroom.memory.files.store.FileMemory._write>` writes a change's history
record first and leaves a marker (``<state>/intents/*.json``) until the file write settles. A
write that did not change the file gets an ``abort`` record after its own. A process killed in
between leaves the marker; the next opening of the scope looks at the file: a change that shows
stands, one that does not is aborted. So the history never claims a change the files do not have.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from mindroom.errors import MemoryStoreError
from mindroom.memory.files.history import History, HistoryRecord
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.files.protocol import file_lock
from mindroom.memory.scope import MemoryScope, confined_path


class Intents:
    """The intent markers of one scope (see the module docstring)."""

    def __init__(
        self,
        scope: MemoryScope,
        locks: Path,
        history: History,
        entries: Callable[[str], list[MemoryEntry]],
    ) -> None:
        self.scope = scope
        self.locks = locks
        self.history = history
        self.entries = entries  # a file's entries as they are now
        self.folder = scope.state_dir / "intents"

    def mark(self, record: HistoryRecord | list[HistoryRecord]) -> Path:
        """Leave the marker of ``record``'s write (or of one write of a batch of records, an
        import's); its path."""
        self.folder.mkdir(parents=True, exist_ok=True)
        marker = self.folder / f"{time.time_ns()}-{secrets.token_hex(3)}.json"
        data = [asdict(r) for r in record] if isinstance(record, list) else asdict(record)
        marker.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        return marker

    def abort(self, record: HistoryRecord) -> None:
        """Record that ``record``'s change was not made."""
        self.history.append(
            actor=record.actor,
            op="abort",
            entry_id=record.id,
            path=record.path,
            old=None,
            new=None,
            op_key=record.op_key,
        )

    def happened(self, record: HistoryRecord) -> bool:
        """Whether the file shows the change ``record`` announced."""
        try:
            entries = self.entries(record.path)
        except MemoryStoreError:
            return False
        if record.op in ("delete", "archive", "forget"):
            return all(e.id != record.id for e in entries)
        if record.op in ("update", "merge"):
            return any(e.text == record.new for e in entries)
        return any(e.id == record.id for e in entries)

    def settle(self, record: HistoryRecord, marker: Path) -> None:
        """Abort ``record`` unless its change shows, and drop its marker."""
        if not self.happened(record):
            self.abort(record)
        marker.unlink(missing_ok=True)

    def reconcile(self) -> None:
        """At open: settle the writes a crashed process announced but may not have made."""
        try:
            markers = sorted(self.folder.iterdir())
        except FileNotFoundError:
            return
        for marker in markers:
            try:
                data = json.loads(marker.read_text(encoding="utf-8"))
                records = [HistoryRecord(**r) for r in (data if isinstance(data, list) else [data])]
                target, _ = confined_path(self.scope.root, records[0].path)
            except (OSError, ValueError, TypeError, IndexError, MemoryStoreError):
                marker.unlink(missing_ok=True)  # torn by the crash: its write never began
                continue
            try:
                with file_lock(self.locks, target, timeout=0):  # a live writer holds it
                    if marker.exists():
                        for record in records:
                            if not self.happened(record):
                                self.abort(record)
                        marker.unlink(missing_ok=True)
            except MemoryStoreError:
                continue
