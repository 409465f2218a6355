"""Files are read with bounded work: a PDF is read by a child process with page,
character and time limits, a few at a time, so a crafted PDF can neither stall the bot nor be
read forever, and the person is told when their file was cut or refused.

Real Synapse, the real bot in this process (its reading processes are this process's
children, observed in /proc), the scripted model. The default page limit (50) is used; the
time limit (``media.read_seconds``) is 10 s instead of the default 20 s: a crafted PDF keeps a
core busy until it is refused, while a normal PDF of 60 pages is read in well under a second.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.integration.test_media import dm_with, send_file
from tests.support.harness import BotHarness, Human, config_text, unique
from tests.support.pdfs import pages_pdf, slow_pdf
from tests.support.scripted_model import ScriptedModel, all_text, last_user_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

WORKER = b"mindroom.pipeline.file_text"


def reading_processes() -> list[int]:
    """The PIDs of this process's children that are reading a file now."""
    found = []
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        state, parent = stat.rsplit(")", 1)[1].split()[:2]
        if int(parent) == me and WORKER in command and state != "Z":
            found.append(int(entry.name))
    return found


def notice_of(event: dict) -> str:
    assert event["content"]["msgtype"] == "m.notice", event
    return str(event["content"]["body"])


async def test_a_slow_pdf_is_refused_and_a_long_one_cut_each_with_a_notice_saying_why(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room_id = await dm_with(bot, human, model, read_seconds=10)
    slow = await send_file(
        human, room_id, "m.file", slow_pdf(pages=40), "application/pdf", "crafted.pdf"
    )
    texts = [f"page marker {n:03d}" for n in range(1, 61)]
    long = await send_file(
        human,
        room_id,
        "m.file",
        pages_pdf(texts),
        "application/pdf",
        "long.pdf",
        caption="summarize",
    )
    cut = await human.wait_for_reply(room_id, long, timeout=30)
    answered = await human.wait_for(
        lambda e: (
            e.get("event_id") != cut["event_id"]
            and e["content"].get("msgtype") == "m.text"
            and e.get("sender") != human.user_id
        ),
        timeout=30,
    )
    long_request = next(all_text(r) for r in model.requests if "summarize" in all_text(r))
    refused = await human.wait_for_reply(room_id, slow, timeout=60)
    normal = await send_file(
        human,
        room_id,
        "m.file",
        pages_pdf(["Invoice total 4711 EUR"]),
        "application/pdf",
        "invoice.pdf",
    )
    control = await human.wait_for_reply(room_id, normal, timeout=30)

    assert "has 60 pages: I read only the first 50" in notice_of(cut)
    assert "page marker 050" in long_request  # the first part is used ...
    assert "page marker 051" not in long_request  # ... and nothing after it
    assert "only its first 50 of 60 pages" in long_request  # the model is told too
    assert answered["content"]["body"].startswith("echo:")
    assert "I could not read **crafted.pdf**" in notice_of(refused)
    assert "took longer than 10 seconds" in notice_of(refused)
    # the control: a normal PDF is read whole, answered, with no notice
    assert control["content"]["msgtype"] == "m.text"
    assert "Invoice total 4711 EUR" in all_text(model.requests[-1])
    assert not reading_processes()  # the killed reader is gone


async def test_another_person_is_answered_while_crafted_pdfs_are_being_read(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    room = unique("lobby")
    agents = {"general": {"rooms": [room], "streaming": False}}
    # six crafted PDFs, two read at once for 10 s each: readers run for 30 s, a wide margin
    # for Bob's answer to come while they do
    text = config_text(model.base_url, agents, media={"read_seconds": 10})
    room_id = await bot.start_in_room(text, room, human)
    bob = await Human.create(synapse)
    try:
        await bob.join(room_id)
        crafted = slow_pdf(pages=40)
        sent = [
            await send_file(human, room_id, "m.file", crafted, "application/pdf", f"c{n}.pdf")
            for n in range(6)
        ]
        await wait_until(lambda: len(reading_processes()) > 0, timeout=30)
        asked = await bob.send(room_id, "what is on the agenda today?")
        reply = await bob.wait_for_reply(room_id, asked, timeout=30)
        still_reading = reading_processes()
        # the control: the crafted PDFs were really being read, and each is refused in time
        first = await human.wait_for_reply(room_id, sent[0], timeout=60)
    finally:
        await bob.close()

    assert reply["content"]["body"].endswith(": what is on the agenda today?")
    assert still_reading, "the reply came only after the crafted PDFs were read"
    assert 1 <= len(still_reading) <= 2  # at most two at once; the others queue
    assert "took longer than 10 seconds" in notice_of(first)
