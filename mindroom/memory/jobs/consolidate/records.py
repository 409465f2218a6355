"""What consolidation keeps beside a scope's files, in its ``consolidation.db``.

* ``memory_conflicts``: the pairs a person should look at: contradictions (``kind``
  ``conflict``: both ids and the reason) and proposed merges that would rewrite a line a person
  wrote (``kind`` ``merge``, with the proposed text). A pair is recorded once (its ids sorted),
  so a pair a person resolved is not raised again. ``mindroom memory conflicts`` lists them and
  ``mindroom memory resolve`` settles one.
* ``retrievals``: how often recall put each entry into a turn (entries recalled often are
  consolidation candidates and count as corroborated).
* ``corroborations``: the days a fact was noted on, carried from every duplicate merged into
  it (two days make it a candidate for ``MEMORY.md``).

Control state, like the pair fingerprints beside it: deleting the file forgets open conflicts
and counts, never memory (the texts are in the files and the archive). WAL and a busy timeout,
so the bot, the CLI and a maintenance daemon can use it at once. Its tables (these, the pair
fingerprints and the insight runs) are one versioned store,
:data:`mindroom.store.schemas.CONSOLIDATION`.
"""

from __future__ import annotations

import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mindroom.store.migrations import open_store, transaction
from mindroom.store.schemas import CONSOLIDATION


@dataclass(frozen=True)
class Conflict:
    """One recorded pair (see the module docstring)."""

    id: str
    kind: str
    memory_id: str
    conflicting_memory_id: str
    reason: str
    created_at: float
    metadata: dict[str, Any]
    status: str
    resolution: str | None


def db_path(state_dir: Path) -> Path:
    """A scope's consolidation database (beside its index)."""
    return state_dir / "consolidation.db"


class ConsolidationRecords:
    """One scope's ``consolidation.db`` (thread-safe; opens on first use)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None

    @property
    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            self._connection = open_store(self.path, CONSOLIDATION)
        return self._connection

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    # -- conflicts and proposed merges ------------------------------------------------------

    def record(
        self, kind: str, a_id: str, b_id: str, reason: str, metadata: dict[str, Any]
    ) -> Conflict | None:
        """Record a pair once; None when it was recorded before (open or resolved)."""
        first, second = sorted((a_id, b_id))
        conflict_id = "c-" + secrets.token_hex(4)
        with self._lock, transaction(self._db) as db:
            cursor = db.execute(
                "INSERT OR IGNORE INTO memory_conflicts (id, kind, memory_id,"
                " conflicting_memory_id, reason, created_at, metadata_json)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (conflict_id, kind, first, second, reason, time.time(), json.dumps(metadata)),
            )
            if cursor.rowcount == 0:
                return None
        return self.get(conflict_id)

    def known(self, a_id: str, b_id: str) -> bool:
        """Whether the pair was recorded (any kind, any status)."""
        first, second = sorted((a_id, b_id))
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM memory_conflicts WHERE memory_id = ? AND conflicting_memory_id = ?",
                (first, second),
            ).fetchone()
        return row is not None

    def _read(self, where: str, args: Iterable[Any]) -> list[Conflict]:
        with self._lock:
            rows = self._db.execute(
                "SELECT id, kind, memory_id, conflicting_memory_id, reason, created_at,"
                f" metadata_json, status, resolution FROM memory_conflicts WHERE {where}"
                " ORDER BY created_at",
                tuple(args),
            ).fetchall()
        return [
            Conflict(
                id=row["id"],
                kind=row["kind"],
                memory_id=row["memory_id"],
                conflicting_memory_id=row["conflicting_memory_id"],
                reason=row["reason"],
                created_at=row["created_at"],
                metadata=json.loads(row["metadata_json"]),
                status=row["status"],
                resolution=row["resolution"],
            )
            for row in rows
        ]

    def get(self, conflict_id: str) -> Conflict | None:
        found = self._read("id = ?", (conflict_id,))
        return found[0] if found else None

    def conflicts(self, include_resolved: bool = False) -> list[Conflict]:
        """The recorded pairs, oldest first (the open ones unless ``include_resolved``)."""
        return self._read("1" if include_resolved else "status = 'open'", ())

    def open_for(self, entry_ids: Iterable[str]) -> list[Conflict]:
        """Open conflicts (kind ``conflict``) that involve any of ``entry_ids``."""
        ids = list(dict.fromkeys(entry_ids))
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        return self._read(
            f"status = 'open' AND kind = 'conflict' AND (memory_id IN ({marks})"
            f" OR conflicting_memory_id IN ({marks}))",
            (*ids, *ids),
        )

    def resolve(self, conflict_id: str, resolution: str) -> None:
        with self._lock, transaction(self._db) as db:
            db.execute(
                "UPDATE memory_conflicts SET status = 'resolved', resolution = ?, resolved_at = ?"
                " WHERE id = ?",
                (resolution, time.time(), conflict_id),
            )

    # -- retrievals and corroboration --------------------------------------------------------

    def note_retrieved(self, entry_ids: Iterable[str]) -> None:
        """Count one retrieval of each of ``entry_ids``."""
        now = time.time()
        with self._lock, transaction(self._db) as db:
            db.executemany(
                "INSERT INTO retrievals VALUES (?, 1, ?) ON CONFLICT(entry_id)"
                " DO UPDATE SET count = count + 1, last_at = excluded.last_at",
                [(entry_id, now) for entry_id in dict.fromkeys(entry_ids)],
            )

    def last_retrieved(self) -> dict[str, float]:
        """When each entry was last read by an agent (epoch seconds)."""
        with self._lock:
            rows = self._db.execute("SELECT entry_id, last_at FROM retrievals").fetchall()
        return {r["entry_id"]: float(r["last_at"]) for r in rows if r["last_at"] is not None}

    def retrievals(self) -> dict[str, int]:
        with self._lock:
            rows = self._db.execute("SELECT entry_id, count FROM retrievals").fetchall()
        return {row["entry_id"]: row["count"] for row in rows}

    def days(self, entry_id: str) -> set[str]:
        """The days ``entry_id``'s fact was noted on, as far as merges told."""
        with self._lock:
            row = self._db.execute(
                "SELECT days FROM corroborations WHERE entry_id = ?", (entry_id,)
            ).fetchone()
        return set(json.loads(row["days"])) if row else set()

    def add_days(self, entry_id: str, days: Iterable[str]) -> set[str]:
        """Add ``days`` to ``entry_id``'s; returns them all."""
        merged = self.days(entry_id) | {d for d in days if d}
        with self._lock, transaction(self._db) as db:
            db.execute(
                "INSERT OR REPLACE INTO corroborations VALUES (?, ?)",
                (entry_id, json.dumps(sorted(merged))),
            )
        return merged
