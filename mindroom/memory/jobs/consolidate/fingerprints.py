"""Pair fingerprints: which pairs of entries the model judged lately, so it is not asked again.

A pair's fingerprint is its two entry ids (sorted, so the order does not matter) and its
similarity rounded to two decimals: when either entry's text changes, its similarity usually
changes too and the pair is asked again. A fingerprint counts for ``recheck_days`` after its
pair was judged. It is kept for :data:`FORGET_DAYS` (or ``recheck_days`` if that is longer) and
deleted as new ones are written: until then the judge knows a pair was asked before, and asks
the pairs never asked first (a budget smaller than the pairs waiting would otherwise spend
itself re-asking the same pairs every ``recheck_days``, and never reach the rest).

The table ``pair_fingerprints`` lives in the scope's ``consolidation.db`` beside the pass's own
tables; this module touches only this one (the file's schema is one versioned store,
:data:`mindroom.store.schemas.CONSOLIDATION`). It is control state: deleting it costs
model calls, never memory. WAL and a busy timeout, as the memory index, so the bot and the CLI
(or a daemon) can use one file at once.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
from pathlib import Path

from mindroom.store.migrations import open_store, transaction
from mindroom.store.schemas import CONSOLIDATION

_DAY = 86400.0
FORGET_DAYS = 180.0


def _key(a_id: str, b_id: str, similarity: float) -> tuple[str, str, int]:
    first, second = sorted((a_id, b_id))
    return first, second, round(similarity * 100)


class Fingerprints:
    """The recently judged pairs of one scope (thread-safe; the connection opens on first use)."""

    def __init__(self, db_path: Path, recheck_days: float) -> None:
        self.db_path = db_path
        self.recheck_days = recheck_days
        self._lock = threading.Lock()
        self._connection: sqlite3.Connection | None = None

    @property
    def _db(self) -> sqlite3.Connection:
        """The open connection (the lock is held)."""
        if self._connection is None:
            self._connection = open_store(self.db_path, CONSOLIDATION)
        return self._connection

    def seen(self, a_id: str, b_id: str, similarity: float, now: dt.datetime) -> bool:
        """Whether this pair, at this similarity, was judged less than ``recheck_days`` ago."""
        since = now.timestamp() - self.recheck_days * _DAY
        with self._lock:
            row = self._db.execute(
                "SELECT 1 FROM pair_fingerprints WHERE first_id = ? AND second_id = ?"
                " AND similarity = ? AND judged_at > ?",
                (*_key(a_id, b_id, similarity), since),
            ).fetchone()
        return row is not None

    def judged_at(self, a_id: str, b_id: str, similarity: float) -> float | None:
        """When this pair, at this similarity, was last judged (unix seconds; None: never, or
        forgotten)."""
        with self._lock:
            row = self._db.execute(
                "SELECT MAX(judged_at) AS judged_at FROM pair_fingerprints WHERE first_id = ?"
                " AND second_id = ? AND similarity = ?",
                _key(a_id, b_id, similarity),
            ).fetchone()
        return None if row is None or row["judged_at"] is None else float(row["judged_at"])

    def record(self, a_id: str, b_id: str, similarity: float, now: dt.datetime) -> None:
        """Remember that this pair was judged at ``now`` (and forget the expired ones)."""
        at = now.timestamp()
        with self._lock, transaction(self._db) as db:
            db.execute(
                "INSERT OR REPLACE INTO pair_fingerprints VALUES (?, ?, ?, ?)",
                (*_key(a_id, b_id, similarity), at),
            )
            db.execute(
                "DELETE FROM pair_fingerprints WHERE judged_at <= ?",
                (at - max(self.recheck_days, FORGET_DAYS) * _DAY,),
            )

    def close(self) -> None:
        """Close the database (the next use opens it again)."""
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None
