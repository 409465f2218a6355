"""Leases and hand-overs on both databases: two :class:`Leases` on one database
are two processes sharing it. Every lease and every row has one holder however they
interleave, and what a dead process held moves only once its lease expired."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from mindroom.cluster.leases import Leases, Orphan, handover_key
from mindroom.store.ledger import Ledger

pytestmark = pytest.mark.asyncio

TTL = 30.0


@pytest_asyncio.fixture
async def ledgers(ledger_target: Path | str) -> AsyncIterator[tuple[Ledger, Ledger]]:
    first, second = await Ledger.open(ledger_target), await Ledger.open(ledger_target)
    yield first, second
    await first.close()
    await second.close()


@pytest.fixture
def two(ledgers: tuple[Ledger, Ledger]) -> tuple[Leases, Leases]:
    return ledgers[0].leases("process-a"), ledgers[1].leases("process-b")


async def test_a_lease_has_one_holder_until_it_expires(two: tuple[Leases, Leases]) -> None:
    a, b = two
    names = [f"agent{i}" for i in range(20)]
    won_a, won_b = await asyncio.gather(
        asyncio.gather(*(a.acquire(n, TTL, now=100.0) for n in names)),
        asyncio.gather(*(b.acquire(n, TTL, now=100.0) for n in names)),
    )
    for name, got_a, got_b in zip(names, won_a, won_b, strict=True):
        assert got_a != got_b, name  # exactly one of the two
    held_by_a = {n for n, got in zip(names, won_a, strict=True) if got}
    holders = await b.holders()
    assert {n for n, lease in holders.items() if lease.owner == "process-a"} == held_by_a

    name = sorted(held_by_a or set(names))[0]
    owner, other = (a, b) if name in held_by_a else (b, a)
    assert await owner.acquire(name, TTL, now=110.0)  # keeping it is taking it again
    assert not await other.acquire(name, TTL, now=139.0)  # not yet expired (110 + 30)
    assert await owner.renew({name}, TTL, now=139.0) == {name}
    assert not await other.acquire(name, TTL, now=160.0)  # renewed to 169
    assert await other.acquire(name, TTL, now=170.0)  # the holder went silent: it moves
    assert await owner.renew({name}, TTL, now=171.0) == set()  # and the old holder is told
    assert (await a.holders())[name].owner == other.owner


async def test_release_and_leave_let_another_process_take_at_once(
    two: tuple[Leases, Leases],
) -> None:
    a, b = two
    assert await a.acquire("x", TTL, now=100.0)
    assert await a.acquire("y", TTL, now=100.0)
    assert not await b.acquire("x", TTL, now=101.0)  # the control: held
    await a.release({"x"})
    assert await b.acquire("x", TTL, now=101.0)

    await a.heartbeat(("y",), "host", 1, now=100.0)
    await b.heartbeat((), "host", 2, now=100.0)
    assert [p.owner for p in await b.processes(seen_after=90.0)] == ["process-a", "process-b"]
    assert (await b.processes(seen_after=90.0))[0].pins == ("y",)
    await a.leave()
    assert [p.owner for p in await b.processes(seen_after=90.0)] == ["process-b"]
    assert await b.acquire("y", TTL, now=102.0)  # left: no need to wait for expiry


async def test_orphans_are_taken_once_and_only_by_the_holder_of_their_account(
    ledgers: tuple[Ledger, Ledger], two: tuple[Leases, Leases]
) -> None:
    a, b = two
    source = {"event_id": "$m", "type": "m.room.message"}
    assert await ledgers[0].claim("$m", "!r", (), source, lead="alice", owner=a.owner)
    assert await ledgers[0].claim("$old", "!r", (), source)  # from before leases: no account
    assert await a.hand_over("$m", "!r", "bob", {**source, "k": 1})
    assert not await a.hand_over("$m", "!r", "bob", source)  # once

    # A is alive and answering its own claim: B, running bob, sees only the hand-over.
    assert await a.orphans({"alice"}, newer_than=0) == []  # its own work is not an orphan
    orphans = await b.orphans({"bob"}, newer_than=0)
    assert orphans == [Orphan(handover_key("$m", "bob"), "queued", None, "bob")]
    both = await asyncio.gather(a.take(orphans[0]), b.take(orphans[0]))
    assert sum(taken is not None for taken in both) == 1
    taken = both[0] or both[1]
    assert taken == ("!r", ("bob",), {**source, "k": 1})

    # A died: B took alice's lease. Its claim, and the one that names no account (the
    # router's), are B's to take.
    seen = await b.orphans({"alice", "router"}, newer_than=0)
    assert sorted(o.key for o in seen) == ["$m", "$old"]
    assert all(await asyncio.gather(*(b.take(o) for o in seen)))
    assert await b.orphans({"alice", "router"}, newer_than=0) == []
    stale = Orphan("$m", "claimed", a.owner)
    assert await a.take(stale) is None  # taken already: A coming back cannot take it again

    await ledgers[1].finish("$m")
    assert await a.orphans({"alice"}, newer_than=0) == []  # finished rows are nobody's


async def test_account_users_are_shared(two: tuple[Leases, Leases]) -> None:
    a, b = two
    await a.note_account("alice", "@mindroom_alice:hs")
    await b.note_account("alice", "@mindroom_alice:hs")
    await b.note_account("bob", "@mindroom_bob:hs")
    assert await a.accounts() == {"alice": "@mindroom_alice:hs", "bob": "@mindroom_bob:hs"}


async def test_the_schema_upgrade_adds_columns_to_an_old_ledger(tmp_path: Path) -> None:
    """A ledger written before leases (version 1) keeps its rows and gains the columns."""
    from mindroom.store.database import Database
    from mindroom.store.ledger_schema import MIGRATIONS

    path = tmp_path / "ledger.db"
    old = await Database.open(path, MIGRATIONS[:1])
    await old.execute(
        "INSERT INTO handled (event_id, room_id, responders, source, status, claimed_at)"
        " VALUES ('$e', '!r', '[]', '{}', 'claimed', 1.0)"
    )
    await old.commit()
    await old.close()
    ledger = await Ledger.open(path)
    try:
        assert [p.event_id for p in await ledger.pending(newer_than=0)] == ["$e"]
        orphans = await ledger.leases("p").orphans({"router"}, newer_than=0)
        assert [o.key for o in orphans] == ["$e"]
    finally:
        await ledger.close()


async def test_the_parts_of_a_reply_handed_over_outlive_its_message(
    ledgers: tuple[Ledger, Ledger], two: tuple[Leases, Leases]
) -> None:
    """A hand-over's answer was being posted when its process died: its parts are kept for
    the next holder (to edit, not post again) though the message's own row is done."""
    ledger, (a, _) = ledgers[0], two
    assert await ledger.claim("$m", "!r", (), {}, lead="alice", owner=a.owner)
    assert await a.hand_over("$m", "!r", "bob", {})
    await ledger.begin_reply_part("$m", "alice", 0)
    await ledger.record_reply_part("$m", "alice", 0, "$alice-part")
    await ledger.begin_reply_part("$m", "bob", 0)
    await ledger.record_reply_part("$m", "bob", 0, "$bob-part")
    await ledger.finish("$m")  # alice answered, and the message was handed on

    await ledger.forget_finished_reply_parts()
    assert await ledger.reply_parts("$m", "alice") == {}  # done: forgotten
    assert await ledger.reply_parts("$m", "bob") == {0: "$bob-part"}  # still bob's to finish
    await ledger.finish(handover_key("$m", "bob"))
    await ledger.forget_finished_reply_parts()
    assert await ledger.reply_parts("$m", "bob") == {}
