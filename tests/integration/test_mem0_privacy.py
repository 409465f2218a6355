"""End to end: a shared agent and a private companion on mem0, two people in one room.

The file-backend versions are in tests/integration/test_privacy.py. Here the companion (``private:
{per: user}``) keeps its memory in mem0, every person's scope in one Chroma collection: one person's
memory must never reach the other's turns or scope, by recall, by the memory tools
(``list_memories``, ``search_memories``, ``memory_get``, ``get_memory`` with the other's id) or by
mem0's extraction, and each negative has its positive control (the owner's own turn). The companion
uses a person's private memory only in a room nobody else reads (their DM); in the room they share
it runs without it, even when its owner asks.

Real Synapse, real mem0 with a local Chroma and the local embedder, the scripted model.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable
from dataclasses import dataclass
from typing import Any

import pytest
from nio import RoomCreateResponse

from mindroom.memory.mem0 import Mem0Memory
from mindroom.memory.private import requester_key
from tests.integration.test_mem0_e2e import MEM0, flushed, is_mem0, new_messages, stored, tool_names
from tests.integration.test_privacy import said_by
from tests.support.harness import BotHarness, Human, config_text, joined, unique
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall, last_user_text, system_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

GENERAL_ROLE = "GENERAL-ROLE helps with anything."
MIND_ROLE = "MIND-ROLE is a private companion."
FRUITS = {f: f"The user's favorite fruit is {f}" for f in ("pineapple", "mango")}
READS = ("list_memories", "search_memories", "memory_get")  # get_memory takes an id


def this_step(request: dict) -> str:
    """What the companion knows in this step: its system prompt (the recall) and the results
    of the tools it called since the person's message (not the conversation's history)."""
    messages = request["messages"]
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    results = [str(m.get("content")) for m in messages[last_user:] if m["role"] == "tool"]
    return "\n".join([system_text(request), *results])


class Play:
    """general relays to @mind; mind stores what it is told, and when asked reads its memory
    by every tool it has (``probe_id`` too) and says which fruits it found; mem0's extraction
    makes one memory per fruit named."""

    probe_id = "00000000-0000-4000-8000-000000000000"  # the test sets alice's memory's id

    def __call__(self, request: dict) -> Reply | str:
        if is_mem0(request):
            found = [text for fruit, text in FRUITS.items() if fruit in new_messages(request)]
            return json.dumps({"memory": [{"id": str(i), "text": t} for i, t in enumerate(found)]})
        system, last = system_text(request), last_user_text(request)
        if MIND_ROLE in system:
            if request["messages"][-1]["role"] == "tool":
                if this_step(request).split("\n")[-1].startswith("remembered"):
                    return "Remembered."
            elif "please remember:" in last:
                fact = last.split("please remember:", 1)[1].strip()
                return Reply(tool_calls=[ToolCall("add_memory", {"text": fact})])
            elif tool_names(request):  # private recall: its memory tools are there
                return Reply(
                    tool_calls=[
                        ToolCall("list_memories", {}),
                        ToolCall("search_memories", {"query": "favorite fruit"}),
                        ToolCall("memory_get", {"path": "MEMORY.md"}),
                        ToolCall("get_memory", {"id": self.probe_id}),
                    ]
                )
            found = [fruit for fruit in FRUITS if fruit in this_step(request)]
            return "I know: " + (", ".join(found) or "nothing")
        if GENERAL_ROLE in system and "pass this on:" in last:
            return "@mind please remember: " + last.split("pass this on:", 1)[1].strip()
        if GENERAL_ROLE in system and "ask the companion" in last:
            return "@mind what is my favorite fruit?"
        return "Team answer."


@dataclass
class Lobby:
    room_id: str
    bob: Human
    play: Play
    general: str  # the accounts' user ids
    mind: str


@contextlib.asynccontextmanager
async def lobby(
    bot: BotHarness, alice: Human, model: ScriptedModel, synapse: Any, general_backend: str
) -> AsyncIterator[Lobby]:
    """Alice and Bob in a room with general (shared, on ``general_backend``; files keep
    nothing here) and mind (a private companion on mem0)."""
    room = unique("m0lobby")
    agents = {
        "general": {"role": GENERAL_ROLE, "rooms": [room], "memory_backend": general_backend},
        "mind": {"role": MIND_ROLE, "rooms": [room], "private": {"per": "user"}},
    }
    play = Play()
    model.set_handler(play)
    bob = await Human.create(synapse)
    try:
        room_id = await bot.start_in_room(
            config_text(model.base_url, agents, memory=MEM0), room, alice
        )
        await bob.join(room_id)
        assert bot.bot is not None
        ids = [bot.bot.agents[name].user_id for name in ("general", "mind")]
        yield Lobby(room_id, bob, play, *ids)
    finally:
        await bob.close()


def turns(model: ScriptedModel, start: int) -> list[dict]:
    """The conversational requests since ``start`` (no extraction)."""
    return [r for r in model.requests[start:] if not is_mem0(r)]


def tool_results(request: dict) -> dict[str, str]:
    messages = request["messages"]
    calls = {c["id"]: c["function"]["name"] for m in messages for c in m.get("tool_calls") or []}
    return {calls[m["tool_call_id"]]: str(m["content"]) for m in messages if m["role"] == "tool"}


def extracted_apart(model: ScriptedModel, people: list[tuple[Human, str]]) -> None:
    """mem0's extraction of each person's conversations (their lines carry their id) never
    saw the other's fruit, neither in the words nor among the memories it was shown."""
    for person, theirs in people:
        # a line names its speaker as "@id: text", or "Name (@id): text" in a group room
        named = (f"{person.user_id}: ", f"({person.user_id}): ")
        extractions = [
            r
            for r in model.requests
            if is_mem0(r) and any(mark in new_messages(r) for mark in named)
        ]
        assert extractions
        assert all(theirs not in last_user_text(r) for r in extractions)


def own(fruit: str) -> list[str]:
    """A person's companion scope after telling it their fruit: the text it was asked to
    remember (add_memory) and mem0's extraction of the conversation."""
    return sorted([f"my favorite fruit is {fruit}", FRUITS[fruit]])


async def first_id(bot: BotHarness, person: Human) -> str:
    assert bot.bot is not None
    memory = await asyncio.to_thread(bot.bot.memories.for_agent, "mind", person.user_id)
    assert isinstance(memory, Mem0Memory)
    return (await memory.list(100))[0].id


async def private_room(person: Human, agents: list[str]) -> str:
    """A room ``person`` makes with ``agents`` alone (a DM with one): nobody else reads it."""
    created = await person.client.room_create(invite=agents, is_direct=len(agents) == 1)
    assert isinstance(created, RoomCreateResponse), created
    for agent in agents:
        await person.wait_for(joined(agent, created.room_id))
    return created.room_id


async def ask_in_dm(person: Human, dm: str, text: str) -> str:
    asked = await person.send(dm, text)
    return (await person.final(await person.wait_for_reply(dm, asked, timeout=90)))["content"][
        "body"
    ]


async def test_each_persons_mem0_companion_is_theirs_in_their_dm_and_absent_from_the_group(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    alice = human
    async with lobby(bot, alice, model, synapse, "file") as at:
        bob, general = at.bob, [at.general]
        dms = {}
        for person, fruit in ((alice, "pineapple"), (bob, "mango")):  # each tells it in a DM
            dms[person.user_id] = await private_room(person, [at.mind])
            told = await ask_in_dm(
                person, dms[person.user_id], f"please remember: my favorite fruit is {fruit}"
            )
            assert told == "Remembered."
            await wait_until(lambda p=person, f=fruit: holds(bot, "mind", FRUITS[f], p.user_id))
            await wait_until(lambda: flushed(bot))
        at.play.probe_id = await first_id(bot, alice)
        answers_, requests, group = {}, {}, {}
        for person in (bob, alice):  # alice's is the positive control
            start = len(model.requests)
            answers_[person.user_id] = await ask_in_dm(
                person, dms[person.user_id], "what is my favorite fruit?"
            )
            requests[person.user_id] = turns(model, start)
            await wait_until(lambda: flushed(bot))
            start = len(model.requests)  # the same person, in the room Bob and Alice share
            asked = await person.send(at.room_id, "@general ask the companion", mention=general)
            group[person.user_id] = (
                await said_by(person, at.mind, asked, "I know"),
                turns(model, start),
            )
            await wait_until(lambda: flushed(bot))
        scopes = {p.user_id: await stored(bot, "mind", p.user_id) for p in (alice, bob)}

    # each one's companion turn in their DM read their own memory by recall and every tool
    for person, mine, theirs in ((alice, "pineapple", "mango"), (bob, "mango", "pineapple")):
        assert answers_[person.user_id] == f"I know: {mine}"
        asked = requests[person.user_id]
        assert all(theirs not in json.dumps(r) for r in asked)  # any request of the turn
        read = [r for r in asked if MIND_ROLE in system_text(r) and tool_results(r)][-1]
        assert FRUITS[mine] in system_text(read)  # recall
        results = tool_results(read)
        assert all(FRUITS[mine] in results[tool] for tool in READS)
        got = results["get_memory"]  # alice's id: hers for her, "no such memory" for bob
        assert FRUITS[mine] in got if person is alice else got.startswith("error: no memory")
        assert sorted(scopes[person.user_id]) == own(mine)
        # in the shared room the companion ran without anyone's private memory, or tools
        answer, handed = group[person.user_id]
        assert answer == "I know: nothing"
        companion = [r for r in handed if MIND_ROLE in system_text(r)]
        assert companion
        assert all(not tool_names(r) and "fruit is" not in system_text(r) for r in companion)
    extracted_apart(model, [(alice, "mango"), (bob, "pineapple")])
    private = bot.storage / "private_instances"
    assert not (private / requester_key(at.general)).exists()  # never an agent's "private" root


async def test_private_mem0_memory_stays_out_of_a_group_room_even_when_its_owner_asks(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    alice = human
    async with lobby(bot, alice, model, synapse, "mem0") as at:
        bob, room_id, mind = at.bob, at.room_id, [at.mind]
        dm = await private_room(alice, [at.mind])
        told = await ask_in_dm(alice, dm, "please remember: my favorite fruit is pineapple")
        assert told == "Remembered."
        await wait_until(lambda: holds(bot, "mind", FRUITS["pineapple"], alice.user_id))
        await wait_until(lambda: flushed(bot))
        at.play.probe_id = await first_id(bot, alice)

        start = len(model.requests)
        root = await alice.send(room_id, "@mind what is my favorite fruit?", mention=mind)
        addressed = await said_by(alice, at.mind, root, "I know")
        in_group = turns(model, start)
        start = len(model.requests)
        asked = await bob.send(
            room_id, "@mind what is my favorite fruit?", mention=mind, thread_root=root
        )
        bobs_answer = (await bob.wait_for_reply(room_id, asked, timeout=40))["content"]["body"]
        bobs = turns(model, start)
        start = len(model.requests)
        in_dm = await ask_in_dm(alice, dm, "what is my favorite fruit?")
        dm_turns = turns(model, start)
        await wait_until(lambda: flushed(bot))

    assert addressed == "I know: nothing"  # her own question, but Bob reads the room
    assert bobs_answer == "I know: nothing"
    for request in [*in_group, *bobs]:
        assert "pineapple" not in json.dumps(request)
    assert all(not tool_names(r) for r in in_group if MIND_ROLE in system_text(r))
    assert in_dm == "I know: pineapple"  # the positive control: in her DM it is hers
    answered = [r for r in dm_turns if tool_results(r)][-1]
    assert FRUITS["pineapple"] in system_text(answered)


async def test_an_ad_hoc_team_on_mem0_extracts_each_persons_words_into_their_own_scope(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    alice = human
    async with lobby(bot, alice, model, synapse, "mem0") as at:
        bob, room_id, both = at.bob, at.room_id, [at.general, at.mind]

        async def teamholds(person: Human) -> list[str]:
            assert bot.bot is not None
            members = ["general", "mind"]
            memory = await asyncio.to_thread(bot.bot.memories.for_team, members, person.user_id)
            assert isinstance(memory, Mem0Memory)
            return [e.text for e in await memory.list(100)]

        root = await alice.send(
            room_id, "my favorite fruit is pineapple @general @mind", mention=both
        )
        await alice.wait_for_reply(room_id, root, timeout=40)
        await wait_until(lambda: _contains(teamholds(alice), FRUITS["pineapple"]))
        await wait_until(lambda: flushed(bot))
        start = len(model.requests)
        said = await bob.send(
            room_id, "my favorite fruit is mango @general @mind", mention=both, thread_root=root
        )
        await bob.wait_for_reply(room_id, said, timeout=40)
        await wait_until(lambda: _contains(teamholds(bob), FRUITS["mango"]))
        await wait_until(lambda: flushed(bot))
        bobs, start = turns(model, start), len(model.requests)
        again = await alice.send(
            room_id, "@general @mind what is my favorite fruit?", mention=both, thread_root=root
        )
        await alice.wait_for_reply(room_id, again, timeout=40)
        alices_in_group, start = turns(model, start), len(model.requests)
        own_room = await private_room(alice, both)  # the team, where only she reads it
        again = await alice.send(
            own_room, "@general @mind what is my favorite fruit?", mention=both
        )
        await alice.wait_for_reply(own_room, again, timeout=40)
        alices = turns(model, start)
        teams = [await teamholds(p) for p in (alice, bob)]
        members = [await stored(bot, "general")] + [
            await stored(bot, "mind", p.user_id) for p in (alice, bob)
        ]

    assert teams == [[FRUITS["pineapple"]], [FRUITS["mango"]]]
    assert members == [[], [], []]  # a team turn's words stay in the team's scope
    assert all("pineapple" not in json.dumps(r) for r in bobs)
    # a team with a private member uses its memory only where nobody else reads the answer
    assert all(FRUITS["pineapple"] not in system_text(r) for r in alices_in_group)
    assert any(FRUITS["pineapple"] in system_text(r) for r in alices)  # positive control
    extracted_apart(model, [(alice, "mango"), (bob, "pineapple")])


async def _contains(texts: Awaitable[list[str]], text: str) -> bool:
    return text in await texts


async def holds(bot: BotHarness, agent: str, fact: str, requester: str | None = None) -> bool:
    return fact in await stored(bot, agent, requester)
