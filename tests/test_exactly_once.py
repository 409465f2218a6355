"""Exactly-once replies across restarts: kill -9, downtime, the catch-up window."""

from __future__ import annotations

import asyncio
import json
import signal

import pytest

from mindroom.matrix.reply import ReplyWriter
from tests.harness import BotHarness, BotProcess, Human, config_text, relation, unique
from tests.scripted_model import Reply, ScriptedModel

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
    await human.quiet(3.0)
    assert reply["content"]["body"] == "answered after the crash"
    assert len(answers_to(human, room_id, asked)) == 1


async def test_messages_sent_while_down_are_answered_once(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    await start_process(bot_process, config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await human.join(f"#{room}:localhost")
    await bot_process.stop(signal.SIGTERM)

    asked = await human.send(room_id, "did you miss me?")
    await restart(bot_process)
    await human.wait_for_reply(room_id, asked, timeout=30)

    await bot_process.stop(signal.SIGTERM)  # and once more: nothing is answered twice
    await restart(bot_process)
    await human.quiet(3.0)
    assert len(answers_to(human, room_id, asked)) == 1
    assert len(model.requests) == 1


async def test_messages_older_than_the_catch_up_window_are_skipped_with_a_log_line(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = json.loads(config_text(model.base_url, {"general": {"rooms": [room]}}))
    config["matrix"] = {"catch_up_seconds": 2}
    await start_process(bot_process, json.dumps(config))
    room_id = await human.join(f"#{room}:localhost")
    await bot_process.stop(signal.SIGTERM)

    stale = await human.send(room_id, "too old by the time you are back")
    await asyncio.sleep(3.0)
    await restart(bot_process)
    fresh = await human.send(room_id, "and this one is new")
    await human.wait_for_reply(room_id, fresh, timeout=30)
    await human.quiet(2.0)

    assert answers_to(human, room_id, stale) == []
    log = (bot_process.storage / "bot.log").read_text()
    assert f"skipping {stale}" in log
    assert "beyond catch_up_seconds" in log


async def test_republishing_an_answer_with_the_same_key_posts_nothing_new(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    await bot.start(config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await human.join(f"#{room}:localhost")
    account = bot.bot.agents["general"]
    root = await human.send(room_id, "root")

    first = ReplyWriter(account, room_id, thread_root=root, reply_to=root, txn_key="k1")
    await first.finish("the one answer")
    again = ReplyWriter(account, room_id, thread_root=root, reply_to=root, txn_key="k1")
    await again.finish("the one answer")
    await human.wait_for(lambda e: e.get("event_id") == first.event_ids[0])
    await human.quiet(1.0)

    assert again.event_ids == first.event_ids  # the homeserver deduplicated the retry
    bodies = [e["content"]["body"] for e in human.messages(room_id, account.user_id)]
    assert bodies.count("the one answer") == 1


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
    await human.quiet(2.0)

    assert all(len(answers_to(human, room_id, event_id)) == 1 for event_id in sent)
    assert "filling a gap" in (bot_process.storage / "bot.log").read_text()
