"""Messages sent while the bot was down are answered once it is back, once each: the catch-up
sync, its window, and what start-up resumes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
import time

import pytest

from mindroom.app.bot import Bot, BotOptions
from mindroom.config import parse_config
from tests.support.exactly_once import answers_to, echo, restart, start_process, wait_until_answered
from tests.support.harness import (
    BotHarness,
    BotProcess,
    Human,
    config_text,
    unique,
)
from tests.support.scripted_model import ScriptedModel, last_user_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


async def test_messages_sent_while_down_are_answered_once(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    model.set_handler(echo)
    room = unique("solo")
    await start_process(bot_process, config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await human.join(f"#{room}:localhost")
    await bot_process.stop(signal.SIGTERM)

    asked = await human.send(room_id, "did you miss me?")
    await restart(bot_process)
    await human.wait_for_reply(room_id, asked, timeout=30)
    await wait_until_answered(bot_process.storage, [asked])

    await bot_process.stop(signal.SIGTERM)  # and once more: nothing is answered twice
    await restart(bot_process)
    sentinel = await human.send(room_id, "sentinel")  # answered after anything owed before it
    await human.wait_for_reply(room_id, sentinel, timeout=30)
    await wait_until_answered(bot_process.storage, [sentinel])
    assert len(answers_to(human, room_id, asked)) == 1
    assert [last_user_text(r) for r in model.requests] == ["did you miss me?", "sentinel"]


async def test_messages_older_than_the_catch_up_window_are_skipped_with_a_log_line(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    window_s = 1.0
    room = unique("solo")
    config = json.loads(config_text(model.base_url, {"general": {"rooms": [room]}}))
    config["matrix"] = {"catch_up_seconds": window_s}
    await start_process(bot_process, json.dumps(config))
    room_id = await human.join(f"#{room}:localhost")
    await bot_process.stop(signal.SIGTERM)

    stale = await human.send(room_id, "too old by the time you are back")
    sent = await human.wait_for(lambda e: e.get("event_id") == stale)
    age_s = time.time() - sent["origin_server_ts"] / 1000
    await asyncio.sleep(max(0.0, window_s - age_s) + 0.1)  # until it is older than the window
    await restart(bot_process)
    await wait_until_answered(bot_process.storage, [stale], status="skipped")

    log = (bot_process.storage / "bot.log").read_text()
    assert f"skipping {stale}" in log
    assert "beyond catch_up_seconds" in log
    assert answers_to(human, room_id, stale) == []  # a decision, recorded: it is never answered
    assert model.requests == []


async def test_a_message_claimed_by_the_catch_up_during_start_up_is_not_resumed_too(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    """Start-up holds (opening memories) until the catch-up sync has claimed the message sent
    while the bot was down: the unfinished replies of the previous run must not include it."""
    model.set_handler(echo)
    room = unique("solo")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    await bot.stop()
    asked = await human.send(room_id, "sent while you were down")

    restarted = Bot(
        parse_config((bot.storage / "config.yaml").read_text(), "config.yaml"),
        BotOptions(bot.storage, bot.homeserver.url, bot.homeserver.shared_secret),
    )
    bot.bot = restarted
    open_memory = restarted.memories.for_agent
    ledger = bot.storage / "mindroom_data" / "ledger.db"

    def open_once_claimed(agent: str, requester: str | None = None):  # noqa: ANN202
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # (in a worker thread: start-up awaits it)
            with contextlib.closing(sqlite3.connect(ledger, timeout=10)) as db:
                if db.execute("SELECT 1 FROM handled WHERE event_id = ?", (asked,)).fetchone():
                    break
            time.sleep(0.05)
        else:
            raise AssertionError("the catch-up sync never claimed the message")
        return open_memory(agent, requester)

    restarted.memories.for_agent = open_once_claimed  # type: ignore[method-assign]
    bot.credentials.install(bot.storage)
    await restarted.start()

    await human.wait_for_reply(room_id, asked, timeout=30)
    sentinel = await human.send(room_id, "sentinel")
    await human.wait_for_reply(room_id, sentinel, timeout=30)
    await wait_until_answered(bot.storage, [asked, sentinel])
    assert [last_user_text(r) for r in model.requests] == [
        "sent while you were down",
        "sentinel",
    ]
    assert len(answers_to(human, room_id, asked)) == 1
