"""A direct chat is one conversation: answered in the timeline, with its history."""

from __future__ import annotations

import pytest

from mindroom.config import parse_config
from mindroom.pipeline.turns import answer_thread, thread_mode
from tests.support.harness import BotHarness, Human, config_text, joined, relation
from tests.support.scripted_model import ScriptedModel, all_text, last_user_text

CONFIG = """
models:
  default: {provider: openai, id: m, base_url: "http://127.0.0.1:9/v1", api_key: x}
defaults: {thread_mode: thread}
agents:
  general: {role: Helps.}
  threaded: {role: Threads., thread_mode: thread}
"""


def test_a_direct_chat_is_answered_in_the_timeline_unless_the_agent_says_otherwise() -> None:
    config = parse_config(CONFIG, "config.yaml")
    assert thread_mode(config, "general", direct=True) == "room"
    assert thread_mode(config, "general", direct=False) == "thread"
    assert thread_mode(config, "threaded", direct=True) == "thread"
    assert answer_thread(config, "general", None, "$e", direct=True) is None
    assert answer_thread(config, "general", "$t", "$e", direct=True) == "$t"  # a thread stays one
    assert answer_thread(config, "general", None, "$e") == "$e"


async def open_dm(bot: BotHarness, human: Human, model: ScriptedModel) -> tuple[str, str]:
    """Start a bot with one echoing agent and open a DM with it: (its user ID, the room)."""
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    await bot.start(config_text(model.base_url, {"general": {"rooms": []}}))
    assert bot.bot is not None
    general = bot.bot.agents["general"].user_id
    created = await human.client.room_create(invite=[general], is_direct=True)
    await human.wait_for(joined(general, created.room_id))
    return general, created.room_id


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_a_dm_keeps_one_conversation_and_new_starts_fresh(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    general, room_id = await open_dm(bot, human, model)

    told = await human.send(room_id, "my name is Ada")
    first = await human.wait_for_reply(room_id, told)
    asked = await human.send(room_id, "what is my name?")
    second = await human.wait_for_reply(room_id, asked)
    remembered = all_text(model.requests[-1])

    await human.send(room_id, "!new")
    await human.wait_for(
        lambda e: (
            e.get("sender") == general and "fresh conversation" in e["content"].get("body", "")
        )
    )
    fresh = await human.send(room_id, "hello again")
    await human.wait_for_reply(room_id, fresh)
    forgotten = all_text(model.requests[-1])

    side = await human.send(room_id, "a side question", thread_root=told)
    in_thread = await human.wait_for_reply(room_id, side)

    for reply in (first, second):
        assert relation(reply).get("rel_type") != "m.thread"  # in the timeline
    assert "my name is Ada" in remembered  # the DM's history came along
    assert "Ada" not in forgotten  # after !new it did not
    assert relation(in_thread).get("rel_type") == "m.thread"
    assert relation(in_thread).get("event_id") == told


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_reset_in_a_dm_starts_fresh_like_new(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    general, room_id = await open_dm(bot, human, model)

    told = await human.send(room_id, "my name is Ada")
    await human.wait_for_reply(room_id, told)
    asked = await human.send(room_id, "what is my name?")
    await human.wait_for_reply(room_id, asked)
    remembered = all_text(model.requests[-1])
    await human.send(room_id, "!reset")
    await human.wait_for(
        lambda e: (
            e.get("sender") == general and "fresh conversation" in e["content"].get("body", "")
        )
    )
    fresh = await human.send(room_id, "hello again")
    await human.wait_for_reply(room_id, fresh)

    assert "my name is Ada" in remembered  # the control: before !reset the history came along
    assert "Ada" not in all_text(model.requests[-1])
