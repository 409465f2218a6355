"""The appservice's shared inbox (several processes in appservice mode), on both databases: two
:class:`Ledger` objects on one database are two processes. Each event is appended once however
often (and wherever) its transaction arrives, a reader never skips one that commits late, and
each account reads on from its own saved position when another process takes it over."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from mindroom.adapters.matrix.inbox_tail import InboxTail
from mindroom.cluster.inbox import Inbox
from mindroom.errors import ClaimError
from mindroom.store.ledger import Ledger

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def ledgers(ledger_target: Path | str) -> AsyncIterator[tuple[Ledger, Ledger, Ledger]]:
    opened = [await Ledger.open(ledger_target) for _ in range(3)]
    yield opened[0], opened[1], opened[2]
    for ledger in opened:
        await ledger.close()


def event(n: int) -> dict[str, Any]:
    return {
        "type": "m.room.message",
        "room_id": "!r:hs",
        "event_id": f"$e{n}",
        "content": {"body": f"message {n}"},
    }


async def test_appends_from_two_processes_are_read_once_each_in_order_and_none_is_skipped(
    ledgers: tuple[Ledger, Ledger, Ledger],
) -> None:
    a, b, reader = (ledger.inbox() for ledger in ledgers)
    # each transaction is sent to both processes (a lost answer, then a retry elsewhere)
    batches = [[event(n) for n in range(i * 5, i * 5 + 5)] for i in range(30)]
    done = asyncio.Event()
    seen: list[tuple[int, str]] = []

    async def read() -> None:
        position = 0
        while True:
            finished = done.is_set()  # read once more after the last append committed
            for seq, found in await reader.since(position, 50):
                assert seq > position  # in order: nothing appears behind what was read
                seen.append((seq, found["event_id"]))
                position = seq
            if finished:
                return
            await asyncio.sleep(0)

    async def append(inbox: Inbox, order: Iterable[list[dict[str, Any]]]) -> None:
        for batch in order:
            await inbox.append(batch)

    reading = asyncio.create_task(read())
    await asyncio.gather(append(a, batches), append(b, reversed(batches)))
    done.set()
    await reading

    ids = [event_id for _, event_id in seen]
    assert sorted(ids) == sorted(f"$e{n}" for n in range(150))  # every one, once
    assert await reader.head() >= max(seq for seq, _ in seen)
    # an event without an ID (malformed, but kept for the accounts to skip) is still appended
    head = await a.append([{"type": "m.room.message", "room_id": "!r:hs"}] * 2)
    assert [seq for seq, _ in await reader.since(head - 2, 10)] == [head - 1, head]


async def test_positions_are_kept_per_account_and_old_events_are_forgotten(
    ledgers: tuple[Ledger, Ledger, Ledger],
) -> None:
    inbox, other = ledgers[0].inbox(), ledgers[1].inbox()
    assert await inbox.position("@a:hs") is None
    await inbox.append([event(1)], now=1000.0)
    await inbox.append([event(2)], now=5000.0)
    await inbox.save_positions({"@a:hs": 1, "@b:hs": 2})
    await inbox.save_positions({"@a:hs": 2})
    assert (await other.position("@a:hs"), await other.position("@b:hs")) == (2, 2)
    assert await other.prune(older_than=2000.0) == 1
    assert [found["event_id"] for _, found in await inbox.since(0, 10)] == ["$e2"]
    assert await inbox.head() == 2  # numbering goes on after a prune


@dataclass(eq=False)
class Account:
    user_id: str
    got: list[str] = field(default_factory=list)
    runs: bool = True  # whether its process still holds its lease


@dataclass
class Feed:
    """The tail's view of a process's accounts: those it runs, and what each was handed (a
    claim of ``fail_once`` fails the first time, as when the database blinked; handing
    ``lease_leaves`` to an account ends its lease in this process as it is handled)."""

    running: list[Account]
    fail_once: set[tuple[str, str]] = field(default_factory=set)
    lease_leaves: set[tuple[str, str]] = field(default_factory=set)

    def accounts(self) -> list[Account]:
        return list(self.running)

    async def deliver(self, events: list[dict[str, Any]], accounts: list[Account]) -> None:
        for found, account in itertools.product(events, accounts):
            key = (account.user_id, found["event_id"])
            if key in self.fail_once:
                self.fail_once.discard(key)
                raise ClaimError("the ledger did not answer")
            if key in self.lease_leaves:
                account.runs = False  # it defers the message: nothing claimed, nothing got
                continue
            account.got.append(found["event_id"])


@pytest.fixture(autouse=True)
def at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Positions saved at every step, a failed delivery tried again at the next."""
    monkeypatch.setattr("mindroom.adapters.matrix.inbox_tail.SAVE_S", 0.0)
    monkeypatch.setattr("mindroom.adapters.matrix.inbox_tail._RETRY_S", (0.0, 0.0))


async def tail(ledger: Ledger, feed: Feed) -> InboxTail:
    """A process's tail, its accounts begun (as before their first sync)."""
    reader = InboxTail(ledger.inbox())
    reader.feed = feed  # type: ignore[assignment]
    reader.keeps = lambda account: account.runs  # type: ignore[attr-defined]
    for account in feed.running:
        await reader.begin(account.user_id)
    return reader


async def test_each_process_hands_its_own_accounts_every_event_once_and_a_moved_account_reads_on(
    ledgers: tuple[Ledger, Ledger, Ledger],
) -> None:
    alpha, router, beta = Account("@alpha:hs"), Account("@router:hs"), Account("@beta:hs")
    one = Feed([router, alpha], fail_once={("@alpha:hs", "$e2")})
    two = Feed([beta])
    tail_one, tail_two = await tail(ledgers[0], one), await tail(ledgers[1], two)

    await tail_two.receive([event(1), event(2), event(3)])  # the homeserver reached two
    await tail_two.step()
    await tail_one.step()  # alpha's claim of $e2 failed: it waits there, the router goes on
    assert alpha.got == ["$e1"]
    assert router.got == ["$e1", "$e2", "$e3"]
    await tail_one.step()  # ...and $e2 comes again
    assert alpha.got == beta.got == router.got == ["$e1", "$e2", "$e3"]

    # two dies after handing beta $e3; its lease moves to one, which reads on from there
    await tail_one.receive([event(4), event(3)])  # $e3 again: a resend appends nothing
    two.running.clear()
    one.running.append(beta)
    await tail_one.step()
    assert beta.got == ["$e1", "$e2", "$e3", "$e4"]
    assert alpha.got == router.got == beta.got
    seq_of = {e["event_id"]: seq for seq, e in await ledgers[2].inbox().since(0, 10)}
    assert await ledgers[2].inbox().position("@beta:hs") == seq_of["$e4"]  # saved for the next


async def test_an_account_begun_before_its_first_sync_gets_what_arrived_until_it_runs(
    ledgers: tuple[Ledger, Ledger, Ledger],
) -> None:
    router = Account("@router:hs")
    one = Feed([router])
    reader = await tail(ledgers[0], one)
    await reader.receive([event(1)])
    await reader.step()
    # a new agent starts: its position is taken, then its first sync runs while the
    # homeserver sends more (to this or another process), then it runs
    await reader.begin("@gamma:hs")
    await ledgers[1].inbox().append([event(2)])
    await reader.step()
    gamma = Account("@gamma:hs")
    one.running.append(gamma)
    await reader.step()
    assert gamma.got == ["$e2"]  # not the history before it, not nothing
    assert router.got == ["$e1", "$e2"]


async def test_an_event_handed_as_the_lease_leaves_is_read_again_by_the_next_holder(
    ledgers: tuple[Ledger, Ledger, Ledger],
) -> None:
    beta_here, beta_there = Account("@beta:hs"), Account("@beta:hs")
    one = Feed([beta_here], lease_leaves={("@beta:hs", "$e2")})
    reader = await tail(ledgers[0], one)
    await reader.receive([event(1), event(2), event(3)])
    await reader.step()
    assert beta_here.got == ["$e1"]  # $e2 came as its lease left: deferred, and no more
    assert await ledgers[2].inbox().position("@beta:hs") == 1  # saved up to what it had

    one.running.clear()  # stopped here; the process it is handed back to reads on
    two = Feed([beta_there])
    other = await tail(ledgers[1], two)
    await other.step()
    assert beta_there.got == ["$e2", "$e3"]
