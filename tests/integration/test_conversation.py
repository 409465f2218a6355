"""End to end: a human talks to agents over a real Synapse; the model is scripted."""

from __future__ import annotations

import pytest

from tests.support.harness import BotHarness, Human, config_text, joined, relation, unique
from tests.support.scripted_model import Reply, ScriptedModel, all_text, last_user_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


def two_agents(model: ScriptedModel, room: str, **general: object) -> str:
    return config_text(
        model.base_url,
        {
            "general": {
                "display_name": "General",
                "role": "Helps with anything.",
                "rooms": [room],
                **general,
            },
            "coder": {"display_name": "Coder", "role": "Writes code.", "rooms": [room]},
        },
    )


async def test_mention_is_answered_in_a_thread(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("lobby")
    room_id = await bot.start_in_room(two_agents(model, room), room, human)
    model.push("Hello! I am **General**.")
    general = bot.bot.agents["general"].user_id

    asked = await human.send(room_id, "hi @general, who are you?", mention=[general])
    reply = await human.wait_for_reply(room_id, asked)

    assert reply["sender"] == general
    content = reply["content"]
    assert content["body"] == "Hello! I am **General**."
    assert "<strong>General</strong>" in content["formatted_body"]
    assert content["format"] == "org.matrix.custom.html"
    rel = relation(reply)
    assert rel["rel_type"] == "m.thread"
    assert rel["event_id"] == asked
    assert rel["is_falling_back"] is True
    assert rel["m.in_reply_to"]["event_id"] == asked
    assert last_user_text(model.requests[0]).endswith("hi @general, who are you?")


async def test_thread_reply_continues_the_same_session(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("lobby")
    room_id = await bot.start_in_room(two_agents(model, room), room, human)
    general = bot.bot.agents["general"].user_id
    model.push("Nice to meet you, Ada.")
    model.push("Your name is Ada.")

    root = await human.send(room_id, "@general my name is Ada", mention=[general])
    await human.wait_for_reply(room_id, root)
    follow = await human.send(room_id, "what is my name?", thread_root=root)
    reply = await human.wait_for_reply(room_id, follow)
    assert reply["sender"] == general

    assert relation(reply)["event_id"] == root  # still in the same thread
    history = all_text(model.requests[1])
    assert "my name is Ada" in history
    assert "Nice to meet you, Ada." in history


async def test_of_two_agents_only_the_mentioned_one_answers(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("lobby")
    room_id = await bot.start_in_room(two_agents(model, room), room, human)
    coder = bot.bot.agents["coder"].user_id
    general = bot.bot.agents["general"].user_id

    asked = await human.send(room_id, "@coder write hello world", mention=[coder])
    reply = await human.wait_for_reply(room_id, asked)
    await bot.settle(human, room_id)

    assert reply["sender"] == coder
    assert len(model.requests) == 1  # no router call, no second agent
    answered = [
        e
        for e in human.messages(room_id)
        if e["sender"] in (coder, general) and relation(e).get("rel_type") != "m.replace"
    ]
    assert len(answered) == 1


async def test_pill_in_formatted_body_counts_as_a_mention(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("lobby")
    room_id = await bot.start_in_room(two_agents(model, room), room, human)
    coder = bot.bot.agents["coder"].user_id

    asked = await human.send(
        room_id,
        "Coder: ping",
        extra={
            "format": "org.matrix.custom.html",
            "formatted_body": f'<a href="https://matrix.to/#/{coder}">Coder</a>: ping',
        },
    )
    reply = await human.wait_for_reply(room_id, asked)
    assert reply["sender"] == coder


async def test_single_agent_room_needs_no_mention(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = config_text(model.base_url, {"general": {"rooms": [room]}})
    room_id = await bot.start_in_room(config, room, human)
    model.push("At your service.")

    asked = await human.send(room_id, "hello?")
    reply = await human.wait_for_reply(room_id, asked)
    assert reply["content"]["body"] == "At your service."


async def test_direct_message_invite_is_accepted_and_answered(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    await bot.start(config_text(model.base_url, {"general": {"rooms": []}}))
    general = bot.bot.agents["general"].user_id
    created = await human.client.room_create(invite=[general], is_direct=True)
    room_id = created.room_id
    await human.wait_for(joined(general, room_id))
    model.push("Hi in private.")
    asked = await human.send(room_id, "psst")
    reply = await human.wait_for_reply(room_id, asked)
    assert reply["content"]["body"] == "Hi in private."


async def test_edits_notices_and_bot_messages_are_ignored(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = config_text(model.base_url, {"general": {"rooms": [room]}})
    room_id = await bot.start_in_room(config, room, human)
    model.push("first answer")
    general = bot.bot.agents["general"]

    asked = await human.send(room_id, "question one")
    await human.wait_for_reply(room_id, asked)
    await human.send(
        room_id,
        "* question one, edited",
        extra={
            "m.new_content": {"msgtype": "m.text", "body": "question one, edited"},
            "m.relates_to": {"rel_type": "m.replace", "event_id": asked},
        },
    )
    await human.send(room_id, "a notice", msgtype="m.notice")
    # The agent itself (another mindroom account) posting in the room must not trigger anyone.
    await general.send(room_id, {"msgtype": "m.text", "body": "talking to myself"})
    await bot.settle(human, room_id)  # the three events above were read before the control

    assert len(model.requests) == 1
    posted = [
        e
        for e in human.messages(room_id, general.user_id)
        if relation(e).get("rel_type") != "m.replace"
    ]
    assert len(posted) == 2  # its one answer and its own message


async def test_model_error_is_reported_as_a_notice(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = config_text(model.base_url, {"general": {"rooms": [room]}})
    room_id = await bot.start_in_room(config, room, human)
    model.push(Reply(status=401, error_message="Incorrect API key provided"))

    asked = await human.send(room_id, "hello")
    reply = await human.wait_for_reply(room_id, asked)

    content = reply["content"]
    assert content["msgtype"] == "m.notice"
    assert "default" in content["body"]  # which model
    assert "Incorrect API key provided" in content["body"]  # and why
    assert relation(reply)["event_id"] == asked

    model.push("recovered")  # the bot survived and still answers
    again = await human.send(room_id, "hello again")
    assert (await human.wait_for_reply(room_id, again))["content"]["body"] == "recovered"


async def test_unreachable_model_is_reported_as_a_notice(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = config_text("http://127.0.0.1:9/v1", {"general": {"rooms": [room]}})
    room_id = await bot.start_in_room(config, room, human)

    asked = await human.send(room_id, "hello")
    reply = await human.wait_for_reply(room_id, asked)

    assert reply["content"]["msgtype"] == "m.notice"
    assert "127.0.0.1:9" in reply["content"]["body"]
    assert "onnect" in reply["content"]["body"]  # "Connection error"


async def test_unauthorized_user_gets_no_reply(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    room = unique("solo")
    config = config_text(
        model.base_url,
        {"general": {"rooms": [room]}},
        authorization={"allowed_users": [human.user_id]},
    )
    room_id = await bot.start_in_room(config, room, human)
    stranger = await Human.create(synapse)
    try:
        await stranger.join(room_id)
        ignored = await stranger.send(room_id, "hello, I am not allowed")
        allowed = await human.send(room_id, "hello, I am allowed")
        await human.wait_for_reply(room_id, allowed)
        await bot.settle(human, room_id)
        assert not any(relation(e).get("event_id") == ignored for e in human.messages(room_id))
        assert len(model.requests) == 1
    finally:
        await stranger.close()


async def test_room_thread_mode_answers_in_the_main_timeline(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = config_text(model.base_url, {"general": {"rooms": [room], "thread_mode": "room"}})
    room_id = await bot.start_in_room(config, room, human)
    model.push("one")
    model.push("two")

    first = await human.send(room_id, "remember 42")
    await human.wait_for_reply(room_id, first)
    second = await human.send(room_id, "what did I say?")
    reply = await human.wait_for_reply(room_id, second)

    assert relation(reply).get("rel_type") is None
    assert "remember 42" in all_text(model.requests[1])  # one session for the room


async def test_typing_notice_is_shown_while_the_agent_works(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    config = config_text(model.base_url, {"general": {"rooms": [room]}})
    room_id = await bot.start_in_room(config, room, human)
    general = bot.bot.agents["general"].user_id
    model.push(Reply(text="thought about it", delay=1.5))

    asked = await human.send(room_id, "think hard")
    typing = await human.wait_for(
        lambda e: e["type"] == "m.typing" and general in e["content"]["user_ids"]
    )
    assert typing["room_id"] == room_id
    await human.wait_for_reply(room_id, asked)
    await human.wait_for(
        lambda e: (
            e["type"] == "m.typing"
            and e["room_id"] == room_id
            and general not in e["content"]["user_ids"]
        )
    )
