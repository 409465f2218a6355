"""The model knows who is speaking, and in a group who said what."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest
from mindroom.config import parse_config
from mindroom.memory.extraction import ChatLine, transcript
from mindroom.memory.flush.loop import FlushWorker
from mindroom.memory.registry import MemoryRegistry
from mindroom.speakers import named_line, who
from tests.support.harness import BotHarness, Human, config_text, unique
from tests.support.scripted_model import ScriptedModel, all_text, last_user_text, system_text


def test_a_speaker_is_named_with_display_name_and_matrix_id() -> None:
    assert who("Alice", "@alice:example.org") == "Alice (@alice:example.org)"
    assert who(None, "@alice:example.org") == "@alice:example.org"
    assert who("@alice:example.org", "@alice:example.org") == "@alice:example.org"


async def talk_in_one_thread(
    bot: BotHarness, model: ScriptedModel, turns: list[tuple[Human, str]]
) -> None:
    """Start a bot with ``general`` in a new room, bring every speaker in, and have each say
    their line to ``@general`` in one thread (the first line starts it), waiting for replies."""
    room = unique("lobby")
    model.set_handler(lambda request: "noted")
    first = turns[0][0]
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, first
    )
    for person in {id(p): p for p, _ in turns[1:] if p is not first}.values():
        await person.join(room_id)
    assert bot.bot is not None
    general = bot.bot.agents["general"].user_id
    root: str | None = None
    for person, text in turns:
        said = await person.send(room_id, f"@general {text}", mention=[general], thread_root=root)
        root = root or said
        await person.wait_for_reply(room_id, said)


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_in_a_room_with_several_people_the_model_is_told_who_speaks(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    alice, bob = human, await Human.create(synapse)
    try:
        await talk_in_one_thread(bot, model, [(alice, "I prefer tea"), (bob, "I prefer coffee")])
        request = next(r for r in reversed(model.requests) if "coffee" in last_user_text(r))
    finally:
        await bob.close()

    assert f"You are answering {bob.user_id}" in system_text(request) or (
        f"({bob.user_id}) prefers tea" in system_text(request)  # with a display name
    )
    assert f"({bob.user_id}): @general I prefer coffee" in last_user_text(request)
    alices = next(r for r in model.requests if "tea" in last_user_text(r))
    assert f"({alice.user_id}): @general I prefer tea" in last_user_text(alices)
    assert bob.user_id not in all_text(alices)  # each turn names its own speaker


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_two_people_in_one_thread_share_its_history(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    """A shared agent's thread is one conversation, whoever speaks in it (with several people
    in a thread the agent answers when named).

    Agno owns a session by the user_id of its first run: a second person's turns were neither
    shown the thread's history nor saved to it."""
    alice, bob = human, await Human.create(synapse)
    try:
        await talk_in_one_thread(
            bot,
            model,
            [
                (alice, "the launch is on Tuesday"),
                (bob, "and the demo is on Friday"),
                (alice, "what did we plan?"),
            ],
        )
    finally:
        await bob.close()

    bobs = next(r for r in model.requests if "Friday" in last_user_text(r))
    alices = next(r for r in model.requests if "what did we plan" in last_user_text(r))
    assert "the launch is on Tuesday" in all_text(bobs)  # Bob sees what Alice said
    assert "the demo is on Friday" in all_text(alices)  # and his turn was kept for Alice
    assert "the launch is on Tuesday" in all_text(alices)


@pytest.mark.asyncio
async def test_the_flush_of_a_shared_thread_names_each_person_it_heard(
    tmp_path: Path, model: ScriptedModel
) -> None:
    """Two people in one shared thread: the extraction reads both, each under their own ID."""
    config = parse_config(
        config_text(
            model.base_url,
            {"general": {"rooms": ["r"]}},
            memory={"auto_flush": {"enabled": True}},
        ),
        "config.yaml",
    )
    model.set_handler(
        lambda r: "NO_REPLY" if "You maintain the long-term memory" in system_text(r) else "ok"
    )
    registry = MemoryRegistry(config, tmp_path)
    runtime = AgentRuntime(config, tmp_path / "mindroom_data", registry)
    worker = FlushWorker(config, runtime, registry, tmp_path / "mindroom_data")
    session = "general:room:t1"
    try:
        for person, text in (("@alice:x", "I prefer tea"), ("@bob:x", "I prefer coffee")):
            assert (await runtime.run_turn(TurnRequest("general", session, person, text))).ok
            await worker.turn_finished("general", session, None)  # shared: no requester
        await worker.cycle(force=True)
    finally:
        await worker.aclose()
        await runtime.close()
        registry.close()

    transcripts = [
        last_user_text(r).split("Conversation:\n", 1)[1]
        for r in model.requests
        if "You maintain the long-term memory" in system_text(r)
    ]
    assert transcripts
    said = transcripts[-1]
    assert "@alice:x: I prefer tea" in said
    assert "@bob:x: I prefer coffee" in said


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_recall_in_a_group_looks_for_what_was_said_not_for_who_said_it(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    """The model reads "Name (@id): message" in a group, but recall searches the message.

    Searching with the speaker's name and ID pulled every entry naming the speaker into
    chit-chat, and diluted the meaning of the question (on mem0 the cosine of "what is my
    favorite color?" with the fact fell from 0.65 to about 0.5, the gate)."""
    room = unique("grp")
    model.set_handler(lambda request: "noted")
    alice, bob = human, await Human.create(synapse)
    try:
        room_id = await bot.start_in_room(
            config_text(model.base_url, {"general": {"rooms": [room]}}), room, alice
        )
        await bob.join(room_id)
        assert bot.bot is not None
        memory = bot.bot.memories.for_agent("general")
        assert memory is not None
        bobs_name = bob.user_id[1:].split(":")[0]
        await memory.add(  # an older day's entry: recalled only when relevant
            f"{bobs_name} owes the team a coffee", actor="test", path="memory/2026-01-05.md"
        )
        general = bot.bot.agents["general"].user_id
        for text in ("good morning everyone", "who owes the team a coffee?"):
            said = await bob.send(room_id, f"@general {text}", mention=[general])
            await bob.wait_for_reply(room_id, said)
    finally:
        await bob.close()

    chit_chat = next(r for r in model.requests if "good morning" in last_user_text(r))
    question = next(r for r in model.requests if "who owes" in last_user_text(r))
    assert f"({bob.user_id}): @general good morning" in last_user_text(chit_chat)
    assert "owes the team a coffee" not in system_text(chit_chat)
    assert f"{bobs_name} owes the team a coffee" in system_text(question)  # positive control


def test_a_transcript_names_each_person_once() -> None:
    """A group message is kept as "Name (@id): text": its transcript line does not name the
    person a second time, and a line without a name gets the Matrix ID."""
    lines = [
        ChatLine("user", "Bob (@bob:x): I prefer coffee", "@bob:x"),
        ChatLine("user", "I prefer tea", "@alice:x"),
        ChatLine("user", "Carol (@carol:x) said: Bob (@bob:x): hi", "@dave:x"),
        ChatLine("assistant", "noted"),
    ]
    assert transcript(lines).splitlines() == [
        "Bob (@bob:x): I prefer coffee",
        "@alice:x: I prefer tea",
        "@dave:x: Carol (@carol:x) said: Bob (@bob:x): hi",
        "assistant: noted",
    ]
    assert named_line("@bob:x: hi", "@bob:x") == "@bob:x: hi"
    assert named_line("hi", None) == "hi"
