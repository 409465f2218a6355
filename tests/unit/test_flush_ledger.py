"""The flush table of the ledger: atomic claims, marks that never undo progress, curation caps.

Real SQLite files; two ``Ledger`` connections stand for two processes (the bot and the CLI).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest
import pytest_asyncio

from mindroom.memory.flush.state import FlushClaim, FlushEntry, mark_dirty
from mindroom.store.ledger import Ledger

pytestmark = pytest.mark.asyncio

ENTRY = FlushEntry("general", "s1", "@alice:localhost", ("general", "mind"))


def claim(claim_id: str, pid: int = 1) -> FlushClaim:
    return FlushClaim(claim_id, pid, "boot", 100.0)


@pytest_asyncio.fixture
async def ledgers(tmp_path: Path) -> AsyncIterator[tuple[Ledger, Ledger]]:
    bot = await Ledger.open(tmp_path / "ledger.db")
    cli = await Ledger.open(tmp_path / "ledger.db")
    yield bot, cli
    await bot.close()
    await cli.close()


async def test_marking_dirty_stores_what_the_pure_mark_dirty_computes(
    ledgers: tuple[Ledger, Ledger],
) -> None:
    bot, _ = ledgers
    expected = ENTRY
    for now in (10.0, 20.0, 30.0):
        await bot.flush.mark_dirty(ENTRY, now)
        expected = mark_dirty(expected, now)

    assert await bot.flush.entry(ENTRY.key) == expected
    assert (expected.dirty_revision, expected.first_dirty_at, expected.last_seen_at) == (3, 10, 30)


async def test_only_one_of_two_connections_claims_a_dirty_session(
    ledgers: tuple[Ledger, Ledger],
) -> None:
    bot, cli = ledgers
    await bot.flush.mark_dirty(ENTRY, 10.0)

    won = await bot.flush.claim(ENTRY.key, claim("a"))
    lost = await cli.flush.claim(ENTRY.key, claim("b"))

    assert won is not None
    assert won.in_flight
    assert lost is None
    assert [(key, c.claim_id) for key, c in await cli.flush.claims()] == [(ENTRY.key, "a")]


async def test_a_clean_session_cannot_be_claimed(ledgers: tuple[Ledger, Ledger]) -> None:
    bot, _ = ledgers
    await bot.flush.mark_dirty(ENTRY, 10.0)
    claimed = await bot.flush.claim(ENTRY.key, claim("a"))
    assert claimed is not None
    await bot.flush.finish(claimed, "a", cursor=4, more=False, updated_at=11.0)

    assert await bot.flush.claim(ENTRY.key, claim("b")) is None
    done = await bot.flush.entry(ENTRY.key)
    assert done is not None
    assert (done.dirty, done.in_flight, done.cursor) == (False, False, 4)


async def test_a_turn_finishing_during_a_flush_keeps_the_session_dirty(
    ledgers: tuple[Ledger, Ledger],
) -> None:
    bot, cli = ledgers
    await bot.flush.mark_dirty(ENTRY, 10.0)
    claimed = await cli.flush.claim(ENTRY.key, claim("a"))
    assert claimed is not None

    await bot.flush.mark_dirty(ENTRY, 12.0)  # the bot marks it while the CLI extracts
    done = await cli.flush.finish(claimed, "a", cursor=2, more=False, updated_at=11.0)

    assert done is not None
    assert (done.dirty, done.cursor, done.dirty_revision) == (True, 2, 2)


async def test_a_lost_claim_neither_finishes_nor_backs_off(ledgers: tuple[Ledger, Ledger]) -> None:
    bot, cli = ledgers
    await bot.flush.mark_dirty(ENTRY, 10.0)
    stale = await bot.flush.claim(ENTRY.key, claim("old"))
    assert stale is not None
    assert await cli.flush.clear_claim(ENTRY.key, "old")  # its owner was found dead
    fresh = await cli.flush.claim(ENTRY.key, claim("new"))
    assert fresh is not None

    assert await bot.flush.finish(stale, "old", cursor=9, more=False, updated_at=1.0) is None
    assert not await bot.flush.back_off(replace(stale, failures=5), "old")
    done = await cli.flush.finish(fresh, "new", cursor=2, more=False, updated_at=1.0)
    assert done is not None
    assert (done.cursor, done.failures) == (2, 0)


async def test_importing_the_old_file_keeps_rows_already_in_the_table_and_drops_in_flight(
    ledgers: tuple[Ledger, Ledger],
) -> None:
    bot, _ = ledgers
    await bot.flush.mark_dirty(ENTRY, 10.0)
    other = FlushEntry("general", "s2", dirty=True, cursor=6, in_flight=True, failures=1)

    added = await bot.flush.import_state(
        [replace(ENTRY, cursor=99), other], {"scope|2026-01-01": 1}
    )

    assert added == 1
    assert (await bot.flush.entry(ENTRY.key)).cursor == 0  # type: ignore[union-attr]
    assert await bot.flush.entry(other.key) == replace(other, in_flight=False)


async def test_curation_passes_are_capped_per_scope_and_day_across_connections(
    ledgers: tuple[Ledger, Ledger],
) -> None:
    bot, cli = ledgers

    taken = [await led.curation.take_pass("general", "2026-11-22", 2) for led in (bot, cli, bot)]

    assert taken == [True, True, False]
    assert await bot.curation.take_pass("coder", "2026-11-22", 2)  # another scope
    assert await bot.curation.take_pass("general", "2026-11-23", 2)  # the next day
    assert not await bot.curation.take_pass("general", "2026-11-23", 0)


async def test_forgetting_spares_an_entry_marked_since_it_was_read(
    ledgers: tuple[Ledger, Ledger],
) -> None:
    bot, cli = ledgers
    await bot.flush.mark_dirty(ENTRY, 10.0)
    claimed = await bot.flush.claim(ENTRY.key, claim("a"))
    assert claimed is not None
    read = await bot.flush.finish(claimed, "a", cursor=2, more=False, updated_at=1.0)
    assert read is not None

    await cli.flush.mark_dirty(ENTRY, 20.0)  # a turn after the stale check read it
    assert await bot.flush.forget([read]) == 0
    assert await bot.flush.entry(ENTRY.key) is not None

    other = FlushEntry("general", "s9")
    await bot.flush.import_state([other], {})
    assert await bot.flush.forget([other]) == 1  # positive control: a clean, unmarked one goes
    assert await bot.flush.entry(other.key) is None
