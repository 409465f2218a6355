"""The Matrix of today in messages: intentional mentions, the live marker of
a streamed answer, read receipts, and status reactions. Real Synapse, the scripted model."""

from __future__ import annotations

import pytest

from mindroom.adapters.matrix.send import LIVE_MARKER
from tests.support.harness import BotHarness, Human, config_text, unique
from tests.support.scripted_model import Reply, ScriptedModel

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


async def test_a_streamed_answer_is_live_until_its_final_edit_and_pings_only_the_asker(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("live")
    pace = {"stream_first_send_seconds": 0.2, "stream_edit_interval_seconds": 0.5}
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room], **pace}}), room, human
    )
    assert bot.bot is not None
    agent = bot.bot.agents["general"].user_id
    full = " ".join(f"word{i}" for i in range(60))
    model.push(Reply(text=full, chunks=8, chunk_delay=0.4))

    asked = await human.send(room_id, "tell me a long story")
    reply = await human.wait_for_reply(room_id, asked)
    receipt = await human.wait_for(
        lambda e: e.get("type") == "m.receipt" and e["sender"] == agent and e["event_id"] == asked
    )
    await bot.settle(human, room_id)
    edits = human.edits_of(reply["event_id"])

    assert LIVE_MARKER in reply["first_content"]  # clients show it as live, not "(edited)"
    assert len(edits) >= 3  # edits in progress at the agent's own pace, then the final one
    assert all(LIVE_MARKER in e["content"]["m.new_content"] for e in edits[:-1])
    assert LIVE_MARKER not in edits[-1]["content"]["m.new_content"]  # the final edit ends it
    assert LIVE_MARKER not in edits[-1]["content"]
    assert reply["first_content"]["m.mentions"] == {"user_ids": [human.user_id]}
    assert edits[-1]["content"]["m.mentions"] == {}  # nobody new: no second ping
    assert edits[-1]["content"]["m.new_content"]["m.mentions"] == {"user_ids": [human.user_id]}
    assert receipt["content"]["thread_id"] == reply["content"]["m.relates_to"]["event_id"]


async def test_a_hand_off_pings_only_the_agent_it_names(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("handoff")
    config = config_text(
        model.base_url,
        {
            "general": {"rooms": [room], "streaming": False},
            "coder": {"rooms": [room], "streaming": False},
        },
    )
    room_id = await bot.start_in_room(config, room, human)
    assert bot.bot is not None
    coder = bot.bot.agents["coder"].user_id
    general = bot.bot.agents["general"].user_id
    model.push("@coder over to you")
    model.push("done, from coder")

    asked = await human.send(room_id, "@general please help", mention=[general])
    handed = await human.wait_for(
        lambda e: e.get("sender") == general and "over to you" in e["content"].get("body", "")
    )
    answered = await human.wait_for(
        lambda e: e.get("sender") == coder and "from coder" in e["content"].get("body", "")
    )

    assert handed["content"]["m.mentions"] == {"user_ids": [coder]}  # not the whole thread
    assert answered["content"]["m.mentions"] == {"user_ids": [human.user_id]}
    assert asked


async def test_status_reactions_show_work_then_go_or_warn_on_failure(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("react")
    config = config_text(model.base_url, {"general": {"rooms": [room], "status_reactions": True}})
    room_id = await bot.start_in_room(config, room, human)
    assert bot.bot is not None
    agent = bot.bot.agents["general"].user_id
    model.push(Reply(text="slow answer", delay=1.0))
    model.push(Reply(status=500, retryable=False))

    def reaction(key: str, to: str):  # noqa: ANN202
        return lambda e: (
            e.get("type") == "m.reaction"
            and e.get("sender") == agent
            and e["content"]["m.relates_to"]
            == {"rel_type": "m.annotation", "event_id": to, "key": key}
        )

    fine = await human.send(room_id, "take your time")
    working = await human.wait_for(reaction("⏳", fine))
    await human.wait_for_reply(room_id, fine)
    gone = await human.wait_for(
        lambda e: (
            e.get("type") == "m.room.redaction"
            and (e.get("redacts") or e["content"].get("redacts")) == working["event_id"]
        )
    )
    broken = await human.send(room_id, "this one fails")
    warned = await human.wait_for(reaction("⚠️", broken))

    assert gone["sender"] == agent
    assert warned["sender"] == agent
