"""The PDF attack: another person's reply time while crafted PDFs are being read.

Starts its own Synapse on loopback and the scripted model (answering instantly), runs mindroom
as a real process with ``general`` in one room, and measures Bob's reply time (his message
sent -> the agent's whole reply seen), as a median over a few messages:

* quiet: nobody else is talking;
* attack: Alice has just sent six crafted PDFs (a few kilobytes each, every page sharing one
  compressed stream that costs pypdf seconds per page), and Bob asks while they are read.

A reply that does not come within ``--timeout`` seconds counts as the timeout (the figure is
then a lower bound, marked ``>=``).

    python bench/pdf_attack.py [--quiet 5] [--attack 3] [--timeout 150]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import nio  # noqa: E402

from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver  # noqa: E402
from tests.support.harness import BotProcess, CredentialCache, Human, config_text  # noqa: E402
from tests.support.pdfs import slow_pdf  # noqa: E402
from tests.support.scripted_model import ScriptedModel  # noqa: E402

ATTACK_PDFS = 6


async def send_pdf(human: Human, room_id: str, data: bytes, name: str) -> str:
    response, _ = await human.client.upload(
        io.BytesIO(data), content_type="application/pdf", filename=name, filesize=len(data)
    )
    assert isinstance(response, nio.UploadResponse), response
    content = {
        "msgtype": "m.file",
        "body": name,
        "filename": name,
        "url": response.content_uri,
        "info": {"mimetype": "application/pdf", "size": len(data)},
    }
    sent = await human.client.room_send(room_id, "m.room.message", content)
    assert isinstance(sent, nio.RoomSendResponse), sent
    return sent.event_id


async def reply_times(
    bob: Human, room_id: str, n: int, timeout: float, label: str
) -> tuple[list[float], int]:
    """Bob's reply times for ``n`` questions, and how many timed out (counted as ``timeout``)."""
    times, late = [], 0
    for i in range(n):
        start = time.perf_counter()
        event_id = await bob.send(room_id, f"{label} question {i}")
        try:
            await bob.wait_for_reply(room_id, event_id, timeout=timeout)
            times.append(time.perf_counter() - start)
        except TimeoutError:
            times.append(timeout)
            late += 1
        print(f"  {label} reply {i}: {times[-1] * 1000:.0f} ms", flush=True)
    return times, late


async def stop(bot: BotProcess) -> None:
    """Stop the bot; one still busy reading PDFs in threads may not stop in time: killed."""
    assert bot.proc is not None
    try:
        await bot.stop()
    except subprocess.TimeoutExpired:
        print("the bot did not stop within 30 s (still reading PDFs): killed", flush=True)
        bot.proc.kill()
        bot.proc.wait()


async def main(quiet_n: int, attack_n: int, timeout: float) -> None:
    crafted = slow_pdf(pages=40)
    print(f"crafted PDF: {len(crafted)} bytes, 40 pages sharing one stream", flush=True)
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel() as model:
        root = Path(tmp)
        homeserver = EmbeddedHomeserver(root / "synapse", port=0)
        await homeserver.start()
        bot = BotProcess(homeserver, root / "storage", CredentialCache(root / "creds.json"))
        alice = bob = None
        try:
            alice, bob = await Human.create(homeserver), await Human.create(homeserver)
            bot.storage.mkdir(parents=True)
            agents = {"general": {"rooms": ["bench"], "streaming": False}}
            (bot.storage / "config.yaml").write_text(config_text(model.base_url, agents))
            bot.start()
            await bot.wait_running()
            room_id = await alice.join(f"#bench:{homeserver.server_name}")
            await bob.join(room_id)
            await reply_times(bob, room_id, 2, timeout, "warm-up")
            quiet, _ = await reply_times(bob, room_id, quiet_n, timeout, "quiet")
            for n in range(ATTACK_PDFS):
                await send_pdf(alice, room_id, crafted, f"crafted-{n}.pdf")
            attack, late = await reply_times(bob, room_id, attack_n, timeout, "attack")
        finally:
            if bot.proc is not None:
                await stop(bot)
            for person in (alice, bob):
                if person is not None:
                    await person.close()
            await homeserver.stop()

    quiet_ms = statistics.median(quiet) * 1000
    attack_ms = statistics.median(attack) * 1000
    bound = ">=" if late > len(attack) // 2 else ""
    print(f"quiet   median {quiet_ms:8.0f} ms  (n={len(quiet)})")
    print(
        f"attack  median {bound}{attack_ms:8.0f} ms  (n={len(attack)}, {late} over {timeout:g} s)"
    )
    figures = [
        f"pdf_attack_reply_ms_quiet={quiet_ms:.0f}",
        f"pdf_attack_reply_ms_attack={bound}{attack_ms:.0f}",
        f"ratio={attack_ms / quiet_ms:.1f}",
    ]
    print(" ".join(figures))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", type=int, default=5)
    parser.add_argument("--attack", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=150.0)
    arguments = parser.parse_args()
    asyncio.run(main(arguments.quiet, arguments.attack, arguments.timeout))
