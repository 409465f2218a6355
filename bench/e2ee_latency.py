"""What end-to-end encryption adds to a reply: an encrypted DM against an unencrypted one.

Starts its own Synapse on loopback and the scripted model (answering at once), runs mindroom
as a real process (streaming off, so a reply is one event), and has one person with an
encrypting nio client (as Element would be: vodozemac, its own key store) talk to the agent in
two DMs, one encrypted and one not, alternating message by message so drift hits both alike.
A reply is timed from the person's send to the answer arriving at their client (decrypted,
for the encrypted DM). The first encrypted message also pays the key exchange (claiming
one-time keys, sharing the room key): it is in the warm-up, reported on its own.

    python bench/e2ee_latency.py [--messages 40]

The last line is ``added_median_ms=N`` (target: under 30 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import nio  # noqa: E402

from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver  # noqa: E402
from tests.support.harness import (  # noqa: E402
    DECRYPTED,
    BotProcess,
    CredentialCache,
    Human,
    config_text,
    joined,
)
from tests.support.scripted_model import ScriptedModel, last_user_text  # noqa: E402


async def reply_time(human: Human, room_id: str, text: str) -> tuple[float, dict]:
    start = time.perf_counter()
    event_id = await human.send(room_id, text)
    reply = await human.wait_for_reply(room_id, event_id, timeout=60)
    return time.perf_counter() - start, reply


async def dm(human: Human, agent: str, encrypted: bool) -> str:
    state = [nio.EnableEncryptionBuilder().as_dict()] if encrypted else []
    created = await human.client.room_create(invite=[agent], is_direct=True, initial_state=state)
    assert isinstance(created, nio.RoomCreateResponse), created
    await human.wait_for(joined(agent, created.room_id), timeout=60)
    return created.room_id


def describe(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return (
        f"{name:<18} median {statistics.median(values) * 1000:7.1f} ms   "
        f"p95 {p95 * 1000:7.1f} ms   (n={len(values)})"
    )


async def main(n: int) -> float:
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel() as model:
        model.set_handler(lambda request: f"echo: {last_user_text(request)}")
        root = Path(tmp)
        homeserver = EmbeddedHomeserver(root / "synapse", port=0)
        await homeserver.start()
        bot = BotProcess(homeserver, root / "storage", CredentialCache(root / "creds.json"))
        person = None
        times: dict[bool, list[float]] = {False: [], True: []}
        try:
            bot.storage.mkdir(parents=True)
            agents = {"general": {"rooms": [], "streaming": False}}
            (bot.storage / "config.yaml").write_text(config_text(model.base_url, agents))
            bot.start()
            await bot.wait_running()
            person = await Human.create(homeserver, keys=root / "person-keys")
            agent = f"@mindroom_general:{homeserver.server_name}"
            rooms = {False: await dm(person, agent, False), True: await dm(person, agent, True)}
            first, reply = await reply_time(person, rooms[True], "the first encrypted message")
            assert reply.get(DECRYPTED), "the encrypted DM's answer was not encrypted"
            for encrypted in (False, True):  # warm-up
                for i in range(3):
                    await reply_time(person, rooms[encrypted], f"warm-up {i}")
            for i in range(n):
                for encrypted in (i % 2 == 0, i % 2 != 0):
                    took, reply = await reply_time(person, rooms[encrypted], f"question {i}")
                    assert bool(reply.get(DECRYPTED)) == encrypted
                    times[encrypted].append(took)
        finally:
            if bot.proc is not None:
                await bot.stop()
            if person is not None:
                await person.close()
            await homeserver.stop()
    print(f"first encrypted reply (key exchange included): {first * 1000:.1f} ms")
    print(describe("unencrypted DM", times[False]))
    print(describe("encrypted DM", times[True]))
    added = (statistics.median(times[True]) - statistics.median(times[False])) * 1000
    ratio = statistics.median(times[True]) / statistics.median(times[False])
    print(f"added by encryption {added:+.1f} ms   ratio {ratio:.2f}x")
    return added


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=40)
    added_ms = asyncio.run(main(max(2, parser.parse_args().messages)))
    print(f"added_median_ms={added_ms:.1f}")
