"""Consent by reaction, end to end: a proposal about Alice is offered to her in her direct chat
with the agent (never in the group room she also talks in), one message for it; her ✅ stores
it, her ❌ drops it, and anyone else's reaction does nothing. In an encrypted direct chat too,
where her client encrypts the reaction. An open conflict about her is offered the same way
(✅ keeps the newer entry), and one about Bob is not offered to her."""

from __future__ import annotations

import re
import secrets
from pathlib import Path
from typing import NamedTuple

import nio
import pytest
import pytest_asyncio

from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.markdown import parse_entries
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords, db_path
from mindroom.memory.policy.consent import ConsentQueue
from tests.support.harness import (
    BotHarness,
    Human,
    client_api,
    config_text,
    encrypted_dm,
    joined,
    relation,
    unique,
    write_entries,
)
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

Event = dict

OFFER = "React ✅ to store it"


class AliceDm(NamedTuple):
    """Alice (display name "Alice"), the account of ``general``, and her direct chat with it."""

    alice: Human
    agent: str
    room_id: str


async def _start_general(bot: BotHarness, model: ScriptedModel) -> str:
    """Start ``general`` (a shared agent, in no room); its account's user ID."""
    await bot.start(config_text(model.base_url, {"general": {"rooms": []}}))
    assert bot.bot is not None
    return bot.bot.agents["general"].user_id


async def _open_dm(person: Human, agent: str) -> str:
    """A direct chat ``person`` opens with ``agent``, once ``agent`` joined it."""
    dm = await person.client.room_create(invite=[agent], is_direct=True)
    assert isinstance(dm, nio.RoomCreateResponse)
    await person.wait_for(joined(agent, dm.room_id))
    return dm.room_id


@pytest_asyncio.fixture
async def alice_dm(bot: BotHarness, human: Human, model: ScriptedModel) -> AliceDm:
    """``general`` started, and Alice's direct chat with it."""
    await human.client.set_displayname("Alice")
    agent = await _start_general(bot, model)
    return AliceDm(human, agent, await _open_dm(human, agent))


def _memory(bot: BotHarness) -> list[str]:
    path = bot.storage / "agents" / "general" / "workspace" / "MEMORY.md"
    text = path.read_text() if path.exists() else ""
    return [e.text for e in parse_entries(text, "MEMORY.md")]


def _status(bot: BotHarness, proposal_id: str) -> str | None:
    assert bot.bot is not None
    memory = bot.bot.memories.for_agent("general")
    assert memory is not None
    queue = ConsentQueue(memory)
    try:
        found = queue.get(proposal_id)
        return None if found is None else found.status
    finally:
        queue.close()


def _is_offer(room_id: str, agent: str, text: str):  # noqa: ANN202
    return lambda e: (
        e["room_id"] == room_id
        and e.get("type") == "m.room.message"
        and e.get("sender") == agent
        and OFFER in e["content"].get("body", "")
        and text in e["content"].get("body", "")
    )


async def _offered(
    person: Human,
    room_id: str,
    agent: str,
    model: ScriptedModel,
    fact: str,
    message: str,
    timeout: float = 30,
) -> Event:
    """The offer of ``fact`` in ``room_id``, after ``person`` said ``message`` there and the
    model added ``fact`` to memory (it waits for the person's consent); ``timeout`` for the
    turn's reply."""
    model.push(Reply(tool_calls=[ToolCall("add_memory", {"text": fact})]))
    model.push("I will ask you first.")
    said = await person.send(room_id, message)
    await person.wait_for_reply(room_id, said, timeout=timeout)
    return await person.wait_for(_is_offer(room_id, agent, fact), 30)


def _offers(person: Human, room_id: str, agent: str) -> list[Event]:
    return [m for m in person.messages(room_id, agent) if OFFER in m["content"].get("body", "")]


def _reaction(event_id: str, key: str) -> dict[str, object]:
    return {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}


async def _answer_to(person: Human, room_id: str, agent: str, prompt_id: str) -> str:
    """The body of the agent's reply to the prompt ``prompt_id``."""
    answer = await person.wait_for(
        lambda e: (
            e["room_id"] == room_id
            and e.get("type") == "m.room.message"
            and e.get("sender") == agent
            and (relation(e).get("m.in_reply_to") or {}).get("event_id") == prompt_id
        ),
        timeout=30,
    )
    return str(answer["content"]["body"])


def _replies_to(person: Human, room_id: str, agent: str, prompt_id: str) -> list[Event]:
    return [
        m
        for m in person.messages(room_id, agent)
        if (relation(m).get("m.in_reply_to") or {}).get("event_id") == prompt_id
    ]


async def test_a_proposal_about_alice_is_offered_in_her_dm_only_and_only_her_check_stores_it(
    bot: BotHarness,
    human: Human,
    model: ScriptedModel,
    synapse,  # noqa: ANN001
) -> None:
    alice = human
    await alice.client.set_displayname("Alice")
    room = unique("offers")
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
        dm = await _open_dm(alice, agent)

        model.push(Reply(tool_calls=[ToolCall("add_memory", {"text": "Alice lives in Lyon"})]))
        model.push("Noted, once Alice confirms.")
        said = await bob.send(room_id, "Alice lives in Lyon, remember that", mention=[agent])
        # the control: Alice's client sees what the agent says in the group room
        group_reply = await alice.wait_for_reply(room_id, said, timeout=30)
        offer = await alice.wait_for(_is_offer(dm, agent, "Alice lives in Lyon"), 30)
        await alice.fence(room_id)
        in_group = [m["content"].get("body", "") for m in alice.messages(room_id, agent)]
        [proposal_id] = re.findall(r"`!memory confirm (p-[0-9a-f]+)`", offer["content"]["body"])
        assert "Alice lives in Lyon" not in _memory(bot)  # it waits

        # Bob, let into the DM, reacts ✅ to Alice's offer: not his to answer
        invited = await alice.client.room_invite(dm, bob.user_id)
        assert isinstance(invited, nio.RoomInviteResponse), invited
        await bob.join(dm)
        await alice.wait_for(joined(bob.user_id, dm))
        await bob.react(dm, offer["event_id"], "✅")
        await alice.react(dm, offer["event_id"], "✅")  # the control: hers does
        answered = await _answer_to(alice, dm, agent, offer["event_id"])
        await alice.react(dm, offer["event_id"], "❌")  # answered once: no effect
        await alice.fence(dm)
        prompt = await bot.bot.ledger.prompts.get(offer["event_id"])
        offers_in_dm = _offers(alice, dm, agent)
        replies = _replies_to(alice, dm, agent, offer["event_id"])
    finally:
        await bob.close()

    assert group_reply["content"]["body"] == "Noted, once Alice confirms."
    assert "Noted, once Alice confirms." in in_group  # seen there ...
    assert not any(OFFER in body or proposal_id in body for body in in_group)  # ... no offer
    assert "> Alice lives in Lyon" in offer["content"]["body"]
    assert offer["content"]["msgtype"] == "m.notice"
    assert [o["event_id"] for o in offers_in_dm] == [offer["event_id"]]  # one message, once
    assert answered == "Stored: Alice lives in Lyon"
    assert prompt is not None
    assert (prompt.answer, prompt.answered_by) == ("yes", alice.user_id)  # not Bob's
    assert len(replies) == 1  # the late ❌ changed nothing
    assert "Alice lives in Lyon" in _memory(bot)
    assert _status(bot, proposal_id) == "applied"


async def test_a_cross_reaction_drops_the_proposal_and_other_reactions_do_nothing(
    bot: BotHarness, alice_dm: AliceDm, model: ScriptedModel
) -> None:
    alice, agent, dm = alice_dm
    fact = "Alice goes by Ali"
    offer = await _offered(alice, dm, agent, model, fact, "I go by Ali, remember that")
    [proposal_id] = re.findall(r"`!memory reject (p-[0-9a-f]+)`", offer["content"]["body"])
    await alice.react(dm, offer["event_id"], "🎉")  # neither yes nor no
    await alice.react(dm, offer["event_id"], "✖️")  # a no
    answered = await _answer_to(alice, dm, agent, offer["event_id"])
    await alice.fence(dm)
    replies = _replies_to(alice, dm, agent, offer["event_id"])

    assert answered == "Not stored: Alice goes by Ali"
    assert len(replies) == 1  # the 🎉 was not an answer
    assert _status(bot, proposal_id) == "rejected"
    assert not any("Ali" in text for text in _memory(bot))


async def test_an_encrypted_reaction_in_an_encrypted_dm_confirms(
    bot: BotHarness,
    model: ScriptedModel,
    synapse,
    tmp_path: Path,  # noqa: ANN001
) -> None:
    alice = await Human.create(synapse, keys=tmp_path / "keys")
    try:
        await alice.client.set_displayname("Alice")
        agent = await _start_general(bot, model)
        dm = await encrypted_dm(alice, agent)

        said = "I live in Porto, remember that"  # encrypted by her client
        offer = await _offered(alice, dm, agent, model, "Alice lives in Porto", said, timeout=40)
        # as Element does (nio sends reactions in the clear): the reaction encrypted
        kind, content = alice.client.encrypt(dm, "m.reaction", _reaction(offer["event_id"], "✅"))
        assert kind == "m.room.encrypted"
        txn = secrets.token_hex(8)
        sent = await client_api(
            alice.client, "PUT", f"/_matrix/client/v3/rooms/{dm}/send/{kind}/{txn}", content
        )
        assert "event_id" in sent, sent
        answered = await _answer_to(alice, dm, agent, offer["event_id"])
    finally:
        await alice.close()

    assert offer.get("mindroom_test_decrypted")  # the offer itself went encrypted
    assert answered == "Stored: Alice lives in Porto"
    assert "Alice lives in Porto" in _memory(bot)


def _record_conflict(bot: BotHarness, first: str, second: str) -> str:
    """Record ``first`` and ``second`` (entries of ``general``'s MEMORY.md) as an open
    conflict, as consolidation's judge does; its ID."""
    assert bot.bot is not None
    memory = bot.bot.memories.for_agent("general")
    assert memory is not None
    path = bot.storage / "agents" / "general" / "workspace" / "MEMORY.md"
    ids = {e.text: e.id for e in parse_entries(path.read_text(), "MEMORY.md")}
    records = ConsolidationRecords(db_path(memory.scope.state_dir))
    try:
        meta = {
            "a": {"id": ids[first], "text": first},
            "b": {"id": ids[second], "text": second},
        }
        conflict = records.record("conflict", ids[first], ids[second], "one city at a time", meta)
        assert conflict is not None
        return conflict.id
    finally:
        records.close()


async def test_an_open_conflict_about_alice_is_offered_in_her_dm_and_her_check_keeps_the_newer(
    bot: BotHarness, alice_dm: AliceDm, model: ScriptedModel
) -> None:
    alice, agent, dm = alice_dm
    lines = [
        "Alice lives in Lyon",
        "Alice lives in Porto",
        "Bob lives in Rome",
        "Bob lives in Oslo",
    ]
    write_entries(bot.storage / "agents" / "general" / "workspace", "MEMORY.md", lines)
    hers = _record_conflict(bot, "Alice lives in Lyon", "Alice lives in Porto")
    bobs = _record_conflict(bot, "Bob lives in Rome", "Bob lives in Oslo")

    model.push("Hello Alice.")
    said = await alice.send(dm, "hello")
    await alice.wait_for_reply(dm, said, timeout=30)
    offer = await alice.wait_for(
        lambda e: (
            e["room_id"] == dm
            and e.get("sender") == agent
            and hers in e.get("content", {}).get("body", "")
        ),
        30,
    )
    await alice.react(dm, offer["event_id"], "✅")
    answered = await _answer_to(alice, dm, agent, offer["event_id"])
    await alice.fence(dm)
    bodies = [m["content"].get("body", "") for m in alice.messages(dm, agent)]

    body = offer["content"]["body"]
    assert "> Alice lives in Lyon" in body
    assert "> Alice lives in Porto (newer)" in body
    assert not any(bobs in b or "Rome" in b for b in bodies)  # Bob's is not hers to settle
    assert answered.startswith("Kept: Alice lives in Porto")
    assert "Alice lives in Lyon" not in _memory(bot)
    assert "Alice lives in Porto" in _memory(bot)
    assert "Bob lives in Rome" in _memory(bot)


async def test_a_restart_neither_offers_again_nor_forgets_the_question(
    bot: BotHarness, alice_dm: AliceDm, model: ScriptedModel
) -> None:
    alice, agent, dm = alice_dm
    fact = "Alice lives in Nantes"
    offer = await _offered(alice, dm, agent, model, fact, "I live in Nantes, remember that")

    await bot.stop()
    await bot.start()  # the same storage: the question is in the ledger
    model.push("Welcome back.")
    again = await alice.send(dm, "hello again")  # a turn: the offers are looked at
    await alice.wait_for_reply(dm, again, timeout=30)
    await alice.react(dm, offer["event_id"], "✅")
    answered = await _answer_to(alice, dm, agent, offer["event_id"])
    await alice.fence(dm)
    offers = _offers(alice, dm, agent)

    assert [o["event_id"] for o in offers] == [offer["event_id"]]  # not offered again
    assert answered == "Stored: Alice lives in Nantes"  # answered after the restart
    assert "Alice lives in Nantes" in _memory(bot)


async def test_a_proposal_filed_while_a_forget_me_runs_is_offered_only_after_it(
    bot: BotHarness, alice_dm: AliceDm
) -> None:
    """An offer pass reads a person's proposals and files a prompt naming them: it holds the
    bot's erasure gate (mindroom.people.erasure), so it waits while a forget-me runs."""
    alice, agent, room_id = alice_dm
    assert bot.bot is not None
    gate = bot.bot.runtime.gate
    memory = bot.bot.memories.for_agent("general")
    assert memory is not None
    queue = ConsentQueue(memory)
    try:
        async with gate.erasing():  # a forget-me in progress (of nobody here)
            queue.propose(
                "Alice sings in a choir",
                EntryFields(),
                kind="sensitive",
                field="personal",
                path="MEMORY.md",
                user_id=alice.user_id,
            )
            bot.bot.started.offers.wake()
            await wait_until(lambda: gate.held_back >= 1, "the offer pass waits")
            assert _offers(alice, room_id, agent) == []
        offer = await alice.wait_for(_is_offer(room_id, agent, "Alice sings in a choir"), 30)
    finally:
        queue.close()

    assert offer["sender"] == agent  # the control: once the erasure is done, it is offered
