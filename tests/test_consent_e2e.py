"""Consent in chat, end to end (issue 30.3): a fact Bob's turn writes about Alice is Alice's to
confirm, in her direct chat; Bob is told it does not exist; nothing is listed in a group."""

from __future__ import annotations

import re

import nio
import pytest

from mindroom.memory.markdown import parse_entries
from tests.harness import BotHarness, Human, config_text, joined, unique
from tests.scripted_model import Reply, ScriptedModel, ToolCall

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


def _memory(bot: BotHarness) -> list[str]:
    path = bot.storage / "agents" / "general" / "workspace" / "MEMORY.md"
    text = path.read_text() if path.exists() else ""
    return [e.text for e in parse_entries(text, "MEMORY.md")]


async def _ask(person: Human, room_id: str, text: str) -> str:
    asked = await person.send(room_id, text)
    answer = await person.wait_for_reply(room_id, asked, timeout=30)
    return str(answer["content"]["body"])


async def test_a_fact_about_alice_from_bobs_turn_is_confirmed_by_alice_in_her_dm_only(
    bot: BotHarness,
    human: Human,
    model: ScriptedModel,
    synapse,  # noqa: ANN001
) -> None:
    alice = human
    await alice.client.set_displayname("Alice")
    room = unique("consent")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, alice
    )
    assert bot.bot is not None
    agent = bot.bot.agents["general"].user_id
    bob = await Human.create(synapse)
    try:
        await bob.client.set_displayname("Bob")
        await bob.join(room_id)
        await alice.wait_for(joined(bob.user_id, room_id))

        model.push(Reply(tool_calls=[ToolCall("add_memory", {"text": "Alice lives in Lyon"})]))
        model.push("Noted, once Alice confirms.")
        said = await bob.send(room_id, "Alice lives in Lyon, remember that", mention=[agent])
        await bob.wait_for_reply(room_id, said, timeout=30)
        tool_results = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]
        [proposal_id] = re.findall(r"proposal (p-[0-9a-f]+)", tool_results[0]["content"])
        assert "Alice lives in Lyon" not in _memory(bot)  # it waits

        bob_confirms = await _ask(bob, room_id, f"!memory confirm {proposal_id}")
        bob_pending = await _ask(bob, room_id, "!memory pending")
        alice_pending_here = await _ask(alice, room_id, "!memory pending")
        assert "Alice lives in Lyon" not in _memory(bot)  # Bob's confirm wrote nothing

        dm = await alice.client.room_create(invite=[agent], is_direct=True)
        assert isinstance(dm, nio.RoomCreateResponse)
        await alice.wait_for(joined(agent, dm.room_id))
        alice_pending_dm = await _ask(alice, dm.room_id, "!memory pending")
        alice_confirms = await _ask(alice, dm.room_id, f"!memory confirm {proposal_id}")
    finally:
        await bob.close()

    assert bob_confirms == f"No proposal {proposal_id!r} is waiting for you."
    assert proposal_id not in bob_pending
    assert "Lyon" not in bob_pending
    assert proposal_id not in alice_pending_here  # a group room lists nothing ...
    assert "direct message" in alice_pending_here
    assert proposal_id in alice_pending_dm  # ... her DM does (the positive control)
    assert "Alice lives in Lyon" in alice_pending_dm
    assert alice_confirms == "Stored: Alice lives in Lyon"
    assert "Alice lives in Lyon" in _memory(bot)
