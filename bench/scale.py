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

Two processes sharing the work (issue 19.3) are not built yet, so ``two_process_speedup`` is
``n/a``. The last line is
``appservice_startup_s=N clientserver_startup_s=N two_process_speedup=n/a`` (the restart
times; target: appservice under 10 s for 200 agents).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mindroom.config.schema import AppserviceConfig  # noqa: E402
from mindroom.matrix.appservice import write_registration  # noqa: E402
from mindroom.matrix.homeserver import PID_FILE, EmbeddedHomeserver  # noqa: E402
from tests.harness import BotProcess, CredentialCache, Human, answers, config_text  # noqa: E402
from tests.scripted_model import ScriptedModel  # noqa: E402

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


async def throughput(person: Human, homeserver: EmbeddedHomeserver, agents: int,
                     threads: int) -> float:  # fmt: skip
    rooms = {}
    for r in range((agents + PER_ROOM - 1) // PER_ROOM):
        rooms[r] = await person.join(f"#r{r}:{homeserver.server_name}")
    start = time.perf_counter()
    sent = await asyncio.gather(*(
        person.send(rooms[(i % agents) // PER_ROOM], f"@a{i % agents:03d} question {i}",
                    mention=[f"@mindroom_a{i % agents:03d}:{homeserver.server_name}"])
        for i in range(threads)
    ))  # fmt: skip
    waiting = set(sent)
    deadline = time.monotonic() + 600
    while waiting and time.monotonic() < deadline:
        answered = {e for e in waiting for ev in person.events if answers(ev, e)}
        waiting -= answered
        await asyncio.sleep(0.05)
    if waiting:
        raise TimeoutError(f"{len(waiting)} of {threads} messages were not answered")
    return threads / (time.perf_counter() - start)


async def run_mode(mode: str, root: Path, model: ScriptedModel, agents: int,
                   threads: int) -> Result:  # fmt: skip
    storage = root / mode / "storage"
    data_dir = storage / "mindroom_data"
    matrix: dict = {}
    services: tuple[Path, ...] = ()
    if mode == "appservice":
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        services = (write_registration(data_dir, AppserviceConfig(port=port)),)
        matrix = {"mode": "appservice", "appservice": {"port": port}}
    homeserver = EmbeddedHomeserver(root / mode / "synapse", port=0, app_services=services)
    await homeserver.start()
    bot = BotProcess(homeserver, storage, CredentialCache(root / mode / "creds.json"))
    person = None
    try:
        members = {f"a{i:03d}": {"rooms": [f"r{i // PER_ROOM}"], "streaming": False}
                   for i in range(agents)}  # fmt: skip
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


async def main(agents: int, threads: int) -> tuple[Result, Result]:
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel() as model:
        model.set_handler(lambda request: "Answered.")
        root = Path(tmp)
        appservice = await run_mode("appservice", root, model, agents, threads)
        clientserver = await run_mode("clientserver", root, model, agents, threads)
    print(f"{agents} agents in {(agents + PER_ROOM - 1) // PER_ROOM} rooms, "
          f"{threads} threads at once, one process")  # fmt: skip
    print(f"{'mode':<13} {'first start':>12} {'restart':>9} {'RSS':>9} {'HS CPU':>8} "
          f"{'replies/s':>10} {'HS CPU/reply':>13}")  # fmt: skip
    for r in (clientserver, appservice):
        print(f"{r.mode:<13} {r.cold_s:>10.1f} s {r.warm_s:>7.1f} s {r.rss_mb:>6.0f} MB "
              f"{r.homeserver_cpu_s:>6.1f} s {r.replies_per_s:>10.1f} "
              f"{r.busy_cpu_s / threads * 1000:>10.1f} ms")  # fmt: skip
    cpu_ratio = clientserver.busy_cpu_s / max(appservice.busy_cpu_s, 0.01)
    print(f"restart: appservice {clientserver.warm_s / appservice.warm_s:.2f}x faster; "
          f"answering: {appservice.replies_per_s / clientserver.replies_per_s:.2f}x the replies/s "
          f"for {cpu_ratio:.2f}x less homeserver CPU")  # fmt: skip
    return appservice, clientserver


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--threads", type=int, default=500)
    options = parser.parse_args()
    service, client = asyncio.run(main(max(1, options.agents), max(1, options.threads)))
    print(f"appservice_startup_s={service.warm_s:.1f} clientserver_startup_s={client.warm_s:.1f} "
          "two_process_speedup=n/a")  # fmt: skip
