"""Several ``mindroom run`` sharing one PostgreSQL, as real processes on a real
Synapse: each agent is run by one process (its lease), a message is answered by the process
that runs its agent (handed over when the router of another process chose it), and
``kill -9`` of a process moves its agents to the other, which answers what was left, once."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from mindroom.cli.main import main
from mindroom.store.ledger import Ledger
from tests.support.harness import (
    BotProcess,
    CredentialCache,
    Event,
    Human,
    answers,
    config_text,
    joined,
    unique,
)
from tests.support.postgres import PostgresServer
from tests.support.scripted_model import ScriptedModel, last_user_text, system_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.asyncio, pytest.mark.synapse]


def process(
    synapse: EmbeddedHomeserver, storage: Path, cache: CredentialCache, name: str, agents: str
) -> BotProcess:
    return BotProcess(
        synapse,
        storage,
        cache,
        run_options=("--no-dashboard", "--agents", agents),
        log_name=f"{name}.log",
    )


@contextlib.asynccontextmanager
async def pair(
    synapse: EmbeddedHomeserver,
    storage: Path,
    cache: CredentialCache,
    url: str,
    first: str,
    second: str,
) -> AsyncIterator[tuple[BotProcess, BotProcess]]:
    """Two processes on ``storage``, pinned to ``first`` and ``second``, each running its
    agent once started; none is left running afterwards, whatever happened."""
    one = process(synapse, storage, cache, "one", first)
    two = process(synapse, storage, cache, "two", second)
    try:
        one.start()
        await one.wait_running(90)
        two.start()
        await two.wait_running(90)
        assert one.proc is not None
        assert two.proc is not None
        # the second comes home to the process pinned to it (the first ran it meanwhile)
        await wait_holders(url, {first: one.proc.pid, second: two.proc.pid})
        yield one, two
    finally:
        for bot in (one, two):
            if bot.proc is not None and bot.proc.poll() is None:
                bot.proc.kill()
                bot.proc.wait()


async def holders(url: str) -> dict[str, int]:
    """Account name -> the pid of the process holding its lease (unexpired)."""
    ledger = await Ledger.open(url)
    try:
        leases = await ledger.leases("test-probe").holders()
    finally:
        await ledger.close()
    now = time.time()
    return {
        n: int(lease.owner.split(":")[1]) for n, lease in leases.items() if lease.expires_at > now
    }


async def _without(name: str, url: str) -> bool:
    return name not in await holders(url)


async def wait_holders(url: str, want: dict[str, int], timeout: float = 30.0) -> None:
    async def as_wanted() -> bool:
        held = await holders(url)
        return all(held.get(name) == pid for name, pid in want.items())

    await wait_until(as_wanted, f"lease holders {want}", timeout, interval=0.1)


async def settled_rows(
    url: str, keys: list[str], timeout: float = 30.0
) -> dict[str, tuple[str, int | None]]:
    """As :func:`rows`, once none is unfinished (a row is finished after its answer posts)."""

    async def finished() -> dict[str, tuple[str, int | None]] | None:
        found = await rows(url, keys)
        return found if all(s not in ("claimed", "queued") for s, _ in found.values()) else None

    return await wait_until(finished, f"rows {keys} finished", timeout, interval=0.1)


async def rows(url: str, keys: list[str]) -> dict[str, tuple[str, int | None]]:
    """Ledger key -> (status, pid of its owner)."""
    ledger = await Ledger.open(url)
    found = {}
    try:
        for key in keys:
            async with ledger._db.query(
                "SELECT status, owner FROM handled WHERE event_id = ?", (key,)
            ) as cursor:
                row = await cursor.fetchone()
            if row is not None:
                found[key] = (row[0], int(row[1].split(":")[1]) if row[1] else None)
    finally:
        await ledger.close()
    return found


def replies(human: Human, room_id: str, to_event: str) -> list[Event]:
    """The messages (not edits) that answer ``to_event``."""
    return [
        e
        for e in human.events
        if e["room_id"] == room_id
        and e.get("type") == "m.room.message"
        and e.get("sender") != human.user_id
        and answers(e, to_event)
    ]


def alpha_and_beta(release: threading.Event, body: dict[str, Any]) -> str:
    """The model of :func:`share_and_fail_over`: the router picks beta, alpha hands off to
    beta, and "slow" waits for ``release`` (its first try is cut off by kill -9)."""
    if "You route chat messages" in system_text(body):
        return '{"agent": "beta"}'
    text = last_user_text(body)
    if "pass it on" in text:
        return "@beta please continue"
    if "slow" in text:
        release.wait(60)
    return f"echo: {text}"


def alpha_and_beta_config(model_url: str, database: str, room: str, **sections: Any) -> str:
    """Agents alpha and beta in ``room``, sharing ``database`` (failover within 8 s: short, so
    a kill -9 is taken over quickly, yet longer than a process starved on a loaded machine
    goes without renewing, which would hand its agent to the other process mid-test)."""
    agents = {"alpha": {"rooms": [room], "role": "first"}, "beta": {"rooms": [room], "role": "b"}}
    return config_text(
        model_url, agents, storage={"database": database, "failover_seconds": 8}, **sections
    )


async def test_two_processes_share_the_agents_and_kill_9_moves_them_without_loss_or_repeat(
    synapse: EmbeddedHomeserver,
    tmp_path: Path,
    credential_cache: CredentialCache,
    human: Human,
    model: ScriptedModel,
    postgres: PostgresServer,
) -> None:
    url = postgres.database()
    room = unique("cluster")
    release = threading.Event()
    model.set_handler(functools.partial(alpha_and_beta, release))
    storage = tmp_path / "storage"
    storage.mkdir()
    (storage / "config.yaml").write_text(alpha_and_beta_config(model.base_url, url, room))
    async with pair(synapse, storage, credential_cache, url, "alpha", "beta") as (one, two):
        await share_and_fail_over(one, two, storage, synapse, human, model, url, room, release)


async def share_and_fail_over(
    one: BotProcess,
    two: BotProcess,
    storage: Path,
    synapse: EmbeddedHomeserver,
    human: Human,
    model: ScriptedModel,
    url: str,
    room: str,
    release: threading.Event,
) -> list[str]:
    """Routing, a hand-over, a hand-off and a kill -9 of the second process; the messages the
    person sent, each answered once."""
    assert one.proc is not None
    assert two.proc is not None
    pid_one, pid_two = one.proc.pid, two.proc.pid
    await wait_holders(url, {"router": pid_one})  # the first process started took the router
    # each pinned agent in its process: the second process takes beta's lease only once it runs
    await wait_holders(url, {"alpha": pid_one, "beta": pid_two})
    room_id = await human.join(f"#{room}:{synapse.server_name}")
    for agent in ("alpha", "beta"):  # in the room before the messages, in every process's view
        user = f"@mindroom_{agent}:{synapse.server_name}"
        await human.wait_for(joined(user, room_id), timeout=30)

    to_alpha = await human.send(room_id, "@alpha one")
    to_beta = await human.send(room_id, "@beta two")
    routed = await human.send(room_id, "who wants this")  # no mention: the router chooses
    for event_id, agent in ((to_alpha, "alpha"), (to_beta, "beta"), (routed, "beta")):
        answer = await human.wait_for_reply(room_id, event_id, timeout=30)
        assert answer["sender"] == f"@mindroom_{agent}:{synapse.server_name}"
    handed = f"{routed}>beta"
    assert await settled_rows(url, [to_alpha, to_beta, routed, handed]) == {
        to_alpha: ("done", pid_one),  # each answered by the process running its agent
        to_beta: ("done", pid_two),
        routed: ("done", pid_one),  # routed by the router's process...
        handed: ("done", pid_two),  # ...and answered by beta's
    }

    passed = await human.send(room_id, "@alpha pass it on")
    handing = await human.wait_for_reply(room_id, passed, timeout=30)
    assert handing["sender"] == f"@mindroom_alpha:{synapse.server_name}"
    beta_user = f"@mindroom_beta:{synapse.server_name}"
    continued = await human.wait_for(
        lambda e: e.get("sender") == beta_user and "please continue" in str(e["content"]),
        timeout=30,
    )
    handoff = handing["event_id"]  # the hand-off is claimed as alpha's answer...
    assert await settled_rows(url, [handoff, f"{handoff}>beta"]) == {
        handoff: ("done", pid_one),
        f"{handoff}>beta": ("done", pid_two),  # ...and answered by beta's process
    }
    assert "echo: @beta please continue" in str(continued["content"])

    slow = await human.send(room_id, "@beta slow")
    deadline = time.monotonic() + 30
    while not any("slow" in last_user_text(r) for r in model.requests):
        assert time.monotonic() < deadline, "beta never asked the model"
        await asyncio.sleep(0.05)
    assert (await rows(url, [slow]))[slow] == ("claimed", pid_two)  # in flight in two
    await two.stop(signal.SIGKILL)
    release.set()
    away = await human.send(room_id, "@beta are you there")

    await wait_holders(url, {"beta": pid_one})  # within failover_seconds
    for event_id in (slow, away):
        answer = await human.wait_for_reply(room_id, event_id, timeout=45)
        assert answer["sender"] == f"@mindroom_beta:{synapse.server_name}"
    settled = await settled_rows(url, [slow, away])
    assert settled == {slow: ("done", pid_one), away: ("done", pid_one)}
    await human.fence(room_id)
    for event_id in (to_alpha, to_beta, routed, slow, away):
        assert len(replies(human, room_id, event_id)) == 1, event_id  # none twice, none lost

    assert await one.stop() == 0
    log = (storage / "one.log").read_text()
    assert "took the lease of beta" in log
    assert "resuming " + slow in log
    assert main(["maintenance", "status", "--config", str(storage / "config.yaml")]) == 0
    return [to_alpha, to_beta, routed, passed, slow, away]


async def test_agents_flag_is_refused_without_a_shared_database_or_with_an_unknown_name(
    tmp_path: Path, postgres: PostgresServer
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(config_text("http://127.0.0.1:1/v1", {"alpha": {}}))

    def run(agents: str) -> subprocess.CompletedProcess[str]:
        command = [
            sys.executable,
            "-m",
            "mindroom",
            "run",
            "--config",
            str(config),
            "--agents",
            agents,
        ]
        return subprocess.run(command, capture_output=True, text=True, timeout=60)

    alone = await asyncio.to_thread(run, "alpha")
    assert alone.returncode == 2
    assert "--agents shares the agents between several processes" in alone.stderr
    assert "storage.database" in alone.stderr
    config.write_text(
        config_text(
            "http://127.0.0.1:1/v1", {"alpha": {}}, storage={"database": postgres.database()}
        )
    )
    unknown = await asyncio.to_thread(run, "alpha,gamma,router")
    assert unknown.returncode == 2
    assert "no agent or team named gamma, router" in unknown.stderr
    assert "(known: alpha)" in unknown.stderr  # the router is nobody's to pin


async def test_a_reload_adds_an_agent_to_one_of_two_processes_and_removes_it(
    synapse: EmbeddedHomeserver,
    tmp_path: Path,
    credential_cache: CredentialCache,
    human: Human,
    model: ScriptedModel,
    postgres: PostgresServer,
) -> None:
    """Both processes read the edited config: the new agent runs in exactly one of them
    (its lease), joins the room and answers; removed, it leaves."""
    storage = tmp_path / "storage"
    storage.mkdir()
    await reload_adds_and_removes(
        synapse, storage, credential_cache, postgres.database(), human, model
    )


async def reload_adds_and_removes(
    synapse: EmbeddedHomeserver,
    storage: Path,
    cache: CredentialCache,
    url: str,
    human: Human,
    model: ScriptedModel,
    **extra: Any,
) -> None:
    """Two processes on ``storage``: a reload adds gamma, which answers once, then drops it
    (``extra``: more config sections, e.g. ``matrix``)."""
    from tests.support.harness import joined

    room = unique("rcluster")
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    agents: dict[str, Any] = {"alpha": {"rooms": [room]}, "beta": {"rooms": [room]}}
    sections = {"storage": {"database": url, "failover_seconds": 3}, **extra}
    (storage / "config.yaml").write_text(config_text(model.base_url, agents, **sections))
    async with pair(synapse, storage, cache, url, "alpha", "beta") as (one, two):
        assert one.proc is not None
        room_id = await human.join(f"#{room}:{synapse.server_name}")

        def write(members: dict[str, Any]) -> None:
            text = config_text(model.base_url, members, **sections)
            (storage / "config.yaml.tmp").write_text(text)
            (storage / "config.yaml.tmp").replace(storage / "config.yaml")

        write({**agents, "gamma": {"rooms": [room]}})
        gamma = f"@mindroom_gamma:{synapse.server_name}"
        await human.wait_for(joined(gamma, room_id), timeout=45)
        asked = await human.send(room_id, "@gamma hello", mention=[gamma])
        reply = await human.wait_for_reply(room_id, asked, timeout=30)
        held = await holders(url)
        assert held["gamma"] in (one.proc.pid, two.proc.pid)

        write(agents)
        await human.wait_for(
            lambda e: (
                e.get("type") == "m.room.member"
                and e.get("state_key") == gamma
                and e["content"].get("membership") == "leave"
            ),
            timeout=45,
        )
        await human.fence(room_id)
        assert reply["sender"] == gamma
        assert len(replies(human, room_id, asked)) == 1  # answered by one process only
        # the process leaves gamma's rooms, then gives its lease back
        await wait_until(lambda: _without("gamma", url), "gamma's lease given back", timeout=30)
