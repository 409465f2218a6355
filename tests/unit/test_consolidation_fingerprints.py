"""Pair fingerprints: a judged pair is not asked again for ``recheck_days``."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

from mindroom.memory.jobs.consolidate.fingerprints import FORGET_DAYS, Fingerprints
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords

NOW = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC)
DAY = dt.timedelta(days=1)


def test_a_recorded_pair_is_seen_until_recheck_days_have_passed(tmp_path: Path) -> None:
    prints = Fingerprints(tmp_path / "consolidation.db", recheck_days=14)
    assert not prints.seen("m-00000001", "m-00000002", 0.81, NOW)  # the control

    prints.record("m-00000001", "m-00000002", 0.81, NOW)

    assert prints.seen("m-00000001", "m-00000002", 0.81, NOW + 13 * DAY)
    assert not prints.seen("m-00000001", "m-00000002", 0.81, NOW + 14 * DAY)


def test_the_fingerprint_is_the_sorted_ids_and_the_rounded_similarity(tmp_path: Path) -> None:
    prints = Fingerprints(tmp_path / "consolidation.db", recheck_days=14)
    prints.record("m-00000002", "m-00000001", 0.8149, NOW)

    assert prints.seen("m-00000001", "m-00000002", 0.811, NOW)
    assert not prints.seen("m-00000001", "m-00000002", 0.79, NOW)  # the entries changed
    assert not prints.seen("m-00000001", "m-00000003", 0.81, NOW)


def test_recording_again_restarts_the_period(tmp_path: Path) -> None:
    prints = Fingerprints(tmp_path / "consolidation.db", recheck_days=14)
    prints.record("m-00000001", "m-00000002", 0.8, NOW)
    prints.record("m-00000001", "m-00000002", 0.8, NOW + 10 * DAY)

    assert prints.seen("m-00000001", "m-00000002", 0.8, NOW + 20 * DAY)


def test_fingerprints_survive_a_restart_beside_other_tables(tmp_path: Path) -> None:
    path = tmp_path / "state" / "consolidation.db"
    records = ConsolidationRecords(path)  # the pass keeps its own tables in the same file
    conflict = records.record("conflict", "m-1", "m-2", "they disagree", {})
    assert conflict is not None
    records.close()

    first = Fingerprints(path, recheck_days=14)
    first.record("m-00000001", "m-00000002", 0.9, NOW)
    first.close()

    assert Fingerprints(path, recheck_days=14).seen("m-00000001", "m-00000002", 0.9, NOW + DAY)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT id FROM memory_conflicts").fetchall() == [(conflict.id,)]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.close()


def test_an_expired_fingerprint_still_says_the_pair_was_asked_until_it_is_forgotten(
    tmp_path: Path,
) -> None:
    path = tmp_path / "consolidation.db"
    prints = Fingerprints(path, recheck_days=14)
    prints.record("m-00000001", "m-00000002", 0.9, NOW)
    prints.record("m-00000003", "m-00000004", 0.9, NOW + 20 * DAY)

    assert not prints.seen("m-00000001", "m-00000002", 0.9, NOW + 20 * DAY)  # expired...
    assert prints.judged_at("m-00000001", "m-00000002", 0.9) == NOW.timestamp()  # ...known
    assert prints.judged_at("m-00000001", "m-00000005", 0.9) is None

    prints.record("m-00000003", "m-00000004", 0.9, NOW + (FORGET_DAYS + 1) * DAY)
    assert prints.judged_at("m-00000001", "m-00000002", 0.9) is None  # forgotten, pruned
    with sqlite3.connect(path) as db:
        count = db.execute("SELECT COUNT(*) FROM pair_fingerprints").fetchone()
    db.close()
    assert count == (1,)


def test_a_recheck_period_of_zero_asks_every_time(tmp_path: Path) -> None:
    prints = Fingerprints(tmp_path / "consolidation.db", recheck_days=0)
    prints.record("m-00000001", "m-00000002", 0.9, NOW)

    assert not prints.seen("m-00000001", "m-00000002", 0.9, NOW)
