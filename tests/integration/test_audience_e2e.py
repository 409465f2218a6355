"""End to end: a fact is never recalled where more people can read it than where it was told.

Alice tells the shared agent ``general`` her salary in her DM; the flush turns it into
``general``'s memory. Bob asks ``general`` in the lobby: neither the fact nor Alice's DM words
(past conversations) reach the model for him, while a fact told in the lobby does (the
positive control), and Alice's own question in her DM gets her fact. A hot reload of
``memory.audience`` applies at the next turn, and a private companion brought into the lobby
(handed the conversation, or named) runs without Alice's private memory. Real Synapse, real
files and Agno; the scripted model extracts ``REMEMBER:`` lines and records every request.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from tests.support.harness import (
    BotHarness,
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
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

SALARY = "SALARY-91000"
PLANT = "PLANT-FERNANDO"
EXTRACTION = "You maintain the long-term memory of an assistant"


def extract_and_answer(request: dict[str, Any]) -> Reply | str:
    """The extraction writes every ``REMEMBER: X`` of the transcript as a fact; turns say ok."""
    if EXTRACTION in system_text(request):
        facts = re.findall(r"REMEMBER: ([\w -]+)", last_user_text(request))
        return "\n".join(f"- {fact.strip()}" for fact in facts) or "NO_REPLY"
    if "Which agent should answer?" in last_user_text(request):
        return '{"agent": "general"}'
    return "ok"


def turn_requests(model: ScriptedModel, words: str) -> list[dict[str, Any]]:
    """The requests of the turns that answered a message containing ``words``."""
    return [
        r for r in model.requests if words in last_user_text(r) and EXTRACTION not in system_text(r)
    ]


def recalled(request: dict[str, Any]) -> str:
    """The memory given to a turn (the ``<memory>`` block), not its history."""
    found = re.search(r"<memory>(.*)</memory>", all_text(request), re.S)
    return found.group(1) if found else ""


async def tell_salary_and_plant(
    bot: BotHarness, alice: Human, bob: Human, dm: str, lobby: str, general: str
) -> None:
    """Alice tells ``general`` her salary in her DM, Bob tells it the plant in the lobby, and
    the flush writes both to its memory (each with the audience of where it was told)."""
    told = await alice.send(dm, f"REMEMBER: Alice salary is {SALARY}")
    await alice.wait_for_reply(dm, told, timeout=40)
    said = await bob.send(lobby, f"@general REMEMBER: lobby plant is {PLANT}", mention=[general])
    await bob.wait_for_reply(lobby, said, timeout=40)
    ledger = bot.storage / "mindroom_data" / "ledger.db"
    await wait_until_ledger_idle(ledger, time.monotonic() + 30)
    assert bot.bot is not None
    await bot.bot.flush.cycle(force=True)


async def test_a_fact_told_in_a_dm_is_recalled_there_and_never_for_someone_else_in_the_lobby(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse: Any
) -> None:
    alice, room = human, unique("lobby")
    model.set_handler(extract_and_answer)
    config = json.loads(config_text(model.base_url, {"general": {"rooms": [room]}}))
    config["memory"] = {
        "auto_flush": {"enabled": True, "idle_seconds": 3600},
        "embedder": "none",
        "maintenance": {"enabled": False},
        "sources": ["memory", "sessions"],
        "session_index_messages": 1,
    }
    bob = await Human.create(synapse)
    try:
        lobby = await bot.start_in_room(json.dumps(config), room, alice)
        await bob.join(lobby)
        assert bot.bot is not None
        general = bot.bot.agents["general"].user_id
        dm = (await alice.client.room_create(invite=[general], is_direct=True)).room_id
        await alice.wait_for(joined(general, dm))

        await tell_salary_and_plant(bot, alice, bob, dm, lobby, general)
        memory = bot.bot.memories.for_agent("general")
        assert memory is not None
        stored = "".join(p.read_text() for p in memory.scope.root.rglob("*.md"))
        assert SALARY in stored  # both facts are in general's memory
        assert PLANT in stored

        asked = await bob.send(lobby, "@general salary plant REMEMBER?", mention=[general])
        await bob.wait_for_reply(lobby, asked, timeout=40)
        ledger = bot.storage / "mindroom_data" / "ledger.db"
        await wait_until_ledger_idle(ledger, time.monotonic() + 30)
        await bot.bot.flush.cycle(force=True)  # the lobby's second chunk, with memory known
        mine = await alice.send(dm, "what about my salary plant?")
        await alice.wait_for_reply(dm, mine, timeout=40)
    finally:
        await bob.close()

    bobs = turn_requests(model, "salary plant REMEMBER?")
    assert bobs
    assert PLANT in recalled(bobs[-1])  # the control: a lobby fact is recalled in the lobby
    assert SALARY not in all_text(bobs[-1])  # neither the fact nor Alice's DM words
    alices = turn_requests(model, "what about my salary plant?")
    assert alices
    assert SALARY in recalled(alices[-1])  # her own fact, recalled in her DM
    lobby_flush = [
        r for r in model.requests if EXTRACTION in system_text(r) and PLANT in last_user_text(r)
    ]
    assert lobby_flush  # the extraction of a lobby conversation is shown what it may know...
    assert all(SALARY not in all_text(r) for r in lobby_flush)  # ...never a DM fact


def extract_search_and_answer(request: dict[str, Any]) -> Reply | str:
    """As :func:`extract_and_answer`, and a "question" turn first searches its memory with the
    tools for "salary" and for "plant" (the tools' view of memory, beside the recall)."""
    if "question" in last_user_text(request) and EXTRACTION not in system_text(request):
        if request["messages"][-1]["role"] != "tool":
            searches = [ToolCall("search_memories", {"query": q}) for q in ("salary", "plant")]
            return Reply(tool_calls=searches)
        return "ok"
    return extract_and_answer(request)


def tool_results(request: dict[str, Any]) -> str:
    """What the tools returned to a turn."""
    return "\n".join(str(m["content"]) for m in request["messages"] if m["role"] == "tool")


def memory_section(policy: str) -> dict[str, Any]:
    """A memory section with the flush on (its idle wait far beyond a test: the tests force
    it), past conversations recalled too, and the audience policy ``policy``."""
    return {
        "audience": policy,
        "auto_flush": {"enabled": True, "idle_seconds": 3600},
        "embedder": "none",
        "maintenance": {"enabled": False},
        "sources": ["memory", "sessions"],
        "session_index_messages": 1,
    }


async def seen_in(bot: BotHarness, agent: str, room_id: str, person: str) -> None:
    """Wait until ``agent``'s account has synced ``person``'s membership of ``room_id`` (the
    audience of a turn there is computed from what the accounts synced)."""
    assert bot.bot is not None
    client = bot.bot.agents[agent].client

    def seen() -> bool:
        room = client.rooms.get(room_id)
        return room is not None and person in room.users

    await wait_until(seen, f"{agent} sees {person} in {room_id}")


def write_config(bot: BotHarness, doc: dict[str, Any]) -> None:
    """Replace config.yaml in one step, as an editor saving it would (the watcher reloads)."""
    path = bot.storage / "config.yaml"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.replace(path)


async def test_a_hot_reload_of_the_audience_policy_applies_to_the_next_turn(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse: Any
) -> None:
    """``memory.audience`` edited in config.yaml while mindroom runs: under ``shared`` Bob's
    next lobby turn gets Alice's DM fact, under ``strict`` (before, and after switching back)
    it does not; the lobby fact is recalled in every turn (the control), and the bot is the
    same one throughout (no restart). The memory tools follow the policy too."""
    alice, room = human, unique("lobby")
    model.set_handler(extract_search_and_answer)
    doc = json.loads(config_text(model.base_url, {"general": {"rooms": [room]}}))
    doc["memory"] = memory_section("strict")
    bob = await Human.create(synapse)
    asked: dict[str, str] = {}
    try:
        lobby = await bot.start_in_room(json.dumps(doc), room, alice)
        await bob.join(lobby)
        assert bot.bot is not None
        running, account = bot.bot, bot.bot.agents["general"]
        general = account.user_id
        dm = (await alice.client.room_create(invite=[general], is_direct=True)).room_id
        await alice.wait_for(joined(general, dm))
        await seen_in(bot, "general", lobby, bob.user_id)

        await tell_salary_and_plant(bot, alice, bob, dm, lobby, general)
        memory = running.memories.for_agent("general")
        assert memory is not None
        stored = "".join(p.read_text() for p in memory.scope.root.rglob("*.md"))
        assert SALARY in stored  # both facts are in general's memory
        assert PLANT in stored

        for step, policy in (("one", "strict"), ("two", "shared"), ("three", "strict")):
            if running.config.memory.audience != policy:
                doc["memory"]["audience"] = policy
                write_config(bot, doc)
                await wait_until(lambda p=policy: running.config.memory.audience == p)
            words = f"salary plant question {step}?"
            event = await bob.send(lobby, f"@general {words}", mention=[general])
            await bob.wait_for_reply(lobby, event, timeout=40)
            asked[step] = words
        assert bot.bot is running  # no restart...
        assert running.agents["general"] is account  # ...and the agent kept running
    finally:
        await bob.close()

    turns = {step: turn_requests(model, words) for step, words in asked.items()}
    assert all(turns.values())
    for step in ("one", "two", "three"):
        assert PLANT in recalled(turns[step][-1])  # the control: the lobby fact, every turn
        assert PLANT in tool_results(turns[step][-1])  # and the tools find it
    assert SALARY in tool_results(turns["two"][-1])  # shared: the tools find the DM fact too
    assert SALARY not in all_text(turns["one"][-1])  # strict: not Alice's DM fact
    assert SALARY in recalled(turns["two"][-1])  # shared, at the next turn: everything
    assert SALARY not in all_text(turns["three"][-1])  # strict again: gone again


GENERAL_ROLE = "GENERAL-ROLE helps with anything."
MIND_ROLE = "MIND-ROLE is a private companion."
CODE_WORD = "CODEWORD-MANGO"


def companion_play(request: dict[str, Any]) -> Reply | str:
    """The extraction as in :func:`extract_and_answer`; ``general`` hands "ask the companion"
    to ``@mind``; ``mind`` says which code word its memory block holds."""
    system, last = system_text(request), last_user_text(request)
    if EXTRACTION in system:
        facts = re.findall(r"REMEMBER: ([\w -]+)", last)
        return "\n".join(f"- {fact.strip()}" for fact in facts) or "NO_REPLY"
    if "Which agent should answer?" in last:
        return '{"agent": "general"}'
    if MIND_ROLE in system:
        found = re.search(r"CODEWORD-\w+", recalled(request))
        return f"I know: {found.group(0) if found else 'nothing'}"
    if GENERAL_ROLE in system and "ask the companion" in last:
        return "@mind what do you know about the code word?"
    return "ok"


@pytest.mark.parametrize("policy", ["strict", "shared"])
async def test_a_companion_handed_a_lobby_conversation_keeps_alices_private_memory_out(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse: Any, policy: str
) -> None:
    """Alice's DM with the private companion ``mind`` puts her code word in her private
    memory (stamped with her DM's audience). In the lobby Bob reads, ``mind`` runs without it
    however it got there: ``general`` handing Alice's question to it, handing Bob's, or Alice
    naming it. In her DM it is recalled (the control), and ``mind`` did run in the lobby each
    time (the other control). Under ``strict`` the entry's audience keeps it out as well; under
    ``shared`` (no audience condition) the private memory stays out all the same: it is used
    only where nobody but its person reads."""
    alice, room = human, unique("lobby")
    model.set_handler(companion_play)
    doc = json.loads(
        config_text(
            model.base_url,
            {
                "general": {"role": GENERAL_ROLE, "rooms": [room]},
                "mind": {"role": MIND_ROLE, "rooms": [room], "private": {"per": "user"}},
            },
        )
    )
    doc["memory"] = memory_section(policy)
    bob = await Human.create(synapse)
    lobby_answers: list[str] = []
    try:
        lobby = await bot.start_in_room(json.dumps(doc), room, alice)
        await bob.join(lobby)
        assert bot.bot is not None
        general = bot.bot.agents["general"].user_id
        mind = bot.bot.agents["mind"].user_id
        dm = (await alice.client.room_create(invite=[mind], is_direct=True)).room_id
        await alice.wait_for(joined(mind, dm))
        await seen_in(bot, "general", lobby, bob.user_id)
        await seen_in(bot, "mind", lobby, bob.user_id)

        told = await alice.send(dm, f"REMEMBER: Alice code word is {CODE_WORD}")
        await alice.wait_for_reply(dm, told, timeout=40)
        ledger = bot.storage / "mindroom_data" / "ledger.db"
        await wait_until_ledger_idle(ledger, time.monotonic() + 30)
        await bot.bot.flush.cycle(force=True)
        private = bot.bot.memories.for_agent("mind", alice.user_id)
        assert private is not None
        stored = "".join(p.read_text() for p in private.scope.root.rglob("*.md"))
        assert CODE_WORD in stored  # her private memory holds it...
        assert f"dm:{alice.user_id}" in stored  # ...learned in her DM
        lobby_start = len(model.requests)

        for person, text, mentioned in (
            (alice, "@general ask the companion", general),
            (bob, "@general ask the companion", general),
            (alice, "@mind what do you know about the code word?", mind),
        ):
            event = await person.send(lobby, text, mention=[mentioned])
            answer = await person.wait_for(
                lambda e, root=event: (
                    e.get("sender") == mind
                    and e.get("room_id") == lobby
                    and relation(e).get("rel_type") == "m.thread"
                    and relation(e).get("event_id") == root
                ),
                timeout=40,
            )
            lobby_answers.append((await person.final(answer))["content"]["body"])
        in_lobby = model.requests[lobby_start:]

        asked = await alice.send(dm, "what do you know about the code word?")
        dm_answer = await alice.wait_for_reply(dm, asked, timeout=40)
    finally:
        await bob.close()

    mind_turns = [r for r in in_lobby if MIND_ROLE in system_text(r)]
    assert len(mind_turns) >= 3  # the control: mind ran for each of the three
    assert all(answer.startswith("I know: nothing") for answer in lobby_answers)
    for request in in_lobby:  # no turn in the lobby, of either agent, saw the code word
        assert EXTRACTION in system_text(request) or CODE_WORD not in all_text(request)
    dm_turn = turn_requests(model, "what do you know about the code word?")[-1]
    assert MIND_ROLE in system_text(dm_turn)
    assert CODE_WORD in recalled(dm_turn)  # the control: in her DM it is recalled
    assert dm_answer["content"]["body"].startswith(f"I know: {CODE_WORD}")
