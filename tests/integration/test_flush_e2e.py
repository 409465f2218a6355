"""End to end: the background flush turns a conversation into memory, silently."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import sys
import threading
from pathlib import Path

import pytest

from mindroom.memory.files.markdown import parse_entries
from mindroom.memory.files.store import today
from tests.support.harness import (
    BotHarness,
    Human,
    answers,
    config_text,
    unique,
)
from tests.support.scripted_model import ScriptedModel, all_text, system_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

EXTRACTION_MARK = "You maintain the long-term memory"
# keyword-only search: these tests are about the flush, and a bot process loading the local
# embedder first delays its first reply by seconds of CPU on a busy machine
FLUSH = {
    "embedder": "none",
    "auto_flush": {"enabled": True, "idle_seconds": 0.5, "flush_interval_seconds": 60},
}


def is_extraction(request: dict) -> bool:
    return EXTRACTION_MARK in system_text(request)


def sister_facts(request: dict) -> str:
    if is_extraction(request):
        return "- The user's sister is called Maya" if "sister" in all_text(request) else "NO_REPLY"
    return "Nice to hear!"


def conversation(request: dict) -> str:
    """The conversation part of an extraction prompt (not what memory already holds)."""
    return all_text(request).split("Conversation:\n", 1)[-1]


def daily(storage: Path) -> Path:
    return storage / "agents" / "general" / "workspace" / "memory" / f"{today()}.md"


def flush_rows(storage: Path) -> list[dict]:
    """The flush table of the ledger, read as another process would."""
    with contextlib.closing(sqlite3.connect(storage / "mindroom_data" / "ledger.db")) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute("SELECT * FROM flush_sessions ORDER BY key")]


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

    async def flushed() -> bool:
        return not any(e.dirty or e.in_flight for e in await bot.bot.flush.entries())

    await wait_until(flushed)  # the flush has done all it will do for this conversation...
    await human.fence(room_id)  # ...and the human has seen everything posted until now

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

    async def clean() -> bool:
        return not any(e.dirty for e in await bot.bot.flush.entries())

    await wait_until(clean)

    assert not daily(bot.storage).exists()
    entry = (await bot.bot.flush.entries())[0]
    assert entry.cursor == 2  # the exchange was read, nothing was worth keeping


async def test_a_long_thread_is_compacted_without_waiting_for_the_flush_and_loses_no_fact(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = json.loads(
        config_text(
            model.base_url,
            {"general": {"rooms": [room]}},
            memory={
                "embedder": "none",  # keyword-only: the test is about compaction and the flush
                "auto_flush": {"enabled": True, "idle_seconds": 3600},
                "compaction": {"threshold": 0.8, "keep_recent_messages": 2},
            },
        )
    )
    config["models"]["default"]["context_tokens"] = 256  # about 1,000 characters
    room_id = await bot.start_in_room(json.dumps(config), room, human)
    release = threading.Event()  # extraction answers are held until the replies were seen

    def handler(request: dict) -> str:
        system = system_text(request)
        if EXTRACTION_MARK in system:
            release.wait(60)
            return (
                "- The user is planning a trip to Lisbon"
                if "Lisbon" in all_text(request)
                else "NO_REPLY"
            )
        if "Summarize the conversation" in system:
            return "SUMMARY: the user is planning a trip to Lisbon"
        return "Sounds good."

    model.set_handler(handler)
    try:
        root = await human.send(room_id, "I am planning a trip to Lisbon. " + "Details. " * 40)
        await human.wait_for_reply(room_id, root)
        for i in range(4):
            text = f"more thoughts {i}: " + "Blah. " * 40
            follow = await human.send(room_id, text, thread_root=root)
            await human.wait_for_reply(room_id, follow)  # never waits for an extraction
        extractions = [r for r in model.requests if is_extraction(r)]
        # the compaction asked for the flush, which is running (held) in the background
        await wait_until(lambda: any(is_extraction(r) for r in model.requests))
        assert not daily(bot.storage).exists()
    finally:
        release.set()
    await wait_until(lambda: daily(bot.storage).exists())

    kinds = [
        "extract"
        if is_extraction(r)
        else "summary"
        if "Summarize the conversation" in system_text(r)
        else "chat"
        for r in model.requests
    ]
    assert "summary" in kinds
    assert len(extractions) <= 1  # at most the one held extraction started before the replies
    after = [r for r, k in zip(model.requests, kinds, strict=True) if k == "chat"][-1]
    assert "SUMMARY: the user is planning a trip to Lisbon" in system_text(after)
    assert "Details. Details." not in all_text(after)  # the old messages themselves are gone
    extracted = [r for r in model.requests if is_extraction(r)]
    assert "I am planning a trip to Lisbon" in all_text(extracted[0])  # the compacted turns
    facts = parse_entries(daily(bot.storage).read_text(), "memory/x.md")
    assert [e.text for e in facts] == ["The user is planning a trip to Lisbon"]


async def test_memory_flush_run_by_the_cli_beside_the_running_bot_is_not_undone(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    quiet = {"auto_flush": {"enabled": True, "idle_seconds": 3600, "max_dirty_age_seconds": 3600}}
    config = config_text(model.base_url, {"general": {"rooms": [room]}}, memory=quiet)
    room_id = await bot.start_in_room(config, room, human)

    def family(request: dict) -> str:
        if not is_extraction(request):
            return "Nice to hear!"
        said = conversation(request)
        found = [
            f"- The user's {w} is called {n}"
            for w, n in (("sister", "Maya"), ("brother", "Tom"))
            if w in said
        ]
        return "\n".join(found) or "NO_REPLY"

    model.set_handler(family)
    told = await human.send(room_id, "my sister is called Maya")
    await human.wait_for_reply(room_id, told)
    # the bot marks the session once its reply is out (the reply can be seen a moment before)
    await wait_until(lambda: sum(r["dirty"] for r in flush_rows(bot.storage)) == 1)

    cli = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mindroom",
        "memory",
        "flush",
        "--config",
        str(bot.storage / "config.yaml"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await cli.communicate()
    assert cli.returncode == 0, out.decode()
    assert "1 new facts" in out.decode()

    # the bot goes on (a new thread marks its own session) and flushes what is due
    more = await human.send(room_id, "my brother is called Tom")
    await human.wait_for_reply(room_id, more)
    await wait_until(lambda: sum(r["dirty"] for r in flush_rows(bot.storage)) == 1)  # marked
    await bot.bot.flush.cycle(force=True)

    sister = [r for r in model.requests if is_extraction(r) and "sister" in conversation(r)]
    brother = [r for r in model.requests if is_extraction(r) and "brother" in conversation(r)]
    assert len(sister) == 1  # the CLI's flush stands: the bot never extracts it again
    assert len(brother) == 1  # positive control: the bot's own flush ran
    entries = parse_entries(daily(bot.storage).read_text(), "memory/x.md")
    assert sorted(e.text for e in entries) == [
        "The user's brother is called Tom",
        "The user's sister is called Maya",
    ]
    rows = flush_rows(bot.storage)
    assert [(r["dirty"], r["cursor"]) for r in rows] == [(0, 2), (0, 2)]


async def test_a_bot_with_a_reply_always_in_progress_still_flushes(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = config_text(model.base_url, {"general": {"rooms": [room]}}, memory=FLUSH)
    room_id = await bot.start_in_room(config, room, human)
    release = threading.Event()  # the model's answer to "hold" is held open until set

    def handler(request: dict) -> str:
        if not is_extraction(request) and "hold" in all_text(request):
            release.wait(60)
            return "Done holding."
        return sister_facts(request)

    model.set_handler(handler)
    try:
        told = await human.send(room_id, "my sister is called Maya")
        await human.wait_for_reply(room_id, told)
        held = await human.send(room_id, "hold this thread open")  # a turn that never ends
        await wait_until(lambda: any("hold" in all_text(r) for r in model.requests))

        await wait_until(lambda: daily(bot.storage).exists())

        # the held turn is still running: its reply has not been posted
        assert not any(answers(e, held) for e in human.messages(room_id))
    finally:
        release.set()
    await human.wait_for_reply(room_id, held)  # positive control: the held reply does land
    entries = parse_entries(daily(bot.storage).read_text(), "memory/x.md")
    assert [e.text for e in entries] == ["The user's sister is called Maya"]
