"""The harness's own guarantees: ``settle`` would have seen a reply that was still on its way.

Every negative assertion in the suite ("nothing else was answered") rests on ``settle``; these
tests show it does not return while the bot is still working on an earlier event.
"""

from __future__ import annotations

import json

import pytest

from tests.support.harness import BotHarness, Human, config_text, relation, unique
from tests.support.scripted_model import Reply, ScriptedModel, system_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


async def test_settle_returns_only_after_a_slow_reply_to_an_earlier_message_is_seen(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room], "streaming": False}}),
        room,
        human,
    )
    model.push(Reply(text="slow answer", delay=2.0))

    asked = await human.send(room_id, "take your time")
    control_answer = await bot.settle(human, room_id)  # does not wait for ``asked`` itself

    answers = [e for e in human.messages(room_id) if relation(e).get("event_id") == asked]
    assert [a["content"]["body"] for a in answers] == ["slow answer"]
    assert control_answer["sender"] == bot.bot.router.user_id


async def test_settle_returns_only_after_a_chain_of_hand_offs_has_ended(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("team")
    config = json.loads(
        config_text(
            model.base_url,
            {
                "general": {"role": "Helps with anything.", "rooms": [room]},
                "coder": {"role": "Writes code.", "rooms": [room]},
            },
        )
    )
    config["router"] = {"max_agent_hops": 4}
    room_id = await bot.start_in_room(json.dumps(config), room, human)

    def ping_pong(request: dict) -> Reply:
        text = "@general back to you" if "Writes code." in system_text(request) else "@coder go"
        return Reply(text=text, delay=0.3)

    model.set_handler(ping_pong)
    general = bot.bot.agents["general"].user_id
    coder = bot.bot.agents["coder"].user_id

    await human.send(room_id, "@general start", mention=[general])
    await bot.settle(human, room_id)  # sent before hop 1 has even been answered

    assert len(human.posted(room_id, general)) == 2  # hops 1 and 3
    assert len(human.posted(room_id, coder)) == 2  # hops 2 and 4
    assert len(model.requests) == 4
