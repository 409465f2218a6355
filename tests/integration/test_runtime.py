"""End to end: the router, hand-offs, streaming, long replies, commands, access control."""

from __future__ import annotations

import asyncio
import json

import pytest

from mindroom.adapters.matrix.send import IN_PROGRESS_MARKER, MAX_BODY_CHARS
from tests.support.harness import BotHarness, Human, config_text, relation, unique
from tests.support.scripted_model import Reply, ScriptedModel, all_text, system_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

ROUTER_MODEL = "router-model"


def team_config(model: ScriptedModel, room: str, **sections: object) -> str:
    text = config_text(
        model.base_url,
        {
            "general": {"role": "Helps with anything.", "rooms": [room]},
            "coder": {"role": "Writes code.", "rooms": [room]},
        },
        router={"model": "router"},
        **sections,
    )
    doc = json.loads(text)
    doc["models"]["router"] = {**doc["models"]["default"], "id": ROUTER_MODEL}
    return json.dumps(doc)


async def test_router_model_picks_the_agent_when_none_is_mentioned(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("team")
    room_id = await bot.start_in_room(team_config(model, room), room, human)
    model.push('{"agent": "coder"}', model=ROUTER_MODEL)
    model.push("def hello(): ...")

    asked = await human.send(room_id, "how do I write a python function?")
    reply = await human.wait_for_reply(room_id, asked)

    assert reply["sender"] == bot.bot.agents["coder"].user_id
    router_request = next(r for r in model.requests if r["model"] == ROUTER_MODEL)
    question = all_text(router_request)
    assert "coder: Writes code." in question
    assert "general: Helps with anything." in question
    assert "how do I write a python function?" in question


async def test_router_model_failure_still_yields_one_reply(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("team")
    room_id = await bot.start_in_room(team_config(model, room), room, human)
    model.push(Reply(status=500, error_message="router down", retryable=False), model=ROUTER_MODEL)
    model.push("answered anyway")

    asked = await human.send(room_id, "hello?")
    reply = await human.wait_for_reply(room_id, asked)
    await bot.settle(human, room_id)

    assert reply["content"]["body"] == "answered anyway"
    assert reply["sender"] == bot.bot.agents["general"].user_id  # the deterministic fallback
    agents = [a.user_id for a in bot.bot.agents.values()]
    answers = [e for s in agents for e in human.posted(room_id, s)]
    assert len(answers) == 1


async def test_agents_hand_off_by_mention_and_the_chain_is_capped(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("team")
    config = json.loads(team_config(model, room))
    config["router"]["max_agent_hops"] = 3
    room_id = await bot.start_in_room(json.dumps(config), room, human)

    def ping_pong(request: dict) -> str:
        if "Writes code." in system_text(request):
            return "@general back to you"
        return "@coder over to you"

    model.set_handler(ping_pong)
    general = bot.bot.agents["general"].user_id
    coder = bot.bot.agents["coder"].user_id

    await human.send(room_id, "@general start the relay", mention=[general])
    await human.wait_for(lambda e: e.get("sender") == coder)
    await human.wait_for(lambda e: len(human.posted(room_id, general)) == 2)  # hop 3 came
    await bot.settle(human, room_id)  # and the capped hop 4 would have come by now

    assert len(human.posted(room_id, general)) == 2  # hop 1 and hop 3
    assert len(human.posted(room_id, coder)) == 1  # hop 2
    assert len(model.requests) == 3
    # the hand-off went to coder with general's text as its input
    assert "@coder over to you" in all_text(model.requests[1])


async def test_streaming_sends_one_message_then_edits_it_to_the_full_text(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    pace = {"stream_first_send_seconds": 0.2, "stream_edit_interval_seconds": 0.5}
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}, defaults=pace), room, human
    )
    full = " ".join(f"word{i}" for i in range(60))
    model.push(Reply(text=full, chunks=8, chunk_delay=0.4))

    asked = await human.send(room_id, "tell me a long story")
    reply = await human.wait_for_reply(room_id, asked)
    await bot.settle(human, room_id)  # a second message would have come by now

    assert reply["first_content"]["body"].endswith(IN_PROGRESS_MARKER)
    assert len(reply["first_content"]["body"]) < len(full)
    assert reply["content"]["body"] == full
    edits = human.edits_of(reply["event_id"])
    # progress edits at the pace of `defaults` (1.2 s and 2.8 s at the default pace), then the
    # final one
    assert len(edits) >= 3
    assert edits[-1]["content"]["m.new_content"]["body"] == full
    assert not edits[-1]["content"]["m.new_content"]["body"].endswith(IN_PROGRESS_MARKER)
    assert len(human.posted(room_id, bot.bot.agents["general"].user_id)) == 1


async def test_streaming_off_sends_the_whole_answer_once(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = config_text(model.base_url, {"general": {"rooms": [room], "streaming": False}})
    room_id = await bot.start_in_room(config, room, human)
    model.push(Reply(text="all at once", chunks=4))

    asked = await human.send(room_id, "hi")
    reply = await human.wait_for_reply(room_id, asked)
    await bot.settle(human, room_id)

    assert reply["content"]["body"] == "all at once"
    assert "first_content" not in reply
    assert human.edits_of(reply["event_id"]) == []


async def test_long_reply_is_split_at_paragraph_boundaries(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    paragraphs = [f"Paragraph {i}: " + " ".join(["lorem"] * 300) for i in range(16)]
    full = "\n\n".join(paragraphs)
    assert len(full) > 2 * MAX_BODY_CHARS
    model.push(Reply(text=full, chunks=12))
    general = bot.bot.agents["general"].user_id

    asked = await human.send(room_id, "write a lot")
    await human.wait_for_reply(room_id, asked)
    # the last part is finished when an edit (or the message itself) ends with the text's end
    await human.wait_for(
        lambda e: (
            e.get("sender") == general
            and (e["content"].get("m.new_content") or e["content"])
            .get("body", "")
            .endswith(paragraphs[-1][-40:])
        ),
        timeout=30,
    )
    await bot.settle(human, room_id)  # every part's final edit is in

    parts = [await human.final(e) for e in human.posted(room_id, general)]
    bodies = [p["content"]["body"] for p in parts]
    assert len(bodies) >= 3
    assert all(len(b) <= MAX_BODY_CHARS for b in bodies)
    assert all(b.startswith("Paragraph ") for b in bodies)  # each part starts a paragraph
    assert "\n\n".join(bodies) == full
    assert all(relation(p)["event_id"] == asked for p in parts)  # all in the thread


async def test_commands_are_answered_by_the_router_in_their_thread(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("team")
    room_id = await bot.start_in_room(team_config(model, room), room, human)
    router = bot.bot.router.user_id

    asked = await human.send(room_id, "!help")
    help_reply = await human.wait_for_reply(room_id, asked)
    assert help_reply["sender"] == router
    assert help_reply["content"]["msgtype"] == "m.notice"
    for name in ("general", "coder"):
        assert bot.bot.agents[name].user_id in help_reply["content"]["body"]
    assert "!new" in help_reply["content"]["body"]

    agents = await human.send(room_id, "!agents", thread_root=asked)
    agents_reply = await human.wait_for_reply(room_id, agents)
    assert relation(agents_reply)["rel_type"] == "m.thread"
    assert relation(agents_reply)["event_id"] == asked  # answered in the thread
    assert f"#{room}" in agents_reply["content"]["body"]

    bogus = await human.send(room_id, "!frobnicate")
    hint = await human.wait_for_reply(room_id, bogus)
    assert "!help" in hint["content"]["body"]
    await bot.settle(human, room_id)
    assert model.requests == []  # commands never reach a model


async def test_new_command_starts_a_fresh_session_in_room_mode(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = config_text(model.base_url, {"general": {"rooms": [room], "thread_mode": "room"}})
    room_id = await bot.start_in_room(config, room, human)

    first = await human.send(room_id, "my secret is 1234")
    await human.wait_for_reply(room_id, first)
    new = await human.send(room_id, "!new")
    confirmation = await human.wait_for_reply(room_id, new)
    assert "fresh" in confirmation["content"]["body"]
    after = await human.send(room_id, "what is my secret?")
    await human.wait_for_reply(room_id, after)
    await bot.settle(human, room_id)

    assert len(model.requests) == 2
    assert "my secret is 1234" not in all_text(model.requests[1])


async def test_unauthorized_commands_are_ignored_and_room_overrides_apply(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    room = unique("solo")
    outsider = await Human.create(synapse)
    try:
        config = config_text(
            model.base_url,
            {"general": {"rooms": [room]}},
            rooms={room: {"allowed_users": [human.user_id]}},
        )
        room_id = await bot.start_in_room(config, room, human)
        await outsider.join(room_id)
        ignored_command = await outsider.send(room_id, "!help")
        ignored_message = await outsider.send(room_id, "hello from outside")
        allowed = await human.send(room_id, "hello from inside")
        await human.wait_for_reply(room_id, allowed)
        await bot.settle(human, room_id)

        answered = {relation(e).get("event_id") for e in human.messages(room_id)}
        assert ignored_command not in answered
        assert ignored_message not in answered
        assert len(model.requests) == 1
    finally:
        await outsider.close()


async def test_invite_from_unauthorized_user_is_declined(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    outsider = await Human.create(synapse)
    try:
        await bot.start(
            config_text(
                model.base_url,
                {"general": {"rooms": []}},
                authorization={"allowed_users": [human.user_id]},
            )
        )
        general = bot.bot.agents["general"].user_id
        created = await outsider.client.room_create(invite=[general], is_direct=True)
        left = await outsider.wait_for(
            lambda e: (
                e.get("type") == "m.room.member"
                and e.get("state_key") == general
                and e["content"].get("membership") == "leave"
            )
        )
        assert left["room_id"] == created.room_id
        assert not any(
            e.get("state_key") == general and e["content"].get("membership") == "join"
            for e in outsider.events
        )
    finally:
        await outsider.close()


async def test_fifty_concurrent_messages_in_five_threads_are_each_answered_once(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("busy")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    roots = [await human.send(room_id, f"thread {t}") for t in range(5)]
    for root in roots:
        await human.wait_for_reply(room_id, root)
    model.clear()

    sent = await asyncio.gather(
        *(
            human.send(room_id, f"message {t}.{i}", thread_root=roots[t])
            for t in range(5)
            for i in range(10)
        )
    )
    replies = [await human.wait_for_reply(room_id, event_id, timeout=60) for event_id in sent]
    await bot.settle(human, room_id, timeout=60)

    for event_id, reply in zip(sent, replies, strict=True):
        answers = [
            e
            for e in human.posted(room_id, bot.bot.agents["general"].user_id)
            if relation(e).get("m.in_reply_to", {}).get("event_id") == event_id
        ]
        assert len(answers) == 1, event_id
        assert relation(reply)["event_id"] in roots
    assert len(model.requests) == 50
