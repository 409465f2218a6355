"""End to end: an agent remembers through its tools, recalls in every turn, follows hand edits."""

from __future__ import annotations

import pytest

from mindroom.memory.files.markdown import parse_entries
from tests.support.harness import BotHarness, Human, config_text, unique
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall, system_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


def memory_file(bot: BotHarness, agent: str = "general") -> str:
    path = bot.storage / "agents" / agent / "workspace" / "MEMORY.md"
    return path.read_text() if path.exists() else ""


async def test_remembered_fact_is_written_and_recalled_in_a_new_thread(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    model.push(
        Reply(tool_calls=[ToolCall("add_memory", {"text": "The user's dog is named Pixel"})])
    )
    model.push("I'll remember that Pixel is your dog.")

    first = await human.send(room_id, "remember that my dog is named Pixel")
    await human.wait_for_reply(room_id, first)

    entries = parse_entries(memory_file(bot), "MEMORY.md")
    assert [e.text for e in entries] == ["The user's dog is named Pixel"]
    assert not entries[0].hand_written
    tool_result = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert "remembered" in tool_result[0]["content"]

    model.push("Your dog is Pixel.")
    second = await human.send(room_id, "what is my dog called?")  # a new thread
    await human.wait_for_reply(room_id, second)
    context = system_text(model.requests[-1])
    assert "<memory>" in context
    assert "MEMORY.md" in context
    assert "The user's dog is named Pixel" in context
    assert "what is my dog called?" not in context  # the history of thread 1 is not here


async def test_hand_edit_shows_up_in_the_next_turn_and_in_search(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    path = bot.storage / "agents" / "general" / "workspace" / "MEMORY.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Notes\n\n- Alice prefers oolong tea\n")

    asked = await human.send(room_id, "what tea should I buy?")
    await human.wait_for_reply(room_id, asked)
    assert "Alice prefers oolong tea" in system_text(model.requests[-1])

    path.write_text("# Notes\n\n- Alice switched to jasmine tea\n")  # a person edits the file
    memory = bot.bot.memories.for_agent("general")
    assert memory is not None
    hits = await memory.search("jasmine")
    assert [h.entry.text for h in hits] == ["Alice switched to jasmine tea"]
    assert await memory.search("oolong") == []

    again = await human.send(room_id, "and now?")
    await human.wait_for_reply(room_id, again)
    context = system_text(model.requests[-1])
    assert "Alice switched to jasmine tea" in context
    assert "oolong" not in context


async def test_agent_with_memory_none_gets_no_tools_and_no_recall(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = config_text(model.base_url, {"general": {"rooms": [room], "memory_backend": "none"}})
    room_id = await bot.start_in_room(config, room, human)
    asked = await human.send(room_id, "hello")
    await human.wait_for_reply(room_id, asked)

    request = model.requests[-1]
    assert "tools" not in request or not request["tools"]
    assert "<memory>" not in system_text(request)
