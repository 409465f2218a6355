"""Reply latency: human send -> agent's complete reply, against the raw homeserver round trip.

Starts its own Synapse on loopback and the scripted model (answering instantly), runs mindroom
as a real process, and measures in one run:

* raw round trip: one nio client sends, another receives it through its sync loop;
* reply: a human sends a message, the agent's whole reply arrives at the human;
* the bot's CPU per reply: the mindroom process's CPU time over the measured replies (its
  whole work for each, the bookkeeping after the answer included), divided by their number.

A reply needs two hops (human -> bot, bot -> human), so the floor is about 2x the round trip.
The human who receives the reply is the client who receives the raw round trip, and the two are
measured alternately while the bot runs, so both see the same homeserver under the same load;
each measurement starts once the bot's read receipt for the previous question arrived (the
last request of its reply path), so none starts under the tail of the previous reply.

    python bench/reply_latency.py [--messages 50]
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
from tests.support.harness import BotProcess, CredentialCache, Human, config_text  # noqa: E402
from tests.support.scripted_model import ScriptedModel  # noqa: E402


async def round_trips(sender: Human, receiver: Human, room_id: str, n: int) -> list[float]:
    times = []
    for i in range(n):
        body = f"ping {i} {time.monotonic()}"
        start = time.perf_counter()
        await sender.send(room_id, body)
        await receiver.wait_for(lambda e, b=body: (e.get("content") or {}).get("body") == b)
        times.append(time.perf_counter() - start)
    return times


async def replies(human: Human, room_id: str, agent_id: str, n: int, first: int = 0) -> list[float]:
    times = []
    for i in range(first, first + n):
        start = time.perf_counter()
        event_id = await human.send(room_id, f"question {i}")
        reply = await human.wait_for_reply(room_id, event_id, timeout=30)
        assert reply["sender"] == agent_id
        times.append(time.perf_counter() - start)
        await human.wait_for(  # the bot is done with it: the next measurement starts clean
            lambda e, q=event_id: (
                e.get("type") == "m.receipt" and e["event_id"] == q and e["sender"] == agent_id
            ),
            timeout=30,
        )
    return times


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user and system) process ``pid`` has used so far (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def describe(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (
        f"{name:<22} median {statistics.median(values) * 1000:7.1f} ms   "
        f"p95 {p95 * 1000:7.1f} ms   (n={len(values)})"
    )


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel() as model:
        root = Path(tmp)
        homeserver = EmbeddedHomeserver(root / "synapse", port=0)
        await homeserver.start()
        bot = BotProcess(homeserver, root / "storage", CredentialCache(root / "creds.json"))
        alice = bob = None
        try:
            alice, bob = await Human.create(homeserver), await Human.create(homeserver)
            created = await alice.client.room_create(preset=nio.RoomPreset.public_chat)
            raw_room = created.room_id
            await bob.join(raw_room)
            bot.storage.mkdir(parents=True)
            (bot.storage / "config.yaml").write_text(
                config_text(model.base_url, {"general": {"rooms": ["bench"]}})
            )
            bot.start()
            await bot.wait_running()
            room_id = await alice.join(f"#bench:{homeserver.server_name}")
            agent_id = f"@mindroom_general:{homeserver.server_name}"
            await round_trips(bob, alice, raw_room, 5)  # warm-up
            await replies(alice, room_id, agent_id, 5)
            raw, reply = [], []
            cpu_before = process_cpu_s(bot.proc.pid)
            for i in range(n):  # alternately: alice receives both, under the same conditions
                raw += await round_trips(bob, alice, raw_room, 1)
                reply += await replies(alice, room_id, agent_id, 1, first=5 + i)
            bot_cpu = process_cpu_s(bot.proc.pid) - cpu_before  # the raw room has no bot in it
        finally:
            if bot.proc is not None:
                await bot.stop()
            for person in (alice, bob):
                if person is not None:
                    await person.close()
            await homeserver.stop()

    print(describe("raw round trip", raw))
    print(describe("agent reply", reply))
    print(f"bot CPU per reply      {bot_cpu / len(reply) * 1000:7.1f} ms")
    ratio = statistics.median(reply) / statistics.median(raw)
    print(f"reply / round trip     {ratio:.2f}x   (floor about 2x; target at most 2.2x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50)
    asyncio.run(main(parser.parse_args().messages))
