"""Unit tests for the ledger: exactly-once claims, pending replies, sync tokens, sessions.

Each test uses a real SQLite file under ``tmp_path``; the ledger's clock is replaced by a fake
one so claim times are exact and the tests never sleep.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import pytest_asyncio

import mindroom.store.ledger_tables
from mindroom.store.ledger import Ledger, PendingEvent

ROOM = "!lobby:localhost"
OTHER_ROOM = "!dev:localhost"


class Clock:
    """A settable stand-in for the ``time`` module as the ledger uses it."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def time(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(mindroom.store.ledger_tables, "time", SimpleNamespace(time=fake.time))
    return fake


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "ledger.db"


@pytest_asyncio.fixture
async def ledger(db_path: Path, clock: Clock) -> AsyncIterator[Ledger]:
    opened = await Ledger.open(db_path)
    try:
        yield opened
    finally:
        await opened.close()


def source(event_id: str, body: str = "hi") -> dict[str, object]:
    return {"event_id": event_id, "type": "m.room.message", "content": {"body": body}}


# -- claim ----------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_claim_succeeds_once_then_fails_for_the_same_event(ledger: Ledger) -> None:
    assert await ledger.claim("$a", ROOM, ("general",), source("$a"))
    assert not await ledger.claim("$a", ROOM, ("general",), source("$a"))
    assert not await ledger.claim("$a", OTHER_ROOM, ("coder",), source("$a", "other"))


@pytest.mark.asyncio
async def test_claims_of_different_events_are_independent(ledger: Ledger) -> None:
    assert await ledger.claim("$a", ROOM, (), source("$a"))
    assert await ledger.claim("$b", ROOM, (), source("$b"))


@pytest.mark.asyncio
async def test_is_handled_is_true_only_after_a_claim(ledger: Ledger) -> None:
    assert not await ledger.is_handled("$a")
    await ledger.claim("$a", ROOM, (), source("$a"))
    assert await ledger.is_handled("$a")
    assert not await ledger.is_handled("$b")


@pytest.mark.asyncio
async def test_claim_survives_closing_and_reopening_the_file(db_path: Path, clock: Clock) -> None:
    first = await Ledger.open(db_path)
    assert await first.claim("$a", ROOM, ("general",), source("$a"))
    await first.close()
    second = await Ledger.open(db_path)
    try:
        assert not await second.claim("$a", ROOM, ("general",), source("$a"))
        assert await second.is_handled("$a")
        assert await second.claim("$b", ROOM, ("general",), source("$b"))
    finally:
        await second.close()


@pytest.mark.asyncio
async def test_open_creates_missing_parent_folders(tmp_path: Path, clock: Clock) -> None:
    path = tmp_path / "deep" / "er" / "ledger.db"
    opened = await Ledger.open(path)
    await opened.close()
    assert path.is_file()


# -- finish and pending ---------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_pending_returns_claimed_unfinished_events_oldest_first(
    ledger: Ledger, clock: Clock
) -> None:
    clock.now = 100.0
    await ledger.claim("$old", ROOM, ("general",), source("$old", "first"))
    clock.now = 200.0
    await ledger.claim("$new", OTHER_ROOM, ("coder", "mind"), source("$new", "second"))
    assert await ledger.pending(0) == [
        PendingEvent("$old", ROOM, ("general",), source("$old", "first")),
        PendingEvent("$new", OTHER_ROOM, ("coder", "mind"), source("$new", "second")),
    ]


@pytest.mark.asyncio
async def test_pending_order_follows_claim_time_not_event_id(ledger: Ledger, clock: Clock) -> None:
    clock.now = 300.0
    await ledger.claim("$a", ROOM, (), source("$a"))
    clock.now = 100.0
    await ledger.claim("$z", ROOM, (), source("$z"))
    clock.now = 200.0
    await ledger.claim("$m", ROOM, (), source("$m"))
    assert [p.event_id for p in await ledger.pending(0)] == ["$z", "$m", "$a"]


@pytest.mark.asyncio
async def test_pending_returns_responders_as_a_tuple(ledger: Ledger) -> None:
    await ledger.claim("$a", ROOM, ("general", "coder"), source("$a"))
    (event,) = await ledger.pending(0)
    assert event.responders == ("general", "coder")
    assert isinstance(event.responders, tuple)


@pytest.mark.asyncio
@pytest.mark.parametrize("status", ["done", "skipped", "failed"])
async def test_finished_events_are_not_pending(ledger: Ledger, status: str) -> None:
    await ledger.claim("$a", ROOM, ("general",), source("$a"))
    await ledger.claim("$b", ROOM, ("general",), source("$b"))
    await ledger.finish("$a", status)
    assert [p.event_id for p in await ledger.pending(0)] == ["$b"]


@pytest.mark.asyncio
async def test_finished_event_stays_claimed(ledger: Ledger) -> None:
    await ledger.claim("$a", ROOM, (), source("$a"))
    await ledger.finish("$a")
    assert await ledger.is_handled("$a")
    assert not await ledger.claim("$a", ROOM, (), source("$a"))


@pytest.mark.asyncio
async def test_pending_survives_reopening_the_file(db_path: Path, clock: Clock) -> None:
    first = await Ledger.open(db_path)
    await first.claim("$a", ROOM, ("general",), source("$a"))
    await first.claim("$b", ROOM, ("general",), source("$b"))
    await first.finish("$b")
    await first.close()
    second = await Ledger.open(db_path)
    try:
        assert [p.event_id for p in await second.pending(0)] == ["$a"]
    finally:
        await second.close()


@pytest.mark.asyncio
async def test_pending_newer_than_filters_by_claim_time(ledger: Ledger, clock: Clock) -> None:
    for event_id, at in (("$a", 100.0), ("$b", 200.0), ("$c", 300.0)):
        clock.now = at
        await ledger.claim(event_id, ROOM, (), source(event_id))
    assert [p.event_id for p in await ledger.pending(150.0)] == ["$b", "$c"]
    assert [p.event_id for p in await ledger.pending(200.0)] == ["$b", "$c"]
    assert [p.event_id for p in await ledger.pending(300.5)] == []


@pytest.mark.asyncio
async def test_nothing_is_pending_in_a_new_ledger(ledger: Ledger) -> None:
    assert await ledger.pending(0) == []


# -- expire ---------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_expire_gives_up_on_old_claims_and_counts_them(ledger: Ledger, clock: Clock) -> None:
    for event_id, at in (("$a", 100.0), ("$b", 200.0), ("$c", 300.0)):
        clock.now = at
        await ledger.claim(event_id, ROOM, (), source(event_id))
    clock.now = 400.0
    assert await ledger.expire(250.0) == 2
    assert [p.event_id for p in await ledger.pending(0)] == ["$c"]


@pytest.mark.asyncio
async def test_expire_does_not_count_finished_or_already_expired_events(
    ledger: Ledger, clock: Clock
) -> None:
    clock.now = 100.0
    await ledger.claim("$done", ROOM, (), source("$done"))
    await ledger.claim("$open", ROOM, (), source("$open"))
    await ledger.finish("$done")
    clock.now = 500.0
    assert await ledger.expire(200.0) == 1
    assert await ledger.expire(200.0) == 0


@pytest.mark.asyncio
async def test_expired_event_stays_claimed(ledger: Ledger, clock: Clock) -> None:
    clock.now = 100.0
    await ledger.claim("$a", ROOM, (), source("$a"))
    await ledger.expire(200.0)
    assert not await ledger.claim("$a", ROOM, (), source("$a"))


@pytest.mark.asyncio
async def test_expire_with_nothing_old_returns_zero(ledger: Ledger, clock: Clock) -> None:
    clock.now = 300.0
    await ledger.claim("$a", ROOM, (), source("$a"))
    assert await ledger.expire(300.0) == 0
    assert len(await ledger.pending(0)) == 1


# -- sync tokens ----------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_sync_token_of_an_unknown_account_is_none(ledger: Ledger) -> None:
    assert await ledger.sync_token("@mindroom_general:localhost") is None


@pytest.mark.asyncio
async def test_sync_token_is_saved_overwritten_and_read_back(ledger: Ledger) -> None:
    await ledger.save_sync_token("general", "s1")
    assert await ledger.sync_token("general") == "s1"
    await ledger.save_sync_token("general", "s2")
    assert await ledger.sync_token("general") == "s2"


@pytest.mark.asyncio
async def test_sync_tokens_are_kept_per_account(ledger: Ledger) -> None:
    await ledger.save_sync_token("general", "g1")
    await ledger.save_sync_token("router", "r1")
    await ledger.save_sync_token("general", "g2")
    assert await ledger.sync_token("general") == "g2"
    assert await ledger.sync_token("router") == "r1"
    assert await ledger.sync_token("coder") is None


@pytest.mark.asyncio
async def test_sync_token_survives_reopening_the_file(db_path: Path, clock: Clock) -> None:
    first = await Ledger.open(db_path)
    await first.save_sync_token("general", "s_42")
    await first.close()
    second = await Ledger.open(db_path)
    try:
        assert await second.sync_token("general") == "s_42"
    finally:
        await second.close()


# -- session generations --------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_session_generation_starts_at_zero(ledger: Ledger) -> None:
    assert await ledger.session_generation(ROOM, None) == 0
    assert await ledger.session_generation(ROOM, "$thread") == 0


@pytest.mark.asyncio
async def test_new_session_increments_and_returns_the_generation(ledger: Ledger) -> None:
    assert await ledger.new_session(ROOM, "$thread") == 1
    assert await ledger.new_session(ROOM, "$thread") == 2
    assert await ledger.session_generation(ROOM, "$thread") == 2


@pytest.mark.asyncio
async def test_new_session_is_per_room_and_thread(ledger: Ledger) -> None:
    await ledger.new_session(ROOM, None)
    await ledger.new_session(ROOM, "$t1")
    await ledger.new_session(ROOM, "$t1")
    await ledger.new_session(OTHER_ROOM, "$t1")
    assert await ledger.session_generation(ROOM, None) == 1
    assert await ledger.session_generation(ROOM, "$t1") == 2
    assert await ledger.session_generation(ROOM, "$t2") == 0
    assert await ledger.session_generation(OTHER_ROOM, "$t1") == 1
    assert await ledger.session_generation(OTHER_ROOM, None) == 0


@pytest.mark.asyncio
async def test_session_generation_survives_reopening_the_file(db_path: Path, clock: Clock) -> None:
    first = await Ledger.open(db_path)
    await first.new_session(ROOM, "$t")
    await first.close()
    second = await Ledger.open(db_path)
    try:
        assert await second.session_generation(ROOM, "$t") == 1
        assert await second.new_session(ROOM, "$t") == 2
    finally:
        await second.close()


# -- the file -------------------------------------------------------------------------------------


@pytest.mark.asyncio
async def test_database_uses_write_ahead_logging(ledger: Ledger, db_path: Path) -> None:
    await ledger.claim("$a", ROOM, (), source("$a"))
    connection = sqlite3.connect(db_path)
    try:
        (mode,) = connection.execute("PRAGMA journal_mode").fetchone()
        (count,) = connection.execute("SELECT count(*) FROM handled").fetchone()
    finally:
        connection.close()
    assert mode == "wal"
    assert count == 1


# -- a write cancelled half-way (shutdown cancels the task that writes) ------------------------


def _write_lock_is_free(path: Path) -> bool:
    """Whether another connection can take the database's write lock at once."""
    other = sqlite3.connect(path, timeout=0.2)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.rollback()
        return True
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc):
            raise
        return False
    finally:
        other.close()


@pytest.mark.asyncio
async def test_a_write_cancelled_between_its_statement_and_its_commit_still_commits(
    db_path: Path, clock: Clock
) -> None:
    """A cancel landing between the statement and its commit left the connection holding the
    write lock, and the next writer on another connection (the flush's, a short-lived one)
    waited out the 30 s busy timeout: the shutdown stall."""
    import asyncio

    ledger = await Ledger.open(db_path)
    await ledger.claim("$e1", ROOM, ("general",), {})
    connection = ledger._db
    real_commit = connection.commit
    reached, gate = asyncio.Event(), asyncio.Event()

    async def commit_after_the_gate() -> None:
        reached.set()
        await gate.wait()
        await real_commit()

    connection.commit = commit_after_the_gate  # type: ignore[method-assign]
    task = asyncio.create_task(ledger.finish("$e1"))
    await reached.wait()  # the UPDATE ran; its commit is next
    assert not _write_lock_is_free(db_path)  # the control: a write in flight holds the lock
    task.cancel()
    gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    connection.commit = real_commit  # type: ignore[method-assign]

    for _ in range(200):  # the shielded commit finishes on the connection's thread
        if _write_lock_is_free(db_path):
            break
        await asyncio.sleep(0.01)
    assert _write_lock_is_free(db_path)
    await ledger.close()
    reopened = await Ledger.open(db_path)
    try:
        assert await reopened.pending(0) == []  # the finish was kept, not rolled back
    finally:
        await reopened.close()
