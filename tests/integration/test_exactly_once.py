"""Exactly-once replies across restarts: kill -9, downtime, the catch-up window."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sqlite3
import time
from pathlib import Path

import pytest

from mindroom.adapters.matrix.reply import ReplyWriter
from mindroom.app.bot import Bot, BotOptions
from mindroom.config import parse_config
from tests.support.harness import (
    BotHarness,
    BotProcess,
    Human,
    config_text,
    relation,
    settle,
    unique,
)
from tests.support.scripted_model import Reply, ScriptedModel, last_user_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


def answers_to(human: Human, room_id: str, event_id: str) -> list[dict]:
    """Messages (not edits) that answer ``event_id``."""
    return [
        e
        for e in human.messages(room_id)
        if e["sender"] != human.user_id
        and relation(e).get("rel_type") != "m.replace"
        and relation(e).get("m.in_reply_to", {}).get("event_id") == event_id
    ]


async def start_process(bot_process: BotProcess, config: str) -> None:
    bot_process.storage.mkdir(parents=True, exist_ok=True)
    (bot_process.storage / "config.yaml").write_text(config)
    await restart(bot_process)


async def restart(bot_process: BotProcess) -> None:
    bot_process.mark_log()
    bot_process.start()
    await bot_process.wait_running()


async def wait_until_answered(
    storage: Path, event_ids: list[str], status: str = "done", timeout: float = 30.0
) -> None:
    """Poll the bot's ledger until every one of ``event_ids`` has ``status`` (default: done)."""
    path = storage / "mindroom_data" / "ledger.db"
    marks = ",".join("?" * len(event_ids))

    def all_marked() -> bool:
        with contextlib.closing(sqlite3.connect(path, timeout=10)) as db:
            count = db.execute(
                f"SELECT COUNT(*) FROM handled WHERE status = ? AND event_id IN ({marks})",
                [status, *event_ids],
            ).fetchone()[0]
        return count == len(event_ids)

    await wait_until(all_marked, f"all {len(event_ids)} events marked {status}", timeout)


def echo(request: dict) -> str:
    """The scripted model answers each message with a line naming it."""
    return f"answer to: {last_user_text(request)}"


async def test_kill_9_between_receipt_and_reply_answers_once_after_restart(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    await start_process(bot_process, config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await human.join(f"#{room}:localhost")
    model.push(Reply(text="this answer never arrives", delay=30))
    model.push("answered after the crash")

    asked = await human.send(room_id, "please answer exactly once")
    await asyncio.to_thread(model.wait_for_requests, 1, 20)  # received, claimed, not answered
    await bot_process.stop(signal.SIGKILL)
    await restart(bot_process)

    reply = await human.wait_for_reply(room_id, asked, timeout=30)
    model.push("and the next one")
    sentinel = await human.send(room_id, "answered after everything before it")
    await human.wait_for_reply(room_id, sentinel, timeout=30)
    await wait_until_answered(bot_process.storage, [asked, sentinel])
    assert reply["content"]["body"] == "answered after the crash"
    assert len(answers_to(human, room_id, asked)) == 1


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


async def test_republishing_an_answer_with_the_same_key_posts_nothing_new(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    await bot.start(config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await human.join(f"#{room}:localhost")
    account = bot.bot.agents["general"]
    root = await human.send(room_id, "root", msgtype="m.notice")  # the bot answers no notice

    first = ReplyWriter(account, room_id, thread_root=root, reply_to=root, agent="general")
    await first.finish("the one answer")
    again = ReplyWriter(account, room_id, thread_root=root, reply_to=root, agent="general")
    await again.finish("the one answer")
    await human.wait_for(lambda e: e.get("event_id") == first.event_ids[0])
    await bot.settle(human, room_id)  # positive control: the room's events were all seen

    assert again.event_ids == first.event_ids  # the homeserver deduplicated the retry
    bodies = [e["content"]["body"] for e in human.messages(room_id, account.user_id)]
    assert bodies.count("the one answer") == 1


@pytest.mark.timeout(300)  # many replies; slow on a loaded machine
async def test_a_backlog_larger_than_one_sync_is_answered_in_full(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    await start_process(bot_process, config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await human.join(f"#{room}:localhost")
    await bot_process.stop(signal.SIGTERM)

    # more than the 50 events one sync returns: the rest must be fetched, not skipped
    sent = [await human.send(room_id, f"backlog {i}") for i in range(70)]
    await restart(bot_process)
    for event_id in sent:
        await human.wait_for_reply(room_id, event_id, timeout=90)
    await settle(human, room_id, bot_process.storage)

    assert all(len(answers_to(human, room_id, event_id)) == 1 for event_id in sent)
    assert "filling a gap" in (bot_process.storage / "bot.log").read_text()


@pytest.mark.timeout(300)  # many replies; slow on a loaded machine
async def test_messages_sent_while_killed_are_all_answered_exactly_once_every_round(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    rounds, per_round = 3, 3  # each round is a kill -9 and a restart, the same scenario again
    model.set_handler(echo)
    room = unique("solo")
    await start_process(bot_process, config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await human.join(f"#{room}:localhost")
    warmup = await human.send(room_id, "warm up")  # the bot has synced past the join
    await human.wait_for_reply(room_id, warmup, timeout=30)
    await wait_until_answered(bot_process.storage, [warmup])

    asked: list[str] = []
    for round_no in range(rounds):
        await bot_process.stop(signal.SIGKILL)
        batch = [await human.send(room_id, f"round {round_no} msg {i}") for i in range(per_round)]
        await restart(bot_process)
        for event_id in batch:
            await human.wait_for_reply(room_id, event_id, timeout=30)
        # killed only once recorded as answered: a reply killed before that is resumed (and
        # asks the model again, posting nothing new), which the count below would not allow
        await wait_until_answered(bot_process.storage, batch)
        asked += batch

    # a last message answered after everything above proves the bot handled the backlog
    sentinel = await human.send(room_id, "sentinel")
    await human.wait_for_reply(room_id, sentinel, timeout=30)
    answered = {event_id: len(answers_to(human, room_id, event_id)) for event_id in asked}
    assert answered == dict.fromkeys(asked, 1)
    questions = [last_user_text(request) for request in model.requests]
    assert len(questions) == len(asked) + 2, "\n".join(questions)  # + warm up and sentinel


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
