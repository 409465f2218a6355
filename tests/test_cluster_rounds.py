"""The lease rounds of :class:`mindroom.cluster.Cluster` (issue 19.3), two processes on one
PostgreSQL, the bot replaced by a recorder of what it is asked to start and stop: a pinned
account comes home once it is idle, a silent process loses its accounts to the other and stops
them when it wakes, and an account the config drops is stopped and its lease freed."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import pytest_asyncio

from mindroom.cluster import Cluster
from mindroom.config.load import parse_config
from mindroom.config.schema import Config
from mindroom.leases import Leases
from mindroom.ledger import Ledger
from mindroom.metrics import METRICS
from tests.harness import config_text
from tests.postgres import PostgresServer

pytestmark = pytest.mark.asyncio


def config_with(*agents: str) -> Config:
    text = config_text("http://127.0.0.1:1/v1", {a: {} for a in agents},
                       storage={"database": "postgresql://x/y", "failover_seconds": 3})  # fmt: skip
    return parse_config(text, "test")


@dataclass
class Recorder:
    """What the bot was asked to do, in order; ``busy`` accounts have answers running."""

    calls: list[tuple[str, str]] = field(default_factory=list)
    busy_names: set[str] = field(default_factory=set)
    taken: list[str] = field(default_factory=list)

    async def start_account(self, name: str) -> None:
        self.calls.append(("start", name))

    async def stop_account(self, name: str) -> None:
        self.calls.append(("stop", name))

    async def remove_member(self, name: str) -> None:
        self.calls.append(("remove", name))

    def busy(self, name: str) -> bool:
        return name in self.busy_names

    def take_over(self, key: str, room_id: str, responders: tuple[str, ...],
                  source: dict[str, Any]) -> None:  # fmt: skip
        self.taken.append(key)


@pytest_asyncio.fixture
async def ledger(postgres: PostgresServer) -> AsyncIterator[Ledger]:
    opened = await Ledger.open(postgres.database())
    yield opened
    await opened.close()


async def test_rounds_bring_pinned_accounts_home_move_a_silent_processes_and_drop_removed(
    ledger: Ledger,
) -> None:
    config = config_with("alpha", "beta")
    current = {"config": config}
    one = Cluster(ledger.leases("one"), lambda: current["config"], ("alpha",))
    two = Cluster(ledger.leases("two"), lambda: current["config"], ("beta",))
    rec_one, rec_two = Recorder(), Recorder()

    assert await one.join() == {"router", "alpha", "beta"}  # alone: beta as a stand-by
    assert await two.join() == set()  # beta is run by one for now
    one.serve(rec_one)
    two.serve(rec_two)

    rec_one.busy_names.add("beta")  # an answer of beta runs in one: not handed back yet
    await one.round()
    assert "beta" in one.held
    assert rec_one.calls == []
    rec_one.busy_names.clear()
    await one.round()
    await two.round()
    assert rec_one.calls == [("stop", "beta")]
    assert rec_two.calls == [("start", "beta")]
    assert (one.held, two.held) == ({"router", "alpha"}, {"beta"})

    # one goes silent (a stalled machine): two takes its accounts once their leases lapse
    moved = METRICS.lease_moves.get("taken", 0)
    deadline = time.monotonic() + 15
    while two.held != {"router", "alpha", "beta"}:
        assert time.monotonic() < deadline, two.held
        await two.round()
        await asyncio.sleep(0.2)
    assert METRICS.lease_moves["taken"] == moved + 2
    assert ("start", "router") in rec_two.calls
    assert ("start", "alpha") in rec_two.calls
    await one.round()  # one wakes up: it stops what it lost, and takes nothing back
    assert sorted(rec_one.calls[1:]) == [("stop", "alpha"), ("stop", "router")]
    assert one.held == set()

    # alpha leaves the config: its holder stops it and frees the lease
    current["config"] = config_with("beta")
    await two.round()
    assert rec_two.calls[-1] == ("remove", "alpha")
    assert "alpha" not in await ledger.leases("probe").holders()

    await two.leave()  # a clean stop: one takes everything at its next round
    await one.round()
    assert one.held == {"router", "beta"}

    current["config"] = config_with("beta", "gamma")  # a reload adds an agent
    await one.round()
    assert one.held == {"router", "beta", "gamma"}
    assert rec_one.calls[-1] == ("start", "gamma")


async def test_work_queued_for_an_account_is_taken_by_its_holder_only(ledger: Ledger) -> None:
    current = config_with("alpha", "beta")
    one = Cluster(ledger.leases("one"), lambda: current, ("alpha",))
    two = Cluster(ledger.leases("two"), lambda: current, ("beta",))
    await one.join()
    await two.join()
    rec_one, rec_two = Recorder(), Recorder()
    one.serve(rec_one)
    two.serve(rec_two)
    await one.round()
    await two.round()
    leases: Leases = one.leases
    source = {"event_id": "$e", "type": "m.room.message", "origin_server_ts": time.time() * 1000}
    assert await leases.hand_over("$e", "!r", "beta", source)
    assert await one.take_work() == 0  # one runs alpha, not beta
    assert await two.take_work() == 1
    assert rec_two.taken == ["$e>beta"]
    assert await two.take_work() == 0  # taken once


async def test_a_stand_by_process_is_healthy_once_serving_and_says_what_it_holds(
    ledger: Ledger,
) -> None:
    from types import SimpleNamespace

    from mindroom.dashboard.ops import health

    current = config_with("alpha")
    other = Cluster(ledger.leases("other"), lambda: current, ())
    await other.join()  # holds everything
    standby = Cluster(ledger.leases("standby"), lambda: current, ())
    assert await standby.join() == set()
    host = SimpleNamespace(router=None, agents={}, appservice=None, cluster=standby)
    ok, body = health(host)  # type: ignore[arg-type]
    assert not ok  # still starting: the control
    standby.serve(Recorder())
    ok, body = health(host)  # type: ignore[arg-type]
    assert ok, body
    assert body["leases"] == []
