"""End to end: the mem0 backend where it meets a hot reload of config.yaml.

A reload while a mem0 turn (or its extraction) runs: the turn finishes as it started (its reply
posted, its tools on the memory it began with, nothing logged as an error), a session's
extraction goes to the memory the agent uses when that extraction starts, and the next turn
uses the new settings (backend, extraction model, embedder). The registry closes no mem0
engine on a reload: an engine per embedder model stays open until the bot stops, so a turn
still holding one is never cut off (see :mod:`mindroom.memory.registry`).

The privacy side of mem0 (a shared agent and a private companion) is
tests/integration/test_mem0_privacy.py. Real Synapse, real mem0 with a local Chroma, the scripted
model (see tests/integration/test_mem0_e2e.py).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from typing import Any

import pytest

from mindroom.memory.files.markdown import parse_entries
from mindroom.memory.files.store import FileMemory, today
from mindroom.memory.mem0.engine import mem0_dir, mem0_engine
from tests.integration.test_mem0_e2e import (
    FACTS,
    MEM0,
    chat,
    chats,
    flushed,
    is_file_extraction,
    is_mem0,
    new_messages,
    stored,
)
from tests.support.harness import BotHarness, Human, config_text, unique
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall, last_user_text, system_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


async def reload(bot: BotHarness, doc: dict[str, Any]) -> None:
    """Write ``doc`` as config.yaml and wait until the running bot has applied it."""
    assert bot.bot is not None
    reloader = bot.bot.reloader
    assert reloader is not None
    applied = reloader.applied
    bot.write_config(json.dumps(doc, indent=2))

    async def done() -> bool:
        return reloader.applied > applied

    await wait_until(done, timeout=30)
    assert reloader.error is None
    assert reloader.problems == []


def mem0_records(bot: BotHarness, scope_id: str) -> list[str]:
    """What mem0 holds for ``scope_id`` (whatever backend the agent uses now)."""
    assert bot.bot is not None
    config = bot.bot.config
    engine = mem0_engine(
        config, mem0_dir(bot.storage), bot.bot.memories.embedder(config.memory_embedder)
    )
    return [r.text for r in engine.records(scope_id)]


def errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What mindroom, mem0 or Chroma logged as an error (not leftovers of earlier tests)."""
    ours = ("mindroom", "mem0", "chromadb")
    assert any(r.name == "mindroom.app.reload" for r in caplog.records)  # the capture works
    return [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.ERROR and r.name.split(".")[0] in ours
    ]


async def test_a_mem0_agent_switched_to_files_mid_turn_finishes_it_and_loses_nothing(
    bot: BotHarness, human: Human, model: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    """A session's extraction belongs to the backend in force when it starts: one running at
    the switch finishes into mem0 (which keeps what it has: export and import move it), and a
    turn still running then finishes as it started (its tools on mem0), its words extracted
    afterwards by the files' flush, from where mem0 stopped: nothing lost, nothing twice."""
    room = unique("m0rf")
    memory = {"backend": "mem0", "auto_flush": {"enabled": True, "idle_seconds": 0.2}}
    config = config_text(model.base_url, {"general": {"rooms": [room]}}, memory=memory)
    extracting, answering = threading.Event(), threading.Event()
    extracted, answered = threading.Event(), threading.Event()  # set: go on

    def handler(request: dict) -> Reply | str:
        if is_mem0(request) and "blue" in new_messages(request):
            extracting.set()
            extracted.wait(60)
        elif not is_file_extraction(request) and "vim" in last_user_text(request):
            if request["messages"][-1]["role"] == "tool":
                return "Noted."
            answering.set()
            answered.wait(60)
            return Reply(tool_calls=[ToolCall("search_memories", {"query": "favorite color"})])
        return chat(request)

    model.set_handler(handler)
    room_id = await bot.start_in_room(config, room, human)
    assert bot.bot is not None
    caplog.set_level(logging.INFO)
    try:
        told = await human.send(room_id, "my favorite color is blue")
        await human.wait_for_reply(room_id, told)
        await wait_until(extracting.is_set, timeout=30)
        asked = await human.send(room_id, "and my editor is vim", thread_root=told)  # same session
        await wait_until(answering.is_set, timeout=30)
        doc = json.loads(config)
        doc["agents"]["general"]["memory_backend"] = "file"
        await reload(bot, doc)
        extracted.set()
        await wait_until(
            lambda: asyncio.to_thread(lambda: bool(mem0_records(bot, "agent_general")))
        )
    finally:
        extracted.set()
        answered.set()
    reply = await human.wait_for_reply(room_id, asked)
    assert reply["content"]["body"] == "Noted."
    searched = [r for r in chats(model) if r["messages"][-1]["role"] == "tool"]
    assert FACTS["blue"] in str(searched[-1]["messages"][-1]["content"])  # on mem0, as it began

    daily = bot.storage / "agents" / "general" / "workspace" / "memory" / f"{today()}.md"
    await wait_until(lambda: asyncio.to_thread(daily.exists))
    await wait_until(lambda: flushed(bot))
    assert [e.text for e in parse_entries(daily.read_text(), "memory/x.md")] == [FACTS["vim"]]
    file_prompts = [last_user_text(r) for r in model.requests if is_file_extraction(r)]
    assert file_prompts
    assert all("blue" not in p for p in file_prompts)  # mem0 had it: not extracted twice
    assert not any(is_mem0(r) and "vim" in new_messages(r) for r in model.requests)
    assert mem0_records(bot, "agent_general") == [FACTS["blue"]]  # kept, not lost

    again = await human.send(room_id, "is my editor vim?")  # a new thread: the new backend
    await human.wait_for_reply(room_id, again)
    turn = chats(model)[-1]
    assert FACTS["vim"] in system_text(turn)
    assert "[memory/" in system_text(turn)  # a file's recall block, not mem0's
    assert isinstance(await asyncio.to_thread(bot.bot.memories.for_agent, "general"), FileMemory)
    assert errors(caplog) == []


async def _holds(bot: BotHarness, agent: str, fact: str, requester: str | None = None) -> bool:
    return fact in await stored(bot, agent, requester)


async def test_a_new_extraction_model_applies_to_the_next_extraction_not_the_running_one(
    bot: BotHarness, human: Human, model: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    room = unique("m0rl")
    config = config_text(model.base_url, {"general": {"rooms": [room]}}, memory=MEM0)
    held, release = threading.Event(), threading.Event()

    def handler(request: dict) -> Reply | str:
        if (
            is_mem0(request)
            and request.get("model") == "scripted"
            and "blue" in new_messages(request)
        ):
            held.set()
            release.wait(60)
        return chat(request)

    model.set_handler(handler)
    room_id = await bot.start_in_room(config, room, human)
    caplog.set_level(logging.INFO)
    told = await human.send(room_id, "my favorite color is blue")
    await human.wait_for_reply(room_id, told)
    try:
        await wait_until(held.is_set, timeout=30)  # the extraction is in mem0's model call
        doc = json.loads(config)
        doc["memory"]["llm"] = {
            "provider": "openai",
            "config": {"model": "extractor-b", "base_url": model.base_url, "api_key": "test"},
        }
        await reload(bot, doc)
        other = await human.send(room_id, "my editor is vim")  # answered meanwhile
        await human.wait_for_reply(room_id, other)
    finally:
        release.set()

    await wait_until(lambda: _holds(bot, "general", FACTS["vim"]))
    await wait_until(lambda: flushed(bot))
    assert sorted(await stored(bot, "general")) == sorted([FACTS["blue"], FACTS["vim"]])
    by_model = {
        word: [r["model"] for r in model.requests if is_mem0(r) and word in new_messages(r)]
        for word in ("blue", "vim")
    }
    assert by_model == {"blue": ["scripted"], "vim": ["extractor-b"]}
    assert errors(caplog) == []


@pytest.mark.parametrize("change", ["server", "model"])
async def test_a_new_embedder_applies_to_the_next_turn_and_the_running_turns_extraction(
    bot: BotHarness,
    human: Human,
    model: ScriptedModel,
    change: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The same embedding model on another server: the same memories, embedded there from now
    on. Another model: another collection (mem0 never mixes vectors of two models), so what
    the old model embedded is not recalled (docs/memory.md: export and import to move it), and the
    running turn's words land in the new one, where the agent now reads."""
    room = unique("m0re")
    with ScriptedModel() as second:
        embedder = {"provider": "openai", "config": {"model": "embed-a", "api_key": "test"}}
        embedder["config"]["base_url"] = model.base_url
        memory = {**MEM0, "embedder": embedder}
        config = config_text(model.base_url, {"general": {"rooms": [room]}}, memory=memory)
        held, release = threading.Event(), threading.Event()

        def handler(request: dict) -> Reply | str:
            if not is_mem0(request) and "vim" in last_user_text(request):
                held.set()  # the turn of "my editor is vim" waits for the test
                release.wait(60)
            return chat(request)

        model.set_handler(handler)
        room_id = await bot.start_in_room(config, room, human)
        caplog.set_level(logging.INFO)
        told = await human.send(room_id, "my favorite color is blue")
        await human.wait_for_reply(room_id, told)
        await wait_until(lambda: _holds(bot, "general", FACTS["blue"]))
        await wait_until(lambda: flushed(bot))
        asked = await human.send(room_id, "my editor is vim")
        try:
            await wait_until(held.is_set, timeout=30)
            doc = json.loads(config)
            new = doc["memory"]["embedder"]["config"]
            new["base_url"] = second.base_url
            if change == "model":
                new["model"] = "embed-b"
            await reload(bot, doc)
            before = len(model.embedding_requests)
        finally:
            release.set()
        reply = await human.wait_for_reply(room_id, asked)
        assert reply["content"]["body"] == "Noted."
        await wait_until(lambda: _holds(bot, "general", FACTS["vim"]))
        await wait_until(lambda: flushed(bot))

        again = await human.send(room_id, "what is my favorite color?")
        await human.wait_for_reply(room_id, again)
        recalled = system_text(chats(model)[-1])
        assert second.embedding_requests  # the new server embeds...
        assert len(model.embedding_requests) == before  # ...the old one no more
    wanted = [second.embedding_requests[0]["model"]]
    assert wanted == ["embed-b" if change == "model" else "embed-a"]
    if change == "server":
        assert FACTS["blue"] in recalled
        assert sorted(await stored(bot, "general")) == sorted([FACTS["blue"], FACTS["vim"]])
    else:
        assert FACTS["blue"] not in recalled
        assert await stored(bot, "general") == [FACTS["vim"]]
    assert errors(caplog) == []
