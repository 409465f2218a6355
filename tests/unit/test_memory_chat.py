"""``!memory list | forget | undo | remember`` without a homeserver: the pending forgets in a
real ledger file, the commands on real memories of the repository's config (a shared
``general``, a private companion ``mind``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from mindroom.config import load_config
from mindroom.config.schema import Config
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.consent import Person
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.registry import MemoryRegistry
from mindroom.people import memory_chat
from mindroom.store.ledger import Ledger
from tests.support.harness import repo_config

ALICE = "@alice:localhost"
BOB = "@bob:localhost"
ROOM = "!dm:localhost"
AGENTS = ["general", "mind"]


@pytest_asyncio.fixture
async def ledger(tmp_path: Path) -> AsyncIterator[Ledger]:
    opened = await Ledger.open(tmp_path / "ledger.db")
    yield opened
    await opened.close()


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return load_config(repo_config(tmp_path))


@pytest.fixture
def registry(config: Config, tmp_path: Path) -> Iterator[MemoryRegistry]:
    opened = MemoryRegistry(config, tmp_path, tmp_path)
    yield opened
    opened.close()


def _shared(registry: MemoryRegistry) -> FileMemory:
    memory = registry.for_agent("general")
    assert isinstance(memory, FileMemory)
    return memory


async def _say(
    config: Config, registry: MemoryRegistry, ledger: Ledger, sender: str, argument: str
) -> memory_chat.ChatAnswer:
    return await memory_chat.answer(
        config, registry, ledger.forgets, AGENTS, sender, argument, room_id=ROOM, in_dm=True
    )


@pytest.mark.asyncio
async def test_a_new_forget_replaces_the_pending_one_and_one_confirmation_wins(
    ledger: Ledger,
) -> None:
    forgets = ledger.forgets
    first = await forgets.offer(ALICE, ALICE, [("general", "agent_general", "m-1")], ROOM, 60)
    assert await forgets.set_prompt(ALICE, first.created_at, "$listing1")
    second = await forgets.offer(
        ALICE, ALICE, [("general", "agent_general", "m-2")], ROOM, 60, now=first.created_at + 1
    )
    assert not await forgets.set_prompt(ALICE, first.created_at, "$late")  # replaced meanwhile
    assert await forgets.by_prompt("$listing1") is None  # the old listing confirms nothing
    pending = await forgets.get(ALICE, "pending")
    assert pending is not None
    assert pending.entries == (("general", "agent_general", "m-2"),)
    assert await forgets.get(BOB, "pending") is None
    assert await forgets.confirm(second, 3600)
    assert not await forgets.confirm(second, 3600)  # a command and a reaction: once
    done = await forgets.get(ALICE, "done")
    assert done is not None
    assert await forgets.get(ALICE, "pending") is None
    assert await forgets.take_done(done)
    assert not await forgets.take_done(done)


@pytest.mark.asyncio
async def test_a_pending_forget_expires(ledger: Ledger) -> None:
    record = await ledger.forgets.offer(ALICE, ALICE, [("general", "s", "m-1")], ROOM, 60)
    assert await ledger.forgets.get(ALICE, "pending", now=record.created_at + 59) is not None
    assert await ledger.forgets.get(ALICE, "pending", now=record.created_at + 61) is None


def test_a_forget_matches_every_word_in_any_case() -> None:
    assert memory_chat.matches("Alice keeps Bees in the garden", "bees GARDEN")
    assert not memory_chat.matches("Alice keeps bees", "bees garden")


@pytest.mark.asyncio
async def test_forget_lists_the_senders_entries_deletes_on_confirm_and_undo_restores(
    config: Config, registry: MemoryRegistry, ledger: Ledger
) -> None:
    memory = _shared(registry)
    bees = memory.add_sync(f"{ALICE} keeps bees", actor="test")
    bobs = memory.add_sync(f"{BOB} keeps bees too", actor="test")

    listed = await _say(config, registry, ledger, ALICE, "forget bees")
    assert listed.forget is not None
    assert bees.id in listed.text
    assert bobs.id not in listed.text  # only what is about the sender
    assert memory.lookup(bees.id) is not None
    by_reaction = await memory_chat.confirm_forget(
        config, registry, ledger.forgets, BOB, prompt_event_id="$listing"
    )
    assert by_reaction == "Nothing is waiting for your confirmation to be forgotten."
    await memory_chat.record_prompt(ledger.forgets, listed, "$listing")
    by_bob = await memory_chat.confirm_forget(
        config, registry, ledger.forgets, BOB, prompt_event_id="$listing"
    )
    assert by_bob == by_reaction  # Bob may not confirm Alice's forget
    assert memory.lookup(bees.id) is not None
    confirmed = await memory_chat.confirm_forget(
        config, registry, ledger.forgets, ALICE, prompt_event_id="$listing"
    )
    assert confirmed.startswith("Forgot 1 thing.")
    assert memory.lookup(bees.id) is None
    assert memory.lookup(bobs.id) is not None
    undone = (await _say(config, registry, ledger, ALICE, "undo")).text
    assert undone.startswith("Restored 1 thing.")
    assert memory.lookup(bees.id) is not None


def test_remember_stores_a_fact_about_the_sender_that_list_then_shows(
    config: Config, registry: MemoryRegistry
) -> None:
    people = [Person(ALICE, "Alice"), Person(BOB, "Bob")]  # the room's
    said = memory_chat.remember(config, registry, ["general"], ALICE, "I live in Lyon", people)
    assert said.startswith("Remembered")
    listed = memory_chat.list_text(config, registry, ["general"], ALICE, "", in_dm=True)
    assert "I live in Lyon" in listed  # hers: a personal detail on her own word
    held = memory_chat.remember(config, registry, ["general"], ALICE, "Bob lives in Paris", people)
    assert held.startswith("Not stored yet")  # about someone else: it waits for consent
    assert "Paris" not in _shared(registry).scope.entrypoint.read_text()
    others = memory_chat.list_text(config, registry, ["general"], BOB, "", in_dm=True)
    assert others == "I remember nothing about you here."


def test_a_private_companions_memory_is_its_persons_alone(
    config: Config, registry: MemoryRegistry
) -> None:
    mind = registry.for_agent("mind", ALICE)
    assert isinstance(mind, FileMemory)
    mind.add_sync("Likes long walks", actor="test")
    alice = memory_chat.list_text(config, registry, ["mind"], ALICE, "", in_dm=True)
    bob = memory_chat.list_text(config, registry, ["mind"], BOB, "", in_dm=True)
    named = memory_chat.list_text(config, registry, ["mind"], BOB, ALICE, in_dm=True)
    assert "Likes long walks" in alice
    assert "private memory of mind" in alice
    assert bob == "I remember nothing about you here."
    assert named == f"I remember nothing about {ALICE} here."  # Bob is no admin


def test_a_group_room_gets_a_count_and_no_text(config: Config, registry: MemoryRegistry) -> None:
    for n in range(3):
        _shared(registry).add_sync(f"{ALICE} fact {n}", actor="test")
    said = memory_chat.list_text(config, registry, ["general"], ALICE, "", in_dm=False)
    assert said.startswith("I remember 3 things about you here")
    assert "fact" not in said


@pytest.mark.asyncio
async def test_forget_me_erases_a_persons_forget_requests(ledger: Ledger, tmp_path: Path) -> None:
    from mindroom.people.data import Person as Whose
    from mindroom.people.data import delete_owned_rows

    await ledger.forgets.offer(ALICE, ALICE, [("general", "s", "m-1")], ROOM, 60)
    await ledger.forgets.offer(BOB, BOB, [("general", "s", "m-2")], ROOM, 60)
    assert delete_owned_rows(tmp_path / "ledger.db", Whose(ALICE)) == 1
    assert await ledger.forgets.get(ALICE, "pending") is None
    assert await ledger.forgets.get(BOB, "pending") is not None  # the control: Bob's stays


@pytest.mark.asyncio
async def test_forget_outside_a_dm_names_only_what_the_room_may_show(
    config: Config, registry: MemoryRegistry, ledger: Ledger
) -> None:
    """In the lobby, ``forget`` neither lists nor records an entry Alice told in her DM (its
    id would let anyone there ask an agent for it), and answers its id as one it does not
    know; the entry told in the lobby is listed there (the control), and her DM lists both."""
    memory = _shared(registry)
    told_in_dm = EntryFields(audience=f"dm:{ALICE}")
    secret = memory.add_sync(f"{ALICE} keeps bees in secret", actor="test", fields=told_in_dm)
    public = memory.add_sync(
        f"{ALICE} keeps bees", actor="test", fields=EntryFields(audience="public")
    )
    lobby = RoomAudience.shared(frozenset({ALICE, BOB}), room_id="!lobby:localhost")

    async def in_lobby(argument: str) -> memory_chat.ChatAnswer:
        return await memory_chat.answer(
            config,
            registry,
            ledger.forgets,
            AGENTS,
            ALICE,
            argument,
            room_id="!lobby:localhost",
            in_dm=False,
            room=lobby,
        )

    listed = await in_lobby("forget bees")
    assert listed.forget is not None
    assert public.id in listed.text  # the control
    assert secret.id not in listed.text
    assert "bees" not in listed.text  # no texts outside a DM
    assert [entry_id for _, _, entry_id in listed.forget.entries] == [public.id]
    assert memory_chat.ONLY_HERE in listed.text
    by_id = await in_lobby(f"forget {secret.id}")
    assert by_id.forget is None
    assert by_id.text == (await in_lobby("forget unicorns")).text  # as if it did not exist
    in_dm = await _say(config, registry, ledger, ALICE, "forget bees")
    assert secret.id in in_dm.text
    assert public.id in in_dm.text
    assert memory_chat.ONLY_HERE not in in_dm.text
