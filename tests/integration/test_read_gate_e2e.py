"""End to end: the delta header of a real turn shows an update only when the read
gate grants the entry as it is stored now. Real Synapse, real files and Agno; the scripted
model records what it was sent."""

from __future__ import annotations

import pytest
from nio import RoomCreateResponse

from mindroom.memory.files.fields import EntryFields
from tests.support.harness import BotHarness, Human, config_text, joined
from tests.support.scripted_model import ScriptedModel, all_text, last_user_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

MEMORY = {
    "auto_flush": {"enabled": False},
    "embedder": "none",
    "maintenance": {"enabled": False},
    "categories": {"custom": [{"name": "health"}]},
    "allowlists": {"planner": ["general", "tasks"]},
}


async def test_planners_next_turn_after_a_health_update_has_no_health_text(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    model.set_handler(lambda request: "ok")
    await bot.start(config_text(model.base_url, {"planner": {"rooms": []}}, memory=MEMORY))
    assert bot.bot is not None
    planner = bot.bot.agents["planner"].user_id
    memory = bot.bot.memories.for_agent("planner")
    assert memory is not None
    health = memory.add_sync(
        "Alice takes insulin", actor="cli", fields=EntryFields(category="health")
    )
    task = memory.add_sync(
        "Alice must renew her passport", actor="cli", fields=EntryFields(category="tasks")
    )
    created = await human.client.room_create(invite=[planner], is_direct=True)
    assert isinstance(created, RoomCreateResponse), created
    await human.wait_for(joined(planner, created.room_id))
    room_id = created.room_id

    first = await human.send(room_id, "hello planner")
    await human.wait_for_reply(room_id, first, timeout=40)  # the thread's revision starts here
    # changed outside the conversation (the CLI, the dashboard and /me write the same way)
    memory.update_sync(health.id, "Alice takes insulin twice a day", actor="cli")
    memory.update_sync(task.id, "Alice must renew her passport by May", actor="cli")
    second = await human.send(room_id, "anything new?")
    await human.wait_for_reply(room_id, second, timeout=40)

    sent = [r for r in model.requests if "anything new?" in last_user_text(r)]
    assert sent
    text = all_text(sent[-1])
    assert "insulin" not in text
    assert "↑updated: [tasks] Alice must renew her passport by May" in text  # the control
