"""A mem0 scope's own small state: which writes were already done, and which ids it held.

``op_key`` makes a write idempotent: a tool call repeated after a crash or a resumed turn
returns the first call's answer and writes nothing. A delete is recorded *before* it happens
(``done`` false) and marked done after, so a repeat after a crash in between finishes it
instead of answering "no such memory". An add cannot be recorded first (mem0 picks the id), so
it carries its ``op_key`` in the memory's own metadata, where a repeat finds it.

The ids a scope ever held are kept too: mem0's history has no scope column, so this is how
the history of a deleted memory is shown only to its own scope.

SQLite in the scope's state folder (WAL, a busy timeout), connected per call: a thousand
people's private scopes hold no descriptors between their writes. Control state: losing it
loses only the idempotency of writes already answered and the history of deleted ids.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

from mindroom.store.migrations import open_store, transaction
from mindroom.store.schemas import MEM0_OPS


@dataclass(frozen=True)
class DoneOp:
    """What an earlier call with an ``op_key`` did (``done`` false: it may not have finished)."""

    op: str
    entry_id: str
    text: str
    done: bool


class OpLog:
    """The op keys and ids of one mem0 scope."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        with closing(open_store(self.path, MEM0_OPS, timeout=10)) as db, transaction(db):
            yield db  # one transaction, committed on leaving

    def get(self, op_key: str) -> DoneOp | None:
        """The earlier call with ``op_key`` (None: none)."""
        with self._db() as db:
            row = db.execute(
                "SELECT op, entry_id, text, done FROM ops WHERE op_key = ?", (op_key,)
            ).fetchone()
        if row is None:
            return None
        return DoneOp(row["op"], row["entry_id"], row["text"], bool(row["done"]))

    def record(self, op_key: str, op: str, entry_id: str, text: str, *, done: bool) -> None:
        """Write (or overwrite) what the call with ``op_key`` does."""
        with self._db() as db:
            db.execute(
                "INSERT OR REPLACE INTO ops VALUES (?, ?, ?, ?, ?)",
                (op_key, op, entry_id, text, int(done)),
            )

    def remember(self, entry_ids: list[str]) -> None:
        """Note that this scope holds ``entry_ids``."""
        if entry_ids:
            with self._db() as db:
                db.executemany(
                    "INSERT OR IGNORE INTO ids VALUES (?, (SELECT COUNT(*) FROM ids))",
                    [(i,) for i in entry_ids],
                )

    def ids(self) -> list[str]:
        """Every id this scope ever held, oldest first."""
        with self._db() as db:
            rows = db.execute("SELECT entry_id FROM ids ORDER BY seq").fetchall()
        return [row["entry_id"] for row in rows]
