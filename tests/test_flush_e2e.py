"""End to end: the background flush turns a conversation into memory, silently."""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path

import pytest

from mindroom.memory.markdown import parse_entries
from mindroom.memory.store import today
from tests.harness import BotHarness, BotProcess, Human, config_text, relation, unique
from tests.scripted_model import Reply, ScriptedModel, all_text, system_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

EXTRACTION_MARK = "You maintain the long-term memory"
FLUSH = {"auto_flush": {"enabled": True, "idle_seconds": 0.5, "flush_interval_seconds": 60}}


def is_extraction(request: dict) -> bool:
    return EXTRACTION_MARK in system_text(request)


def sister_facts(request: dict) -> str:
    if is_extraction(request):
        return "- The user's sister is called Maya" if "sister" in all_text(request) else "NO_REPLY"
    return "Nice to hear!"


def daily(storage: Path) -> Path:
    return storage / "agents" / "general" / "workspace" / "memory" / f"{today()}.md"


async def wait_until(check, timeout: float = 20.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.1)


async def test_a_finished_conversation_becomes_memory_without_a_word_in_the_room(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = config_text(model.base_url, {"general": {"rooms": [room]}}, memory=FLUSH)
    room_id = await bot.start_in_room(config, room, human)
    model.set_handler(sister_facts)
    general = bot.bot.agents["general"].user_id

    told = await human.send(room_id, "my sister is called Maya")
    await human.wait_for_reply(room_id, told)
    await wait_until(lambda: daily(bot.storage).exists())
    await human.quiet(1.0)

    entries = parse_entries(daily(bot.storage).read_text(), "memory/x.md")
    assert [e.text for e in entries] == ["The user's sister is called Maya"]
    assert len(human.posted(room_id, general)) == 1  # only the reply: the flush said nothing
    assert any(is_extraction(r) for r in model.requests)

    asked = await human.send(room_id, "who is my sister?")  # a new thread
    await human.wait_for_reply(room_id, asked)
    chat = [r for r in model.requests if not is_extraction(r)]
    assert "The user's sister is called Maya" in system_text(chat[-1])


async def test_no_reply_writes_nothing(bot: BotHarness, human: Human, model: ScriptedModel) -> None:
    room = unique("solo")
    config = config_text(model.base_url, {"general": {"rooms": [room]}}, memory=FLUSH)
    room_id = await bot.start_in_room(config, room, human)
    model.set_handler(sister_facts)

    said = await human.send(room_id, "nice weather today")
    await human.wait_for_reply(room_id, said)
    await wait_until(lambda: any(is_extraction(r) for r in model.requests))
    await wait_until(lambda: not any(e.dirty for e in bot.bot.flush.state.snapshot()))

    assert not daily(bot.storage).exists()
    entry = bot.bot.flush.state.snapshot()[0]
    assert entry.cursor == 2  # the exchange was read, nothing was worth keeping


async def test_killed_during_extraction_the_session_is_flushed_once_after_restart(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    bot_process.storage.mkdir(parents=True)
    (bot_process.storage / "config.yaml").write_text(
        config_text(model.base_url, {"general": {"rooms": [room]}}, memory=FLUSH)
    )
    calls = {"extractions": 0}

    def slow_first_extraction(request: dict) -> Reply | str:
        if is_extraction(request):
            calls["extractions"] += 1
            if calls["extractions"] == 1:
                return Reply(text="- The user's sister is called Maya", delay=30)
        return sister_facts(request)

    model.set_handler(slow_first_extraction)
    bot_process.mark_log()
    bot_process.start()
    await bot_process.wait_running()
    room_id = await human.join(f"#{room}:localhost")
    told = await human.send(room_id, "my sister is called Maya")
    await human.wait_for_reply(room_id, told)
    await wait_until(lambda: calls["extractions"] == 1)
    await bot_process.stop(signal.SIGKILL)
    state = json.loads(
        (bot_process.storage / "mindroom_data" / "memory_flush_state.json").read_text()
    )
    assert state["entries"][0]["in_flight"] is True  # the crash left it in flight

    bot_process.mark_log()
    bot_process.start()
    await bot_process.wait_running()
    await wait_until(lambda: daily(bot_process.storage).exists(), timeout=30)
    await asyncio.sleep(1.5)
    await bot_process.stop(signal.SIGTERM)

    entries = parse_entries(daily(bot_process.storage).read_text(), "memory/x.md")
    assert [e.text for e in entries] == ["The user's sister is called Maya"]
    assert calls["extractions"] == 2
    posted = [
        e
        for e in human.messages(room_id)
        if e["sender"] != human.user_id and relation(e).get("rel_type") != "m.replace"
    ]
    assert len(posted) == 1


async def test_a_thread_past_its_budget_is_flushed_then_compacted_and_keeps_answering(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = json.loads(
        config_text(
            model.base_url,
            {"general": {"rooms": [room]}},
            memory={
                "auto_flush": {"enabled": True, "idle_seconds": 3600},
                "compaction": {"threshold": 0.8, "keep_recent_messages": 2},
            },
        )
    )
    config["models"]["default"]["context_tokens"] = 256  # about 1,000 characters
    room_id = await bot.start_in_room(json.dumps(config), room, human)

    def handler(request: dict) -> str:
        system = system_text(request)
        if EXTRACTION_MARK in system:
            return (
                "- The user is planning a trip to Lisbon"
                if "Lisbon" in all_text(request)
                else "NO_REPLY"
            )
        if "Summarize the conversation" in system:
            return "SUMMARY: the user is planning a trip to Lisbon"
        return "Sounds good."

    model.set_handler(handler)
    root = await human.send(room_id, "I am planning a trip to Lisbon. " + "Details. " * 40)
    await human.wait_for_reply(room_id, root)
    for i in range(4):
        follow = await human.send(room_id, f"more thoughts {i}: " + "Blah. " * 40, thread_root=root)
        await human.wait_for_reply(room_id, follow)

    kinds = [
        "extract"
        if is_extraction(r)
        else "summary"
        if "Summarize the conversation" in system_text(r)
        else "chat"
        for r in model.requests
    ]
    assert "summary" in kinds
    assert kinds.index("extract") < kinds.index("summary")  # memory first, then compaction
    after = [r for r, k in zip(model.requests, kinds, strict=True) if k == "chat"][-1]
    assert "SUMMARY: the user is planning a trip to Lisbon" in system_text(after)
    assert "Details. Details." not in all_text(after)  # the old messages themselves are gone
    facts = parse_entries(daily(bot.storage).read_text(), "memory/x.md")
    assert [e.text for e in facts] == ["The user is planning a trip to Lisbon"]
