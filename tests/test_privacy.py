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

from mindroom.memory.private import requester_key
from tests.harness import (
    BotHarness,
    Event,
    Human,
    config_text,
    relation,
    unique,
    wait_until_ledger_idle,
)
from tests.scripted_model import (
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
    if request["messages"][-1]["role"] == "tool":  # the tool ran: this turn's last step
        return "Remembered."
    if "Summarize the conversation" in system:
        return "SUMMARY-OF-" + ("ALICE" if "llama" in all_text(request) else "SOMEONE")
    if "long-term memory of an assistant" in system:
        return "NO_REPLY"
    if MIND_ROLE in system:
        if "please remember:" in last:
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


async def test_a_hand_off_runs_the_companion_for_the_person_who_asked(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
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
        assert await said_by(alice, mind, told, "Remembered") == "Remembered."

        asked = await bob.send(room_id, "@general ask the companion", mention=[general])
        bobs_answer = await said_by(bob, mind, asked, "I know")

        control = await alice.send(room_id, "@general ask the companion", mention=[general])
        alices_answer = await said_by(alice, mind, control, "I know")
    finally:
        await bob.close()

    assert alices_answer.startswith("I know: SECRET-pineapple")  # positive control
    assert "SECRET" not in bobs_answer
    assert bobs_answer.startswith("I know: nothing")
    private = bot.storage / "private_instances"
    assert not (private / requester_key(general)).exists()  # never an agent's "private" root
    alice_root = private / requester_key(alice.user_id)
    assert "SECRET-pineapple" in (alice_root / "mind_data" / "MEMORY.md").read_text()
    bob_memory = private / requester_key(bob.user_id) / "mind_data" / "MEMORY.md"
    assert not bob_memory.exists() or "SECRET" not in bob_memory.read_text()


async def test_private_memory_in_a_group_thread_only_when_its_owner_addresses_the_companion(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    alice, room = human, unique("lobby")
    model.set_handler(agents_play)
    bob = await Human.create(synapse)
    try:
        room_id = await bot.start_in_room(lobby_config(model, room), room, alice)
        await bob.join(room_id)
        assert bot.bot is not None
        general = bot.bot.agents["general"].user_id
        mind = bot.bot.agents["mind"].user_id

        root = await alice.send(room_id, "@mind please remember: SECRET-kiwi", mention=[mind])
        assert await said_by(alice, mind, root, "Remembered") == "Remembered."
        await bob.send(room_id, "hello from bob", thread_root=root)  # now a group thread

        await alice.send(room_id, "@general ask the companion", mention=[general], thread_root=root)
        handed = await said_by(alice, mind, root, "I know")
        await alice.send(room_id, "@mind what do you know?", mention=[mind], thread_root=root)
        addressed = await alice.wait_for(
            lambda e: (
                e.get("sender") == mind
                and in_thread(root)(e)
                and "SECRET" in json.dumps(e.get("content"))
            ),
            timeout=40,
        )
        addressed = await alice.final(addressed)
    finally:
        await bob.close()

    assert handed.startswith("I know: nothing")  # a hand-off is not alice asking
    body = addressed["content"]["body"]
    assert body.startswith("I know: SECRET-kiwi")
    assert "private memory" in body  # marked: others in the thread read it
    assert alice.user_id in body


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
