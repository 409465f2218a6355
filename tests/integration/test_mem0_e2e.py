"""End to end: agents on the mem0 backend in the running bot, over a real Synapse.

Real mem0 with a local Chroma and the local embedder; the one stand-in is the scripted model,
which answers the chat turns and mem0's own extraction prompt. mem0 keeps its behaviour: it
recalls by meaning before each answer and extracts after every turn, silently, whatever
``memory.auto_flush.enabled`` says (that switch is the file backend's).
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading

import pytest
from nio import RoomCreateResponse

from mindroom.memory.files.markdown import parse_entries
from mindroom.memory.files.store import FileMemory, today
from mindroom.memory.mem0 import Mem0Memory
from tests.support.harness import BotHarness, Human, config_text, joined, unique
from tests.support.scripted_model import Reply, ScriptedModel, last_user_text, system_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

MEM0_MARK = "You are a Memory Extractor"
FILE_MARK = "You maintain the long-term memory"
# mem0 on, the file backend's flush off: mem0 extracts anyway, at once
MEM0 = {"backend": "mem0", "auto_flush": {"enabled": False}}

FACTS = {  # a word said -> the memory mem0's model makes of it
    "blue": "The user's favorite color is blue",
    "green": "The user's favorite color is green",
    "release": "The release is on Friday",
    "vim": "The user's editor is vim",
    "Tom": "The user's brother is called Tom",
}


def is_mem0(request: dict) -> bool:
    return MEM0_MARK in system_text(request)


def is_file_extraction(request: dict) -> bool:
    return FILE_MARK in system_text(request)


def new_messages(request: dict) -> str:
    """The conversation part of mem0's extraction prompt (not what memory already holds)."""
    said = last_user_text(request).split("## New Messages", 1)[-1]
    return said.split("## Observation Date", 1)[0]


def mem0_answer(request: dict) -> str:
    """mem0's extraction answer: one memory per known fact in the new messages."""
    said = new_messages(request)
    found = [text for word, text in FACTS.items() if word in said]
    return json.dumps({"memory": [{"id": str(i), "text": t} for i, t in enumerate(found)]})


def chat(request: dict) -> Reply | str:
    """The scripted model: mem0's extraction prompt gets JSON, the file flush's gets lines,
    everything else a short answer."""
    if is_mem0(request):
        return mem0_answer(request)
    if is_file_extraction(request):
        said = last_user_text(request).split("Conversation:\n", 1)[-1]
        return "\n".join(f"- {t}" for w, t in FACTS.items() if w in said) or "NO_REPLY"
    return "Noted."


def chats(model: ScriptedModel) -> list[dict]:
    """The model requests of conversational turns (no extraction)."""
    return [r for r in model.requests if not is_mem0(r) and not is_file_extraction(r)]


async def stored(bot: BotHarness, agent: str, requester: str | None = None) -> list[str]:
    """What the mem0 scope of ``agent`` (for ``requester``) holds now."""
    assert bot.bot is not None
    memory = await asyncio.to_thread(bot.bot.memories.for_agent, agent, requester)
    assert isinstance(memory, Mem0Memory)
    return [e.text for e in await memory.list(100)]


async def flushed(bot: BotHarness) -> bool:
    """Every session's extraction is done (nothing dirty, nothing claimed)."""
    assert bot.bot is not None
    return not any(e.dirty or e.in_flight for e in await bot.bot.flush.entries())


def tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


async def test_a_fact_said_in_one_thread_is_recalled_in_the_next_by_meaning(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("m0")
    config = config_text(model.base_url, {"general": {"rooms": [room]}}, memory=MEM0)
    room_id = await bot.start_in_room(config, room, human)
    model.set_handler(chat)
    general = bot.bot.agents["general"].user_id

    told = await human.send(room_id, "my favorite color is blue")
    await human.wait_for_reply(room_id, told, timeout=60)  # the first turn opens Chroma
    await wait_until(lambda: _holds(bot, "general", FACTS["blue"]))
    await wait_until(lambda: flushed(bot))
    await bot.settle(human, room_id)

    # the extraction was mem0's own (its prompt, its JSON), not the file flush's, and silent
    assert any(is_mem0(r) and "blue" in new_messages(r) for r in model.requests)
    assert not any(is_file_extraction(r) for r in model.requests)
    assert len(human.posted(room_id, general)) == 1  # the reply (positive control), nothing else
    workspace = bot.storage / "agents" / "general" / "workspace"
    assert not (workspace / "MEMORY.md").exists()
    assert not (workspace / "memory").exists()
    # mem0's own store lives under mindroom_data
    assert (bot.storage / "mindroom_data" / "mem0").is_dir()

    asked = await human.send(room_id, "what is my favorite color?")  # a new thread
    await human.wait_for_reply(room_id, asked)
    turn = chats(model)[-1]
    assert FACTS["blue"] in system_text(turn)
    assert {"memory_search", "memory_get", "search_memories", "add_memory"} <= set(tool_names(turn))

    thanks = await human.send(room_id, "thanks!")  # chit-chat recalls nothing
    await human.wait_for_reply(room_id, thanks)
    assert FACTS["blue"] not in system_text(chats(model)[-1])


async def _holds(bot: BotHarness, agent: str, fact: str, requester: str | None = None) -> bool:
    return fact in await stored(bot, agent, requester)


async def test_one_agent_on_file_and_one_on_mem0_each_write_where_they_should(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    rooms = unique("m0a"), unique("m0b")
    config = config_text(
        model.base_url,
        {
            "general": {"rooms": [rooms[0]]},
            "coder": {"rooms": [rooms[1]], "memory_backend": "file"},
        },
        memory={"backend": "mem0", "auto_flush": {"enabled": True, "idle_seconds": 0.2}},
    )
    model.set_handler(chat)
    general_room = await bot.start_in_room(config, rooms[0], human)
    coder_room = await human.join(f"#{rooms[1]}:{bot.homeserver.server_name}")

    told = await human.send(general_room, "my editor is vim")
    await human.wait_for_reply(general_room, told)
    told = await human.send(coder_room, "my brother is Tom")
    await human.wait_for_reply(coder_room, told)

    coder_daily = bot.storage / "agents" / "coder" / "workspace" / "memory" / f"{today()}.md"
    await wait_until(lambda: _holds(bot, "general", FACTS["vim"]))
    await wait_until(lambda: asyncio.to_thread(coder_daily.exists))
    await wait_until(lambda: flushed(bot))

    # the mem0 agent's turn went to mem0 only, the file agent's to its daily file only
    assert await stored(bot, "general") == [FACTS["vim"]]
    assert [e.text for e in parse_entries(coder_daily.read_text(), "memory/x.md")] == [FACTS["Tom"]]
    general_workspace = bot.storage / "agents" / "general" / "workspace"
    assert not (general_workspace / "memory").exists()
    assert not (general_workspace / "MEMORY.md").exists()
    assert "vim" not in coder_daily.read_text()
    mem0_prompts = [new_messages(r) for r in model.requests if is_mem0(r)]
    file_prompts = [last_user_text(r) for r in model.requests if is_file_extraction(r)]
    assert mem0_prompts
    assert file_prompts
    assert all("Tom" not in p for p in mem0_prompts)
    assert all("vim" not in p for p in file_prompts)
    assert bot.bot is not None
    assert isinstance(await asyncio.to_thread(bot.bot.memories.for_agent, "coder"), FileMemory)


async def test_a_private_companion_on_mem0_never_gives_one_persons_memory_to_another(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    room = unique("m0p")
    config = config_text(
        model.base_url, {"mind": {"rooms": [room], "private": {"per": "user"}}}, memory=MEM0
    )
    model.set_handler(chat)
    bob = await Human.create(synapse)
    try:
        room_id = await bot.start_in_room(config, room, human)
        await bob.join(room_id)
        alice = human

        told = await alice.send(room_id, "my favorite color is blue")
        await alice.wait_for_reply(room_id, told)
        await wait_until(lambda: _holds(bot, "mind", FACTS["blue"], alice.user_id))
        await wait_until(lambda: flushed(bot))
        start = len(model.requests)

        asked = await bob.send(room_id, "what is my favorite color?")  # bob's own new thread
        await bob.wait_for_reply(room_id, asked)
        await wait_until(lambda: _any_mem0(model, start))  # bob's turn is extracted too...
        await wait_until(lambda: flushed(bot))  # ...and done
        bobs = model.requests[start:]
        start = len(model.requests)

        mind = bot.bot.agents["mind"].user_id if bot.bot else ""
        dm = await alice.client.room_create(invite=[mind], is_direct=True)
        assert isinstance(dm, RoomCreateResponse), dm
        await alice.wait_for(joined(mind, dm.room_id))
        again = await alice.send(dm.room_id, "what is my favorite color?")  # her own DM
        await alice.wait_for_reply(dm.room_id, again)
        alices_turn = chats(model)[-1]
        bob_has = await stored(bot, "mind", bob.user_id)
        alice_has = await stored(bot, "mind", alice.user_id)
    finally:
        await bob.close()

    bobs_turn = [r for r in bobs if not is_mem0(r)]
    bobs_extraction = [r for r in bobs if is_mem0(r)]
    assert len(bobs_turn) == 1
    assert "what is my favorite color" in last_user_text(bobs_turn[0])
    assert "blue" not in system_text(bobs_turn[0])
    # positive control: her own turn, where only she reads it (private memory is used in a
    # room nobody else can read)
    assert FACTS["blue"] in system_text(alices_turn)
    # mem0's extraction of bob's turn saw bob's words and bob's memory only
    assert bobs_extraction
    assert all("blue" not in last_user_text(r) for r in bobs_extraction)
    assert all("what is my favorite color" in new_messages(r) for r in bobs_extraction)
    assert alice_has == [FACTS["blue"]]
    assert bob_has == []


async def _any_mem0(model: ScriptedModel, start: int) -> bool:
    return any(is_mem0(r) for r in model.requests[start:])


async def test_a_team_on_mem0_keeps_its_own_scope_that_its_members_recall(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("m0t")
    config = config_text(
        model.base_url,
        {"general": {"rooms": [room]}, "coder": {"rooms": [room]}},
        teams={"crew": {"agents": ["general", "coder"], "mode": "coordinate", "rooms": [room]}},
        memory=MEM0,
    )
    model.set_handler(chat)
    room_id = await bot.start_in_room(config, room, human)
    assert bot.bot is not None
    crew = bot.bot.agents["crew"].user_id
    general = bot.bot.agents["general"].user_id

    asked = await human.send(room_id, "@crew the release is on Friday", mention=[crew])
    await human.wait_for_reply(room_id, asked, timeout=40)

    async def team_holds() -> bool:
        assert bot.bot is not None
        memory = await asyncio.to_thread(bot.bot.memories.for_team, ["general", "coder"])
        assert memory is not None
        assert memory.scope_id == "team_coder+general"
        return FACTS["release"] in [e.text for e in await memory.list(100)]

    await wait_until(team_holds)
    await wait_until(lambda: flushed(bot))
    assert FACTS["release"] not in await stored(bot, "general")  # the team's, not a member's
    assert FACTS["release"] not in await stored(bot, "coder")

    alone = await human.send(room_id, "@general when is the release?", mention=[general])
    await human.wait_for_reply(room_id, alone, timeout=40)
    assert FACTS["release"] in system_text(chats(model)[-1])


async def test_extraction_never_posts_and_a_failing_mem0_model_backs_off_keeping_the_chunk(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("m0f")
    memory = {
        "backend": "mem0",
        "auto_flush": {
            "enabled": False,
            "retry_cooldown_seconds": 0.2,
            "max_retry_cooldown_seconds": 0.5,
        },
    }
    config = config_text(model.base_url, {"general": {"rooms": [room]}}, memory=memory)
    failing = threading.Event()
    failing.set()
    attempts = {"failed": 0}

    def handler(request: dict) -> Reply | str:
        if is_mem0(request) and failing.is_set():
            attempts["failed"] += 1
            return Reply(status=500, error_message="model down", retryable=False)
        return chat(request)

    model.set_handler(handler)
    room_id = await bot.start_in_room(config, room, human)
    assert bot.bot is not None
    general = bot.bot.agents["general"].user_id

    told = await human.send(room_id, "my favorite color is blue")
    reply = await human.wait_for_reply(room_id, told)
    assert reply["content"]["body"] == "Noted."  # the reply did not wait for the extraction

    async def backed_off() -> bool:
        assert bot.bot is not None
        entries = await bot.bot.flush.entries()
        return bool(entries) and all(e.dirty and e.failures >= 2 for e in entries)

    await wait_until(backed_off)
    entry = (await bot.bot.flush.entries())[0]
    assert entry.cursor == 0  # nothing was stored, so the chunk waits to be retried
    assert await stored(bot, "general") == []

    failing.clear()
    await wait_until(lambda: _holds(bot, "general", FACTS["blue"]))
    await wait_until(lambda: flushed(bot))
    entry = (await bot.bot.flush.entries())[0]
    assert (entry.cursor, entry.failures) == (2, 0)
    assert await stored(bot, "general") == [FACTS["blue"]]
    await bot.settle(human, room_id)
    # one reply (the positive control): neither the failures nor the extraction said a word
    assert len(human.posted(room_id, general)) == 1
    assert attempts["failed"] >= 2
    assert not (bot.storage / "agents" / "general" / "workspace" / "memory").exists()


async def test_a_reply_never_waits_for_a_running_mem0_extraction(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("m0w")
    config = config_text(model.base_url, {"general": {"rooms": [room]}}, memory=MEM0)
    release = threading.Event()  # mem0's model call hangs until released

    def handler(request: dict) -> Reply | str:
        if is_mem0(request):
            release.wait(60)
        return chat(request)

    model.set_handler(handler)
    room_id = await bot.start_in_room(config, room, human)
    try:
        told = await human.send(room_id, "my favorite color is blue")
        await human.wait_for_reply(room_id, told)
        await wait_until(lambda: _any_mem0(model, 0))  # the extraction is running, held

        # the same thread (the same session) and a new one are both answered meanwhile
        again = await human.send(room_id, "and my editor is vim", thread_root=told)
        await human.wait_for_reply(room_id, again)
        other = await human.send(room_id, "good morning")
        await human.wait_for_reply(room_id, other)
        assert not release.is_set()
        assert sum(is_mem0(r) for r in model.requests) == 1  # still the one, still held
    finally:
        release.set()
    await wait_until(lambda: _holds(bot, "general", FACTS["vim"]))
    await wait_until(lambda: flushed(bot))
    assert sorted(await stored(bot, "general")) == sorted([FACTS["blue"], FACTS["vim"]])


async def test_stopping_during_a_mem0_extraction_waits_for_it_and_loses_nothing(
    bot: BotHarness, human: Human, model: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    """mem0's store must not be closed under a running extraction (its thread keeps running
    when the flush is cancelled): the stop waits for it, and the next start finishes the
    session without storing anything twice."""
    room = unique("m0s")
    config = config_text(model.base_url, {"general": {"rooms": [room]}}, memory=MEM0)
    release = threading.Event()

    def handler(request: dict) -> Reply | str:
        if is_mem0(request):
            release.wait(60)
        return chat(request)

    model.set_handler(handler)
    room_id = await bot.start_in_room(config, room, human)
    told = await human.send(room_id, "my favorite color is blue")
    await human.wait_for_reply(room_id, told)
    await wait_until(lambda: _any_mem0(model, 0))  # the extraction is in mem0's model call

    with caplog.at_level(logging.INFO, logger="mindroom.memory.flush.loop"):
        stopping = asyncio.create_task(bot.stop())
        try:
            await wait_until(lambda: stopping.done() or "waiting for" in caplog.text, timeout=30)
            assert not stopping.done()  # the stop waits for the extraction...
        finally:
            release.set()
        await stopping  # ...which then finishes, before mem0's store is closed

    await bot.start()
    await wait_until(lambda: _holds(bot, "general", FACTS["blue"]))
    await wait_until(lambda: flushed(bot))
    assert await stored(bot, "general") == [FACTS["blue"]]  # once
