"""Consent in chat, end to end: a fact Bob's turn writes about Alice is Alice's to
confirm, in her direct chat; Bob is told it does not exist; nothing is listed in a group."""

from __future__ import annotations

import re

import aiohttp
import nio
import pytest

from mindroom.dashboard.person import person_link
from mindroom.memory.files.markdown import parse_entries
from mindroom.memory.files.store import FileMemory
from tests.support.dashboard import form_of, open_link, signed_in, start_dashboard
from tests.support.harness import BotHarness, Human, config_text, joined, unique, write_entries
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall

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


async def test_an_admins_sensitive_dashboard_edit_waits_but_a_persons_own_me_edit_is_written(
    bot: BotHarness, model: ScriptedModel
) -> None:
    alice = "@alice:localhost"
    agents = {"general": {"rooms": []}, "mind": {"private": {"per": "user"}}}
    await bot.start(config_text(model.base_url, agents))
    assert bot.bot is not None
    shared = write_entries(
        bot.storage / "agents" / "general" / "workspace", "MEMORY.md", ["Alice keeps bees"]
    )
    private = bot.bot.memories.for_agent("mind", requester=alice)
    assert isinstance(private, FileMemory)
    private.add_sync("Alice likes jam", actor="test")
    dash = await start_dashboard(bot)
    try:
        async with signed_in(dash) as admin:
            scope = await (await admin.get("/memory/s/agent_general")).text()
            [href] = re.findall(r'<td><a href="([^"]+/e/[^"]+)">', scope)
            page = await (await admin.get(href)).text()
            held = await admin.post(href, data={**form_of(page), "text": "Alice lives in Lyon"})
            held_page = await held.text()
            page = await (await admin.get(href)).text()
            plain = await admin.post(href, data={**form_of(page), "text": "Alice keeps two hives"})
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as person:
            link = person_link(dash.data_dir, dash.host.config.dashboard, alice)
            assert link is not None
            home = await (await open_link(person, link)).text()
            [action] = re.findall(r'<form method="post" action="(/me/s/[^"]+/e/[^"/]+)">', home)
            csrf = re.search(r'name="csrf" value="([^"]+)"', home)
            assert csrf is not None
            base = f"http://127.0.0.1:{dash.port}"
            own = await person.post(
                base + action, data={"csrf": csrf.group(1), "text": "Alice moved to Porto"}
            )
    finally:
        await dash.stop()

    assert held.status == 422
    assert "not stored yet: city is a personal detail" in held_page
    assert plain.status == 200  # control: the same edit path writes an ordinary fact
    assert "Alice keeps two hives" in shared.read_text()
    assert "Lyon" not in shared.read_text()
    assert own.status == 200
    assert [e.text for e in private.list_sync(10)] == ["Alice moved to Porto"]  # her consent
