"""A fact deleted from a shared agent's memory comes back by no recall path, though the
message it came from said it in other words (:mod:`mindroom.memory.files.tombstones`).

Real Synapse, real files and SQLite, real Agno; the scripted model plays ``general`` and
records every request it gets.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from typing import Any

import nio
import pytest

from mindroom.memory.files.store import FileMemory
from tests.integration.test_flush_e2e import conversation, flush_rows, is_extraction
from tests.integration.test_person_forget_pages import say
from tests.support.harness import BotHarness, Human, config_text, joined, unique
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall, last_user_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

CODE = "zq7731x9"
SAID = f"my locker is {CODE}, remember it"  # Alice's words
STORED = f"Alice's locker code is {CODE}"  # the fact, as the agent words it
PAST = re.compile(r"### Past conversations.*?(?=\n###|\Z)", re.DOTALL)


def general(request: dict[str, Any]) -> Reply | str:
    """``remember it`` stores the fact in the agent's words; ``please delete ID`` deletes;
    everything else is answered without a tool."""
    last = last_user_text(request)
    if request["messages"][-1]["role"] == "tool":
        return "Done."
    if "remember it" in last:
        return Reply(tool_calls=[ToolCall("add_memory", {"text": STORED})])
    if last.startswith("please delete "):
        entry_id = last.removeprefix("please delete ").strip()
        return Reply(tool_calls=[ToolCall("delete_memory", {"id": entry_id})])
    return "I will look."


def system_prompt(request: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content")) for m in request["messages"] if m["role"] == "system")


def indexed(memory: FileMemory, word: str) -> bool:
    """Whether the scope's transcripts (the database or its WAL) hold ``word``."""
    files = memory.scope.state_dir.glob("transcripts.db*")
    return any(word.encode() in path.read_bytes() for path in files)


async def dm_with_general(bot: BotHarness, person: Human) -> str:
    assert bot.bot is not None
    agent = bot.bot.agents["general"].user_id
    created = await person.client.room_create(invite=[agent], is_direct=True)
    assert isinstance(created, nio.RoomCreateResponse), created
    await person.wait_for(joined(agent, created.room_id), timeout=30)
    return created.room_id


async def test_a_fact_deleted_from_a_shared_agent_is_not_recalled_from_past_conversations(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    alice = human
    model.set_handler(general)
    await bot.start(
        config_text(
            model.base_url,
            {"general": {"rooms": [], "streaming": False}},
            memory={
                "auto_flush": {"enabled": False},
                "maintenance": {"enabled": False},
                "embedder": "none",
                "sources": ["memory", "sessions"],
                "session_index_messages": 1,
            },
        )
    )
    assert bot.bot is not None
    memory = bot.bot.memories.for_agent("general")
    assert isinstance(memory, FileMemory)
    told = await dm_with_general(bot, alice)
    await say(alice, told, SAID)
    [entry] = [e for e in memory.list_sync(50) if CODE in e.text]
    await wait_until(lambda: asyncio.to_thread(indexed, memory, CODE), "the fact is indexed")

    asked = await dm_with_general(bot, alice)  # another conversation: its history is not the fact
    await say(alice, asked, "do you remember my locker?")
    past = PAST.search(system_prompt(model.requests[-1]))
    # the control: past conversations recall the message the fact came from
    assert past is not None
    assert CODE in past.group(0)

    await say(alice, told, f"please delete {entry.id}")  # the memory tool's delete
    assert not [e for e in memory.list_sync(50) if CODE in e.text]
    await say(alice, asked, "do you remember my locker?")
    after = json.dumps(model.requests[-1], ensure_ascii=False)  # all of it, delta header too

    assert CODE not in after


async def test_the_flush_does_not_learn_again_a_fact_deleted_by_the_cli_before_it_ran(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    alice, room = human, unique("lockers")
    quiet = {"auto_flush": {"enabled": True, "idle_seconds": 3600, "max_dirty_age_seconds": 3600}}
    config = config_text(model.base_url, {"general": {"rooms": [room]}}, memory=quiet)
    room_id = await bot.start_in_room(config, room, alice)
    assert bot.bot is not None

    def handler(request: dict[str, Any]) -> Reply | str:
        if not is_extraction(request):
            return general(request)
        said = conversation(request)
        if CODE in said:
            return f"- {STORED}"
        return "- Alice's bike is a blue gazelle" if "gazelle" in said else "NO_REPLY"

    model.set_handler(handler)
    await say(alice, room_id, "my bike is a blue gazelle")  # a thread: a session of its own
    # the last message (a new prompt boosts the other sessions' flush): the tool stores it
    await say(alice, room_id, SAID)
    await wait_until(lambda: len(flush_rows(bot.storage)) == 2)
    memory = bot.bot.memories.for_agent("general")
    assert isinstance(memory, FileMemory)
    [entry] = [e for e in memory.list_sync(50) if CODE in e.text]
    cli = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "mindroom",
        "memory",
        "delete",
        entry.id,
        "--agent",
        "general",
        "--config",
        str(bot.storage / "config.yaml"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await cli.communicate()
    assert cli.returncode == 0, out.decode()

    await bot.bot.flush.cycle(force=True)

    extractions = [conversation(r) for r in model.requests if is_extraction(r)]
    assert any("gazelle" in said for said in extractions)  # the control: the flush ran
    assert not [said for said in extractions if CODE in said]
    assert not [e for e in memory.list_sync(50) if CODE in e.text]
