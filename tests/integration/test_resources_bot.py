"""A real bot process under a low descriptor limit answers many people talking to a private
companion."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest

from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from tests.integration.test_resources import BOT_FD_LIMIT
from tests.support.harness import BotProcess, Human, config_text, unique
from tests.support.scripted_model import ScriptedModel, last_user_text


@pytest.mark.synapse
@pytest.mark.timeout(600)
@pytest.mark.asyncio
async def test_the_bot_answers_40_people_under_a_160_descriptor_limit(
    bot_process: BotProcess, human: Human, model: ScriptedModel, synapse: EmbeddedHomeserver
) -> None:
    room = unique("mind")
    bot_process.storage.mkdir(parents=True, exist_ok=True)
    (bot_process.storage / "config.yaml").write_text(
        config_text(model.base_url, {"mind": {"rooms": [room], "private": {"per": "user"}}})
    )
    model.set_handler(lambda request: "hello " + last_user_text(request).split()[-1])
    bot_process.command_prefix = ("prlimit", f"--nofile={BOT_FD_LIMIT}:{BOT_FD_LIMIT}")
    bot_process.start()
    await bot_process.wait_running()
    assert bot_process.proc is not None
    limits = await asyncio.to_thread(Path(f"/proc/{bot_process.proc.pid}/limits").read_text)
    assert re.search(rf"Max open files\s+{BOT_FD_LIMIT}\s+{BOT_FD_LIMIT}", limits), limits

    room_id = await human.join(f"#{room}:localhost")
    people = [human]
    bot_fds: list[int] = []  # the bot's open descriptors after each group was answered
    try:
        for _ in range(39):
            people.append(await Human.create(synapse, sync=False))  # the first one watches
        await asyncio.gather(*(p.join(room_id) for p in people[1:]))
        replies = []
        for batch in range(0, len(people), 5):  # a few people at a time, like a busy day
            group = list(enumerate(people))[batch : batch + 5]
            asked = [await p.send(room_id, f"hi, I am number{i}") for i, p in group]
            for (i, _), event_id in zip(group, asked, strict=True):
                reply = await human.wait_for_reply(room_id, event_id, timeout=60)
                replies.append((i, reply["content"]["body"], reply["content"]["msgtype"]))
            bot_fds.append(len(os.listdir(f"/proc/{bot_process.proc.pid}/fd")))
    finally:
        await asyncio.gather(*(p.close() for p in people[1:]))

    assert replies == [(i, f"hello number{i}", "m.text") for i in range(40)]
    assert len(list((bot_process.storage / "private_instances").iterdir())) == 40
    print(f"bot descriptors after each group of 5 people: {bot_fds}")
    assert max(bot_fds) < BOT_FD_LIMIT
    log = (bot_process.storage / "bot.log").read_text()
    assert "ran out of open files" not in log
    assert "unable to open database file" not in log
