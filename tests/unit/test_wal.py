"""Several connections (processes, here threads with a connection each) switching one new
database to WAL at once all succeed: SQLite reports the concurrent switch as locked at once."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from mindroom.store.wal import use_wal


def test_many_connections_switching_a_new_database_to_wal_at_once_all_succeed(
    tmp_path: Path,
) -> None:
    for round_ in range(20):  # without the retry, about one round in four fails here
        path = tmp_path / f"new-{round_}.db"
        start = threading.Barrier(8)
        errors: list[BaseException] = []

        def open_it(
            path: Path = path, start: threading.Barrier = start, errors: list = errors
        ) -> None:
            db = sqlite3.connect(path, timeout=30)
            try:
                start.wait()
                use_wal(db)
                db.execute("CREATE TABLE IF NOT EXISTS t (x)")
            except BaseException as exc:  # noqa: BLE001 - reported below, with its kind
                errors.append(exc)
            finally:
                db.close()

        threads = [threading.Thread(target=open_it) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        with sqlite3.connect(path) as db:
            assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        db.close()


def test_an_error_other_than_a_lock_is_raised_at_once(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "x.db")
    db.close()
    with pytest.raises(sqlite3.ProgrammingError):
        use_wal(db)  # a closed connection: not a lock to wait out
