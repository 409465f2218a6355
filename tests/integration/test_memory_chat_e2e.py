"""``!memory list | forget | undo`` end to end, on a real Synapse: a person reads what a shared
agent remembers about them, paged, in their DM; ``forget`` deletes nothing until they confirm,
even across a restart; ``undo`` brings it back; nobody else can list or forget their facts."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import nio
import pytest

from mindroom.memory.files.store import FileMemory
from tests.support.harness import BotHarness, Event, Human, config_text, joined, relation, unique
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


async def _reply(person: Human, room_id: str, text: str) -> Event:
    """The agent's reply to ``text``, sent by ``person`` in ``room_id``."""
    asked = await person.send(room_id, text)
    return await person.wait_for_reply(room_id, asked, timeout=30)


async def _ask(person: Human, room_id: str, text: str) -> str:
    return str((await _reply(person, room_id, text))["content"]["body"])


async def _start(bot: BotHarness, model: ScriptedModel, alice: Human) -> tuple[str, str]:
    """``general`` (a shared agent) in a lobby Alice joins, and Alice's DM with it."""
    room = unique("memchat")
    lobby = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, alice
    )
    return lobby, await _dm(bot, alice)


async def _dm(bot: BotHarness, person: Human) -> str:
    assert bot.bot is not None
    agent = bot.bot.agents["general"].user_id
    dm = await person.client.room_create(invite=[agent], is_direct=True)
    assert isinstance(dm, nio.RoomCreateResponse)
    await person.wait_for(joined(agent, dm.room_id))
    return dm.room_id


def _shared(bot: BotHarness) -> FileMemory:
    assert bot.bot is not None
    memory = bot.bot.memories.for_agent("general")
    assert isinstance(memory, FileMemory)
    return memory


def _live(bot: BotHarness) -> dict[str, str]:
    return {e.id: e.text for e in _shared(bot).list_sync(1000)}


async def test_forget_deletes_only_after_confirmation_and_undo_brings_it_back(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    alice = human
    lobby, dm = await _start(bot, model, alice)
    memory = _shared(bot)
    bees = memory.add_sync(f"{alice.user_id} keeps bees in the garden", actor="test")
    tea = memory.add_sync(f"{alice.user_id} likes green tea", actor="test")

    listed = await _ask(alice, dm, "!memory forget bees")
    await bot.settle(alice, lobby)
    after_listing = _live(bot)
    confirmed = await _ask(alice, dm, "!memory forget confirm")
    after_confirm = _live(bot)
    again = await _ask(alice, dm, "!memory forget confirm")
    undone = await _ask(alice, dm, "!memory undo")
    after_undo = _live(bot)
    remembered = await _ask(alice, dm, "!memory remember I live in Lyon")  # hers: at once
    listed_after = await _ask(alice, dm, "!memory list")

    assert bees.id in listed
    assert "keeps bees in the garden" in listed
    assert tea.id not in listed
    assert "Nothing is deleted yet" in listed
    assert bees.id in after_listing  # unconfirmed: nothing deleted
    assert confirmed.startswith("Forgot 1 thing.")
    assert bees.id not in after_confirm  # the positive control: confirmed, it is gone
    assert tea.id in after_confirm
    assert again == "Nothing is waiting for your confirmation to be forgotten."
    assert undone.startswith("Restored 1 thing.")
    assert after_undo.get(bees.id) == bees.text
    actors = [(r.op, r.actor) for r in memory.history_of(bees.id)]
    assert ("delete", alice.user_id) in actors  # the person, not a tool or the CLI
    assert ("restore", alice.user_id) in actors
    assert remembered.startswith("Remembered")
    assert f"{alice.user_id}: I live in Lyon" in _live(bot).values()
    assert "I live in Lyon" in listed_after


async def test_list_pages_in_the_dm_and_only_counts_in_a_group_room(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    alice = human
    lobby, dm = await _start(bot, model, alice)
    memory = _shared(bot)
    ids = [
        memory.add_sync(f"{alice.user_id} fact number {n:02d}", actor="test").id for n in range(13)
    ]
    memory.add_sync("The office plant is a fern", actor="test")  # about nobody

    first = await _ask(alice, dm, "!memory list")
    second = await _ask(alice, dm, "!memory list 2")
    in_lobby = await _ask(alice, lobby, "!memory list")
    model.push(Reply(tool_calls=[ToolCall("memories_about_me", {})]))
    model.push("Here is what I know about you.")
    await _ask(alice, dm, "What do you know about me?")
    tool_results = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]

    shown_first = set(re.findall(r"`(m-[0-9a-f]{8})`", first))
    shown_second = set(re.findall(r"`(m-[0-9a-f]{8})`", second))
    assert len(shown_first) == 10
    assert len(shown_second) == 3
    assert shown_first | shown_second == set(ids)
    assert "page 1 of 2" in first
    assert "`!memory list 2`" in first
    assert "page 2 of 2" in second
    assert "!memory list 3" not in second
    assert "fact number" in first
    assert "in general's memory, added by hand" in first  # where it was learned
    assert "fern" not in first + second
    assert "13 things" in in_lobby
    assert "direct message" in in_lobby
    assert "fact number" not in in_lobby
    # the agent's own answer to the question lists the same entries, with the same tool
    assert set(re.findall(r"`(m-[0-9a-f]{8})`", tool_results[0]["content"])) == set(ids)
    assert "m-" not in in_lobby


async def test_another_person_can_neither_list_nor_forget_alices_facts(
    bot: BotHarness,
    human: Human,
    model: ScriptedModel,
    synapse,  # noqa: ANN001
) -> None:
    alice = human
    lobby, dm = await _start(bot, model, alice)
    bees = _shared(bot).add_sync(f"{alice.user_id} keeps bees", actor="test")
    bob = await Human.create(synapse)
    try:
        await bob.join(lobby)
        await alice.wait_for(joined(bob.user_id, lobby))
        bob_dm = await _dm(bot, bob)
        alice_pending = await _ask(alice, dm, "!memory forget bees")
        bob_lists = await _ask(bob, bob_dm, "!memory list")
        bob_names_her = await _ask(bob, bob_dm, f"!memory list {alice.user_id}")
        bob_forgets = await _ask(bob, bob_dm, "!memory forget bees")
        bob_none = await _ask(bob, bob_dm, "!memory forget unicorns")
        bob_confirms = await _ask(bob, lobby, "!memory forget confirm")
        after_bob = _live(bot)
        alice_lists = await _ask(alice, dm, "!memory list")
        alice_confirms = await _ask(alice, dm, "!memory forget confirm")
    finally:
        await bob.close()

    assert bees.id in alice_pending  # the positive control: hers to forget
    assert bob_lists == "I remember nothing about you here."
    assert bob_names_her == f"I remember nothing about {alice.user_id} here."
    assert bob_forgets == bob_none  # exactly as if there were nothing
    assert bob_forgets == "I remember nothing about you with those words here."
    assert bob_confirms == "Nothing is waiting for your confirmation to be forgotten."
    assert bees.id in after_bob  # Bob's confirm deleted nothing
    assert bees.id in alice_lists
    assert "keeps bees" in alice_lists
    assert alice_confirms.startswith("Forgot 1 thing.")
    assert bees.id not in _live(bot)


async def test_a_pending_forget_survives_a_restart_and_deletes_nothing_until_confirmed(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    alice = human
    lobby, dm = await _start(bot, model, alice)
    bees = _shared(bot).add_sync(f"{alice.user_id} keeps bees", actor="test")

    listed = await _ask(alice, dm, "!memory forget bees")
    await bot.stop()
    await bot.start()
    await bot.settle(alice, lobby)
    after_restart = _live(bot)
    confirmed = await _ask(alice, dm, "!memory forget confirm")

    assert bees.id in listed
    assert bees.id in after_restart  # the restart deleted nothing
    assert confirmed.startswith("Forgot 1 thing.")  # and lost nothing: the confirm still works
    assert bees.id not in _live(bot)


async def _answer_to(person: Human, room_id: str, prompt_id: str) -> str:
    """The body of the agent's reply to the message ``prompt_id``."""
    answer = await person.wait_for(
        lambda e: (
            e["room_id"] == room_id
            and e.get("type") == "m.room.message"
            and (relation(e).get("m.in_reply_to") or {}).get("event_id") == prompt_id
        ),
        timeout=30,
    )
    return str(answer["content"]["body"])


async def test_a_check_mark_on_the_forget_listing_confirms_it_and_a_cross_drops_it(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    alice = human
    _, dm = await _start(bot, model, alice)
    memory = _shared(bot)
    bees = memory.add_sync(f"{alice.user_id} keeps bees in the garden", actor="test")
    tea = memory.add_sync(f"{alice.user_id} likes green tea", actor="test")

    listing = await _reply(alice, dm, "!memory forget tea")
    await alice.react(dm, listing["event_id"], "❌")
    dropped = await _answer_to(alice, dm, listing["event_id"])
    after_cross = _live(bot)
    nothing = await _ask(alice, dm, "!memory forget confirm")  # the request is gone

    listing = await _reply(alice, dm, "!memory forget bees")
    before_check = _live(bot)
    await alice.react(dm, listing["event_id"], "✅")
    confirmed = await _answer_to(alice, dm, listing["event_id"])
    after_check = _live(bot)

    assert dropped.startswith("Nothing was forgotten")
    assert tea.id in after_cross
    assert nothing == "Nothing is waiting for your confirmation to be forgotten."
    assert bees.id in before_check  # listed, not yet confirmed: nothing deleted
    assert confirmed.startswith("Forgot 1 thing.")
    assert bees.id not in after_check  # the ✅ deleted it...
    assert tea.id in after_check  # ...and only it
    assert ("delete", alice.user_id) in [(r.op, r.actor) for r in memory.history_of(bees.id)]


async def test_a_check_mark_faster_than_the_listing_is_recorded_still_confirms_it(
    bot: BotHarness, human: Human, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing is recorded as a prompt once it is sent (its event ID is known only then),
    so a quick ✅ can reach the bot first: it waits for the listing's record and is answered.
    (A clean-clone CI run on a fast machine had the ✅ go unanswered.)"""
    alice = human
    _, dm = await _start(bot, model, alice)
    assert bot.bot is not None
    memory = _shared(bot)
    bees = memory.add_sync(f"{alice.user_id} keeps bees in the garden", actor="test")
    prompts = bot.bot.ledger.prompts
    desk = bot.bot.prompts
    recorded = asyncio.Event()
    add = prompts.add

    async def held_add(*args: Any, **kwargs: Any) -> None:  # the record comes late
        await recorded.wait()
        await add(*args, **kwargs)

    monkeypatch.setattr(prompts, "add", held_add)
    asked = await alice.send(dm, "!memory forget bees")
    listing = await alice.wait_for_reply(dm, asked, timeout=30)
    await alice.react(dm, listing["event_id"], "✅")
    await wait_until(lambda: desk.waiting == 1, "the ✅ waits for the listing's record")
    assert bees.id in _live(bot)  # nothing deleted before the record
    recorded.set()
    confirmed = await _answer_to(alice, dm, listing["event_id"])

    assert confirmed.startswith("Forgot 1 thing.")  # the control: it was answered
    assert bees.id not in _live(bot)
