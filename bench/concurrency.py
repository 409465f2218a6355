"""Many agents, many threads, concurrent messages: all answered once, latency and memory.

Starts its own Synapse and the scripted model (answering instantly), runs mindroom as a real
process with ``--agents`` agents (each in its own room), opens ``--threads`` threads spread over
them, then sends one follow-up into every thread at once, ``--rounds`` times. Prints whether
every message was answered exactly once, the median and p95 reply latency next to the raw
homeserver round trip measured in the same run, and the bot's resident memory.

    python bench/concurrency.py [--agents 20] [--threads 100] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import nio  # noqa: E402

from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver  # noqa: E402
from tests.support.harness import (  # noqa: E402
    CONTROL_COMMAND,
    BotProcess,
    CredentialCache,
    Human,
    answers,
    config_text,
    relation,
    settle,
)
from tests.support.scripted_model import ScriptedModel  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def raw_round_trip(homeserver: EmbeddedHomeserver, n: int = 30) -> float:
    alice, bob = await Human.create(homeserver), await Human.create(homeserver)
    try:
        room = await alice.client.room_create(preset=nio.RoomPreset.public_chat)
        await bob.join(room.room_id)
        times = []
        for i in range(n):
            body = f"ping {i}"
            start = time.perf_counter()
            await alice.send(room.room_id, body)
            await bob.wait_for(lambda e, b=body: (e.get("content") or {}).get("body") == b)
            times.append(time.perf_counter() - start)
        return statistics.median(times[5:])
    finally:
        await alice.close()
        await bob.close()


async def timed_reply(human: Human, room_id: str, body: str, thread: str | None) -> float:
    start = time.perf_counter()
    event_id = await human.send(room_id, body, thread_root=thread)
    await human.wait_for_reply(room_id, event_id, timeout=120)
    return time.perf_counter() - start


async def main(agents: int, threads: int, rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel() as model:
        root = Path(tmp)
        homeserver = EmbeddedHomeserver(root / "synapse", port=0)
        await homeserver.start()
        bot = BotProcess(homeserver, root / "storage", CredentialCache(root / "creds.json"))
        human = None
        try:
            raw = await raw_round_trip(homeserver)
            names = [f"agent{i:02d}" for i in range(agents)]
            bot.storage.mkdir(parents=True)
            (bot.storage / "config.yaml").write_text(
                config_text(model.base_url, {n: {"rooms": [f"room-{n}"]} for n in names})
            )
            started = time.perf_counter()
            bot.start()
            await bot.wait_running(timeout=300)
            startup = time.perf_counter() - started
            assert bot.proc is not None
            rss_idle = rss_mb(bot.proc.pid)
            human = await Human.create(homeserver)
            rooms = [await human.join(f"#room-{n}:{homeserver.server_name}") for n in names]

            # open the threads (concurrently), then follow up in all of them at once per round
            placements = [rooms[t % agents] for t in range(threads)]
            roots = await asyncio.gather(
                *(human.send(room_id, f"thread {t}") for t, room_id in enumerate(placements))
            )
            await asyncio.gather(
                *(
                    human.wait_for_reply(r, e, timeout=120)
                    for r, e in zip(placements, roots, strict=True)
                )
            )
            latencies: list[float] = []
            synapse_pid = int((homeserver.data_dir / "homeserver.pid").read_text())
            cpu_before = cpu_seconds(bot.proc.pid), cpu_seconds(synapse_pid)
            wall = time.perf_counter()
            for round_no in range(rounds):
                latencies += await asyncio.gather(
                    *(
                        timed_reply(human, room_id, f"round {round_no} in thread {t}", roots[t])
                        for t, room_id in enumerate(placements)
                    )
                )
            wall = time.perf_counter() - wall
            cpu_bot = cpu_seconds(bot.proc.pid) - cpu_before[0]
            cpu_synapse = cpu_seconds(synapse_pid) - cpu_before[1]
            rss_busy = rss_mb(bot.proc.pid)
            for room_id in rooms:  # all that will be posted was, and was seen (a control each)
                await settle(human, room_id, bot.storage, timeout=120)

            sent = [
                e
                for e in human.events
                if e.get("sender") == human.user_id
                and e.get("type") == "m.room.message"
                and e["content"].get("body") != CONTROL_COMMAND
            ]
            replies = [
                e
                for e in human.events
                if e.get("type") == "m.room.message"
                and e.get("sender") != human.user_id
                and relation(e).get("rel_type") != "m.replace"
            ]
            counts = [
                sum(
                    answers(r, s["event_id"])
                    for r in replies
                    if relation(r).get("m.in_reply_to", {}).get("event_id") == s["event_id"]
                )
                for s in sent
            ]
        finally:
            if bot.proc is not None:
                await bot.stop()
            if human is not None:
                await human.close()
            await homeserver.stop()

    once = sum(1 for c in counts if c == 1)
    print(f"agents {agents}, threads {threads}, concurrent rounds {rounds}")
    print(f"start-up to running     {startup:6.1f} s")
    print(
        f"messages answered once  {once}/{len(counts)} "
        f"(twice or more: {sum(1 for c in counts if c > 1)}, never: {counts.count(0)})"
    )
    print(f"raw round trip          {raw * 1000:6.1f} ms (median)")
    med, p95 = statistics.median(latencies), percentile(latencies, 0.95)
    print(
        f"reply latency under load median {med * 1000:7.1f} ms ({med / raw:5.1f}x round trip)"
        f"   p95 {p95 * 1000:7.1f} ms ({p95 / raw:5.1f}x)"
    )
    print(f"throughput              {len(latencies) / wall:6.1f} replies/s")
    print(
        f"CPU during the rounds   bot {cpu_bot:5.1f} s, synapse {cpu_synapse:5.1f} s "
        f"over {wall:5.1f} s wall"
    )
    print(f"bot RSS                 {rss_idle:6.0f} MB idle, {rss_busy:6.0f} MB after the load")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--threads", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.agents, args.threads, args.rounds))
