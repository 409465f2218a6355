"""End to end: one person's private memory never reaches another, by any path.

Hand-offs between a shared agent and a private companion, two people in one thread with a
companion, compaction in such a thread, and revoking access by hot reload. Real Synapse, real
files and Agno; the scripted model plays the agents (told apart by their roles).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from nio import RoomCreateResponse

from mindroom.memory.private import requester_key
from tests.support.harness import (
    BotHarness,
    Event,
    Human,
    config_text,
    joined,
    relation,
    unique,
    wait_until_ledger_idle,
)
from tests.support.scripted_model import (
    Reply,
    ScriptedModel,
    ToolCall,
    all_text,
    last_user_text,
    system_text,
)

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

GENERAL_ROLE = "GENERAL-ROLE helps with anything."
MIND_ROLE = "MIND-ROLE is a private companion."
SECRET = re.compile(r"SECRET-\w+")


def agents_play(request: dict[str, Any]) -> Reply | str:
    """general relays to @mind; mind stores what it is told and says what its memory holds."""
    system, last = system_text(request), last_user_text(request)
    if "Which agent should answer?" in last:  # the router: the companion's questions go to it
        return '{"agent": "mind"}' if "companion question" in last else '{"agent": "general"}'
    if request["messages"][-1]["role"] == "tool":  # the tool ran: this turn's last step
        return "Remembered."
    if "Summarize the conversation" in system:
        return "SUMMARY-OF-" + ("ALICE" if "llama" in all_text(request) else "SOMEONE")
    if "long-term memory of an assistant" in system:
        return "NO_REPLY"
    if MIND_ROLE in system:
        tools = {t["function"]["name"] for t in request.get("tools") or []}
        if "please remember:" in last and "add_memory" in tools:
            fact = last.split("please remember:", 1)[1].strip()
            return Reply(tool_calls=[ToolCall("add_memory", {"text": fact})])
        found = SECRET.search(system)
        return f"I know: {found.group(0) if found else 'nothing'}"
    if GENERAL_ROLE in system:
        if "pass this on:" in last:
            return "@mind please remember: " + last.split("pass this on:", 1)[1].strip()
        if "ask the companion" in last:
            return "@mind what do you know?"
    return "ok"


def lobby_config(model: ScriptedModel, room: str, **sections: Any) -> str:
    return config_text(
        model.base_url,
        {
            "general": {"role": GENERAL_ROLE, "rooms": [room]},
            "mind": {"role": MIND_ROLE, "rooms": [room], "private": {"per": "user"}},
        },
        **sections,
    )


def in_thread(root: str) -> Callable[[Event], bool]:
    return lambda e: (
        relation(e).get("rel_type") == "m.thread" and relation(e).get("event_id") == root
    )


async def said_by(person: Human, sender: str, root: str, prefix: str) -> str:
    """The body of the first message by ``sender`` in thread ``root`` starting with ``prefix``."""
    event = await person.wait_for(
        lambda e: (
            e.get("sender") == sender
            and in_thread(root)(e)
            and e["content"].get("body", "").startswith(prefix)
        ),
        timeout=40,
    )
    return (await person.final(event))["content"]["body"]


def mind_requests(model: ScriptedModel) -> list[dict[str, Any]]:
    """The requests of the companion's turns (not the router's, not general's)."""
    return [r for r in model.requests if MIND_ROLE in system_text(r)]


def plant_private_fact(bot: BotHarness, person: str, fact: str) -> None:
    """``fact`` in ``person``'s private memory of the companion, as their DM would store it."""
    assert bot.bot is not None
    memory = bot.bot.memories.for_agent("mind", person)
    assert memory is not None
    memory.add_sync(fact, actor="tool")


async def open_dm(person: Human, agent: str) -> str:
    created = await person.client.room_create(invite=[agent], is_direct=True)
    assert isinstance(created, RoomCreateResponse), created
    await person.wait_for(joined(agent, created.room_id))
    return created.room_id


async def test_a_companion_in_a_group_room_runs_without_private_memory_however_it_got_there(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    """However the companion got to answer in a room Bob can read, Alice's private memory
    stays out of it; in her DM it is there (the positive control)."""
    alice, room = human, unique("lobby")
    model.set_handler(agents_play)
    bob = await Human.create(synapse)
    try:
        room_id = await bot.start_in_room(lobby_config(model, room), room, alice)
        await bob.join(room_id)
        assert bot.bot is not None
        general = bot.bot.agents["general"].user_id
        mind = bot.bot.agents["mind"].user_id
        plant_private_fact(bot, alice.user_id, "Alice's code word is SECRET-mango")

        handed = await alice.send(room_id, "@general ask the companion", mention=[general])
        handed_answer = await said_by(alice, mind, handed, "I know")
        routed = await alice.send(room_id, "companion question: what do you know?")
        routed_answer = await said_by(alice, mind, routed, "I know")
        named = await alice.send(room_id, "@mind what do you know?", mention=[mind])
        named_answer = await said_by(alice, mind, named, "I know")
        in_group = mind_requests(model)

        dm = await open_dm(alice, mind)
        asked = await alice.send(dm, "what do you know?")
        dm_answer = await alice.final(await alice.wait_for_reply(dm, asked, timeout=40))
    finally:
        await bob.close()

    assert len(in_group) >= 3  # the hand-off, the router's pick and the mention each ran
    for request in in_group:
        assert "SECRET" not in all_text(request)
    for answer in (handed_answer, routed_answer, named_answer):
        assert answer.startswith("I know: nothing")
    # the control: in Alice's DM the companion has her private memory
    assert "SECRET-mango" in all_text(mind_requests(model)[-1])
    assert dm_answer["content"]["body"].startswith("I know: SECRET-mango")


async def test_a_companion_in_a_group_room_cannot_write_the_askers_private_memory(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    """In a group room the companion has no memory tools of the asker's (so nothing said
    there lands in private memory by a tool); in the DM it has them (the control)."""
    alice, room = human, unique("lobby")
    model.set_handler(agents_play)
    bob = await Human.create(synapse)
    try:
        room_id = await bot.start_in_room(lobby_config(model, room), room, alice)
        await bob.join(room_id)
        assert bot.bot is not None
        general = bot.bot.agents["general"].user_id
        mind = bot.bot.agents["mind"].user_id
        told = await alice.send(
            room_id, "@general pass this on: SECRET-pineapple", mention=[general]
        )
        await said_by(alice, mind, told, "")  # the companion's turn ran
        group_request = mind_requests(model)[-1]

        dm = await open_dm(alice, mind)
        stored = await alice.send(dm, "please remember: SECRET-kiwi")
        await alice.wait_for_reply(dm, stored, timeout=40)
    finally:
        await bob.close()

    def tool_names(request: dict[str, Any]) -> set[str]:
        return {t["function"]["name"] for t in request.get("tools") or []}

    assert "add_memory" not in tool_names(group_request)
    private = bot.storage / "private_instances"
    assert not (private / requester_key(general)).exists()  # never an agent's "private" root
    memory_text = (private / requester_key(alice.user_id) / "mind_data" / "MEMORY.md").read_text()
    assert "SECRET-kiwi" in memory_text  # the control: in the DM the tool wrote it
    assert "SECRET-pineapple" not in memory_text


async def test_two_people_in_one_thread_keep_their_own_history_and_compaction(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    alice, room = human, unique("lobby")
    model.set_handler(agents_play)
    config = lobby_config(model, room)
    doc = json.loads(config)
    doc["models"]["default"]["context_tokens"] = 256
    doc["memory"]["compaction"] = {"threshold": 0.3, "keep_recent_messages": 2}
    bob = await Human.create(synapse)
    try:
        room_id = await bot.start_in_room(json.dumps(doc), room, alice)
        await bob.join(room_id)
        assert bot.bot is not None
        mind = bot.bot.agents["mind"].user_id
        llamas = "llamas are woolly and calm animals " * 4
        root = await alice.send(room_id, f"@mind {llamas}", mention=[mind])
        await said_by(alice, mind, root, "I know")
        for n in range(3):  # long enough to be compacted
            event = await alice.send(room_id, f"more on llamas {n}: {llamas}", thread_root=root)
            await alice.wait_for_reply(room_id, event, timeout=40)
        assert any("SUMMARY-OF-ALICE" in all_text(r) for r in model.requests)  # it compacted

        first = await bob.send(
            room_id, "@mind hi, I am bob the baker", mention=[mind], thread_root=root
        )
        await bob.wait_for_reply(room_id, first, timeout=40)
        bobs_first = next(
            r for r in reversed(model.requests) if "bob the baker" in last_user_text(r)
        )
        again = await bob.send(room_id, "@mind what did I say?", mention=[mind], thread_root=root)
        await bob.wait_for_reply(room_id, again, timeout=40)
        bobs_second = next(
            r for r in reversed(model.requests) if "what did I say?" in last_user_text(r)
        )
    finally:
        await bob.close()

    for request in (bobs_first, bobs_second):
        assert "SUMMARY-OF-ALICE" not in all_text(request)
        assert "llama" not in all_text(request)
    assert "bob the baker" in all_text(bobs_second)  # bob's own history is kept


@pytest.mark.parametrize("where", ["authorization", "room"])
async def test_revoking_a_user_by_hot_reload_applies_at_once(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse, where: str
) -> None:
    alice, room = human, unique("lobby")
    bob = await Human.create(synapse)
    model.set_handler(lambda request: f"answer to {last_user_text(request)}")
    try:
        everyone = {"allowed_users": [alice.user_id, bob.user_id]}
        sections = {"authorization": everyone} if where == "authorization" else {}
        if where == "room":
            sections["rooms"] = {room: everyone}
        config = config_text(model.base_url, {"general": {"rooms": [room]}}, **sections)
        room_id = await bot.start_in_room(config, room, alice)
        await bob.join(room_id)
        assert bot.bot is not None
        assert bot.bot.reloader is not None
        before = await bob.send(room_id, "bob before")
        await bob.wait_for_reply(room_id, before)

        doc = json.loads(config)
        if where == "room":
            doc["rooms"][room]["allowed_users"] = [alice.user_id]
        else:
            doc["authorization"]["allowed_users"] = [alice.user_id]
        doc["router"] = {"context_messages": 3}
        applied = bot.bot.reloader.applied
        bot.write_config(json.dumps(doc))
        deadline = time.monotonic() + 20
        while bot.bot.reloader.applied == applied:
            assert time.monotonic() < deadline, "the config change was never applied"
            await asyncio.sleep(0.05)

        revoked = await bob.send(room_id, "bob after")
        control = await alice.send(room_id, "alice after")
        await alice.wait_for_reply(room_id, control)  # handled in order: bob's came first
        ledger = bot.bot.ledger
        assert ledger is not None
        assert not await ledger.is_handled(revoked)
    finally:
        await bob.close()
    assert not [e for e in alice.events if relation(e).get("event_id") == revoked]
    assert all("bob after" not in last_user_text(r) for r in model.requests)
    assert bot.bot is not None
    assert len(alice.messages(room_id)) > 3  # more than the new limit were seen...
    assert len(bot.bot.state.recent(room_id)) == 3  # ...and the router keeps only 3


def extract_pets(request: dict[str, Any]) -> Reply | str:
    """Extraction writes one fact per pet named in the transcript; team leaders answer."""
    if "long-term memory of an assistant" in system_text(request):
        pets = re.findall(r"my (dog|cat) is (\w+)", last_user_text(request))
        return "\n".join(f"- the {kind} is {name}" for kind, name in pets) or "NO_REPLY"
    return "Team answer."


async def test_an_ad_hoc_team_flushes_each_persons_words_into_their_own_memory(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    alice, room = human, unique("lobby")
    model.set_handler(extract_pets)
    config = json.loads(lobby_config(model, room))
    config["memory"] = {"auto_flush": {"enabled": True, "idle_seconds": 3600}}
    bob = await Human.create(synapse)
    try:
        room_id = await bot.start_in_room(json.dumps(config), room, alice)
        await bob.join(room_id)
        assert bot.bot is not None
        both = [bot.bot.agents[name].user_id for name in ("general", "mind")]
        root = await alice.send(room_id, "@general @mind my dog is Rex", mention=both)
        await alice.wait_for_reply(room_id, root, timeout=40)
        said = await bob.send(
            room_id, "@general @mind my cat is Tom", mention=both, thread_root=root
        )
        await bob.wait_for_reply(room_id, said, timeout=40)
        # each turn marks its session dirty after its answer is posted, before its message
        # is finished: once the ledger is idle, both sessions wait for the flush
        ledger = bot.storage / "mindroom_data" / "ledger.db"
        await wait_until_ledger_idle(ledger, time.monotonic() + 30)
        await bot.bot.flush.cycle(force=True)  # (a prompt may have flushed one already)
    finally:
        await bob.close()

    def written(person: str) -> str:
        teams = bot.storage / "private_instances" / requester_key(person) / "teams"
        return "".join(p.read_text() for p in teams.rglob("memory/*.md"))

    alice_text, bob_text = written(alice.user_id), written(bob.user_id)
    assert "the dog is Rex" in alice_text
    assert "Tom" not in alice_text
    assert "the cat is Tom" in bob_text
    assert "Rex" not in bob_text
