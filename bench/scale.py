"""Many agents: client-server mode against appservice mode, side by side in one run.

For each mode it starts its own Synapse on loopback (the appservice one with mindroom's
registration) and the scripted model (answering at once), then runs mindroom as a real
process with ``--agents`` agents spread over rooms of ten, and measures:

- start-up to every agent ready (the "mindroom is running" banner: accounts up, rooms
  prepared, listening), the first start (accounts registered) and a restart;
- the bot's RSS once running, and the homeserver's CPU seconds over the restart;
- replies per second: ``--threads`` messages, each starting its own thread with one agent,
  sent at once by one person; timed until the last answer arrived, with the homeserver's CPU
  per reply meanwhile (in client-server mode every event also wakes every agent's sync).

    python bench/scale.py [--agents 200] [--threads 500]

Then two processes against one, in each mode on one PostgreSQL and a Synapse of
their own: the replies per second of the same ``--threads`` burst answered by one
``mindroom run`` holding every agent, then by two pinned to half the agents each
(``--agents``; in appservice mode both listen on the registration's one port). The CPU each
process used meanwhile says what the bottleneck was (this machine's cores, the homeserver,
or a mindroom process).

The last line is
``appservice_startup_s=N clientserver_startup_s=N two_process_speedup=N.NNx`` (the restart
times, target: appservice under 10 s for 200 agents; appservice mode's two processes' replies
per second over one's, target 1.7x when the homeserver is not the bottleneck).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mindroom.adapters.matrix.appservice import write_registration  # noqa: E402
from mindroom.adapters.matrix.homeserver import PID_FILE, EmbeddedHomeserver  # noqa: E402
from mindroom.config.schema import AppserviceConfig  # noqa: E402
from tests.support.harness import BotProcess, CredentialCache, Human, answers, config_text  # noqa: E402
from tests.support.scripted_model import ScriptedModel  # noqa: E402

PER_ROOM = 10
TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Result:
    mode: str
    cold_s: float
    warm_s: float
    rss_mb: float
    homeserver_cpu_s: float
    replies_per_s: float
    busy_cpu_s: float  # the homeserver's CPU seconds while the replies were answered


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def timed_start(bot: BotProcess) -> float:
    bot.mark_log()
    start = time.perf_counter()
    bot.start()
    await bot.wait_running(timeout=1800)
    return time.perf_counter() - start


async def throughput(
    person: Human, homeserver: EmbeddedHomeserver, agents: int, threads: int
) -> float:
    rooms = {}
    for r in range((agents + PER_ROOM - 1) // PER_ROOM):
        rooms[r] = await person.join(f"#r{r}:{homeserver.server_name}")
    start = time.perf_counter()
    sent = await asyncio.gather(
        *(
            person.send(
                rooms[(i % agents) // PER_ROOM],
                f"@a{i % agents:03d} question {i}",
                mention=[f"@mindroom_a{i % agents:03d}:{homeserver.server_name}"],
            )
            for i in range(threads)
        )
    )
    waiting = set(sent)
    deadline = time.monotonic() + 600
    while waiting and time.monotonic() < deadline:
        answered = {e for e in waiting for ev in person.events if answers(ev, e)}
        waiting -= answered
        await asyncio.sleep(0.05)
    if waiting:
        raise TimeoutError(f"{len(waiting)} of {threads} messages were not answered")
    return threads / (time.perf_counter() - start)


def registered(mode: str, data_dir: Path) -> tuple[dict, tuple[Path, ...]]:
    """The ``matrix`` section of ``mode`` and the registrations its homeserver loads."""
    if mode != "appservice":
        return {}, ()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    services = (write_registration(data_dir, AppserviceConfig(port=port)),)
    return {"mode": "appservice", "appservice": {"port": port}}, services


async def run_mode(
    mode: str, root: Path, model: ScriptedModel, agents: int, threads: int
) -> Result:
    storage = root / mode / "storage"
    matrix, services = registered(mode, storage / "mindroom_data")
    homeserver = EmbeddedHomeserver(root / mode / "synapse", port=0, app_services=services)
    await homeserver.start()
    bot = BotProcess(homeserver, storage, CredentialCache(root / mode / "creds.json"))
    person = None
    try:
        members = {
            f"a{i:03d}": {"rooms": [f"r{i // PER_ROOM}"], "streaming": False} for i in range(agents)
        }
        text = (
            config_text(model.base_url, members, matrix=matrix)
            if matrix
            else config_text(model.base_url, members)
        )
        storage.mkdir(parents=True, exist_ok=True)
        (storage / "config.yaml").write_text(text)
        cold = await timed_start(bot)
        await bot.stop()
        synapse_pid = int((homeserver.data_dir / PID_FILE).read_text().strip())
        before = cpu_seconds(synapse_pid)
        warm = await timed_start(bot)
        homeserver_cpu = cpu_seconds(synapse_pid) - before
        assert bot.proc is not None
        memory = rss_mb(bot.proc.pid)
        person = await Human.create(homeserver)
        before = cpu_seconds(synapse_pid)
        rate = await throughput(person, homeserver, agents, threads)
        busy = cpu_seconds(synapse_pid) - before
    finally:
        if person is not None:
            await person.close()
        if bot.proc is not None:
            await bot.stop()
        await homeserver.stop()
    return Result(mode, cold, warm, memory, homeserver_cpu, rate, busy)


@dataclass
class Burst:
    """One burst of replies: its rate, and the CPU seconds each process used meanwhile."""

    replies_per_s: float
    wall_s: float
    cpu_s: dict[str, float]


async def measured_burst(
    person: Human, homeserver: EmbeddedHomeserver, agents: int, threads: int, pids: dict[str, int]
) -> Burst:
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    own = sum(os.times()[:2])
    start = time.perf_counter()
    rate = await throughput(person, homeserver, agents, threads)
    wall = time.perf_counter() - start
    used = {name: cpu_seconds(pid) - before[name] for name, pid in pids.items()}
    used["bench (person, model)"] = sum(os.times()[:2]) - own
    return Burst(rate, wall, used)


async def wait_leases(url: str, want: dict[str, int], timeout: float = 600) -> None:
    """Until every account in ``want`` is held by the process with that pid."""
    from mindroom.store.ledger import Ledger

    deadline = time.monotonic() + timeout
    while True:
        ledger = await Ledger.open(url)
        try:
            held = await ledger.leases("bench").holders()
        finally:
            await ledger.close()
        owners = {n: int(lease.owner.split(":")[1]) for n, lease in held.items()}
        if all(owners.get(n) == pid for n, pid in want.items()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError("the agents did not settle on their processes")
        await asyncio.sleep(0.5)


async def run_shared(
    mode: str, root: Path, model: ScriptedModel, agents: int, threads: int
) -> tuple[Burst, Burst]:
    """One process holding every agent, then two holding half each, on one PostgreSQL (in
    appservice mode both listen on the registration's one port)."""
    from tests.support.postgres import PostgresServer

    folder = Path(tempfile.mkdtemp(prefix="mindroom-pg-"))  # /tmp: the postgres user reaches it
    database = PostgresServer(folder).start()
    storage = root / f"shared-{mode}" / "storage"
    matrix, services = registered(mode, storage / "mindroom_data")
    homeserver = EmbeddedHomeserver(
        root / f"shared-{mode}" / "synapse", port=0, app_services=services
    )
    await homeserver.start()
    storage.mkdir(parents=True, exist_ok=True)
    credentials = CredentialCache(root / f"shared-{mode}" / "creds.json")
    names = [f"a{i:03d}" for i in range(agents)]
    halves = (names[: agents // 2], names[agents // 2 :]) if agents > 1 else (names, [])
    members = {n: {"rooms": [f"r{i // PER_ROOM}"], "streaming": False} for i, n in enumerate(names)}
    url = database.database()
    (storage / "config.yaml").write_text(
        config_text(
            model.base_url,
            members,
            storage={"database": url},
            **({"matrix": matrix} if matrix else {}),
        )
    )
    first = BotProcess(homeserver, storage, credentials, log_name="first.log")
    second = BotProcess(homeserver, storage, credentials, log_name="second.log")
    person = None
    try:
        synapse_pid = int((homeserver.data_dir / PID_FILE).read_text().strip())
        await timed_start(first)
        assert first.proc is not None
        person = await Human.create(homeserver)
        pids = {"mindroom": first.proc.pid, "synapse": synapse_pid}
        one = await measured_burst(person, homeserver, agents, threads, pids)
        await first.stop()
        first.run_options = ("--no-dashboard", "--agents", ",".join(halves[0]))
        second.run_options = ("--no-dashboard", "--agents", ",".join(halves[1] or halves[0]))
        await timed_start(first)
        await timed_start(second)
        assert first.proc is not None
        assert second.proc is not None
        want = {n: first.proc.pid for n in halves[0]} | {n: second.proc.pid for n in halves[1]}
        await wait_leases(url, want)
        pids = {"mindroom 1": first.proc.pid, "mindroom 2": second.proc.pid, "synapse": synapse_pid}
        two = await measured_burst(person, homeserver, agents, threads, pids)
    finally:
        if person is not None:
            await person.close()
        for bot in (first, second):
            if bot.proc is not None:
                await bot.stop()
        await homeserver.stop()
        database.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return one, two


def bottleneck(burst: Burst) -> str:
    """What limited a burst: this machine's cores, a process using its one core (Synapse and
    mindroom each run Python on one core), or neither (then the time went to waiting)."""
    cores = os.cpu_count() or 1
    total = sum(burst.cpu_s.values()) / burst.wall_s
    busiest, cpu = max(burst.cpu_s.items(), key=lambda item: item[1])
    if total > 0.75 * cores:  # the run queue is rarely empty: processes wait for a core
        return f"this machine's {cores} cores ({total:.2f} of {cores} busy)"
    if cpu / burst.wall_s > 0.85:
        return f"{busiest}, at {cpu / burst.wall_s:.2f} of its one core"
    return (
        f"no process and not the cores ({total:.2f} of {cores} busy, the most {busiest} "
        f"at {cpu / burst.wall_s:.2f}): round trips between the processes"
    )


def report_shared(mode: str, one: Burst, two: Burst, threads: int) -> float:
    speedup = two.replies_per_s / one.replies_per_s
    print(f"\n{threads} threads at once, {mode} mode on PostgreSQL: one process vs two")
    for label, burst in (("one process", one), ("two processes", two)):
        usage = ", ".join(f"{name} {cpu / burst.wall_s:.2f}" for name, cpu in burst.cpu_s.items())
        print(f"{label:<14} {burst.replies_per_s:>6.1f} replies/s; CPU cores used: {usage}")
        print(f"{'':<14} bottleneck: {bottleneck(burst)}")
    print(f"two processes: {speedup:.2f}x the replies/s of one")
    # what sharing costs: mindroom's CPU per reply, which sets the rate on cores of its own
    per_reply = [
        sum(cpu for name, cpu in burst.cpu_s.items() if name.startswith("mindroom"))
        / (burst.replies_per_s * burst.wall_s)
        * 1000
        for burst in (one, two)
    ]
    print(
        f"mindroom CPU per reply: one process {per_reply[0]:.1f} ms, "
        f"two processes {per_reply[1]:.1f} ms"
    )
    return speedup


async def main(agents: int, threads: int) -> tuple[Result, Result, float]:
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel() as model:
        model.set_handler(lambda request: "Answered.")
        root = Path(tmp)
        appservice = await run_mode("appservice", root, model, agents, threads)
        clientserver = await run_mode("clientserver", root, model, agents, threads)
        shared = {
            mode: await run_shared(mode, root, model, agents, threads)
            for mode in ("clientserver", "appservice")
        }
    print(
        f"{agents} agents in {(agents + PER_ROOM - 1) // PER_ROOM} rooms, "
        f"{threads} threads at once, one process"
    )
    print(
        f"{'mode':<13} {'first start':>12} {'restart':>9} {'RSS':>9} {'HS CPU':>8} "
        f"{'replies/s':>10} {'HS CPU/reply':>13}"
    )
    for r in (clientserver, appservice):
        print(
            f"{r.mode:<13} {r.cold_s:>10.1f} s {r.warm_s:>7.1f} s {r.rss_mb:>6.0f} MB "
            f"{r.homeserver_cpu_s:>6.1f} s {r.replies_per_s:>10.1f} "
            f"{r.busy_cpu_s / threads * 1000:>10.1f} ms"
        )
    cpu_ratio = clientserver.busy_cpu_s / max(appservice.busy_cpu_s, 0.01)
    print(
        f"restart: appservice {clientserver.warm_s / appservice.warm_s:.2f}x faster; "
        f"answering: {appservice.replies_per_s / clientserver.replies_per_s:.2f}x the replies/s "
        f"for {cpu_ratio:.2f}x less homeserver CPU"
    )
    speedups = {mode: report_shared(mode, *bursts, threads) for mode, bursts in shared.items()}
    return appservice, clientserver, speedups["appservice"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--threads", type=int, default=500)
    options = parser.parse_args()
    service, client, speedup = asyncio.run(main(max(1, options.agents), max(1, options.threads)))
    print(
        f"appservice_startup_s={service.warm_s:.1f} clientserver_startup_s={client.warm_s:.1f} "
        f"two_process_speedup={speedup:.2f}x"
    )
