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

Then the homeserver's part of a reply, alternately with the round trip again: a null bot
(``null_bot.py``, a process of its own as mindroom is) answers at once in a room like the
agent's (the person, the answering account and an idle account that polls, as the router
does where an agent hears each of its rooms), each time twice: a plain reply, and a reply as
mindroom posts it (in a thread, with HTML and a mention of the asker, which costs the
homeserver more). What mindroom adds is the difference between the first ratio and the plain
null bot's, in milliseconds of the round trip. (The null bot has a phase of its own:
measured in the same alternation, its requests would change the rhythm, and with it the
first ratio.)

    python bench/reply_latency.py [--messages 50]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from functools import partial
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


async def replies(
    human: Human,
    room_id: str,
    answerer: str,
    n: int,
    first: int = 0,
    prefix: str = "question",
    receipts: bool = True,
) -> list[float]:
    """``n`` messages answered by ``answerer``, one at a time: the time to each whole reply.
    With ``receipts`` (mindroom sends them, the null bot does not) each next one starts once
    the answerer's read receipt for the last arrived."""
    times = []
    for i in range(first, first + n):
        start = time.perf_counter()
        event_id = await human.send(room_id, f"{prefix} {i}")
        reply = await human.wait_for_reply(room_id, event_id, timeout=30)
        assert reply["sender"] == answerer
        times.append(time.perf_counter() - start)
        if not receipts:
            continue
        await human.wait_for(  # the bot is done with it: the next measurement starts clean
            lambda e, q=event_id: (
                e.get("type") == "m.receipt" and e["event_id"] == q and e["sender"] == answerer
            ),
            timeout=30,
        )
    return times


NULL_BOT = Path(__file__).resolve().parent / "null_bot.py"


@contextlib.asynccontextmanager
async def null_bot(homeserver: EmbeddedHomeserver, human: Human, script: Path = NULL_BOT):
    """The null bot's process, answering in a room of its own with ``human``: (room, its ID)."""
    answerer = await Human.create(homeserver, sync=False)
    idle = await Human.create(homeserver, sync=False)
    created = await human.client.room_create(preset=nio.RoomPreset.public_chat)
    room_id = created.room_id
    for account in (answerer, idle):
        await account.join(room_id)
    accounts = [(a.client.user_id, a.client.access_token) for a in (answerer, idle)]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        homeserver.url,
        *(value for account in accounts for value in account),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        ready = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert ready.strip() == b"ready", ready
        yield room_id, answerer.client.user_id
    finally:
        proc.kill()
        await proc.wait()
        for account in (answerer, idle):
            await account.close()


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
            # then the null bot, alternately with the round trip again (its own phase: the
            # measurement above is as it always was)
            async with null_bot(homeserver, alice) as (null_room, null_id):
                null_replies = partial(
                    replies, alice, null_room, null_id, prefix="null", receipts=False
                )
                shaped_replies = partial(
                    replies, alice, null_room, null_id, prefix="shaped", receipts=False
                )
                await null_replies(5, 0)
                await shaped_replies(5, 0)
                raw_again, null, shaped = [], [], []
                for i in range(n):
                    raw_again += await round_trips(bob, alice, raw_room, 1)
                    null += await null_replies(1, 5 + i)
                    shaped += await shaped_replies(1, 5 + i)
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
    print(describe("raw round trip again", raw_again))
    print(describe("null bot reply", null))
    print(describe("null bot, as mindroom", shaped))
    ratio = statistics.median(reply) / statistics.median(raw)
    floor = statistics.median(null) / statistics.median(raw_again)
    shaped_floor = statistics.median(shaped) / statistics.median(raw_again)
    added = (ratio - floor) * statistics.median(raw) * 1000
    print(f"null bot / round trip  {floor:.2f}x   (the homeserver's part of a reply)")
    print(
        f"as mindroom answers    {shaped_floor:.2f}x   (the same, for a thread reply with HTML and "
        "a mention, as mindroom's)"
    )
    print(f"mindroom adds          {added:7.1f} ms   (the two ratios' difference, in round trips)")
    print(f"reply / round trip     {ratio:.2f}x   (floor about 2x; target at most 2.2x)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50)
    asyncio.run(main(parser.parse_args().messages))
