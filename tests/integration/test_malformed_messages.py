"""Messages a client got wrong get a notice saying what was wrong, never silence:
a mention whose ``formatted_body`` is not text, a file with no ``url``, a ``!memory confirm``
with a 35 KB argument. Sent as raw events by a real client to the real Synapse; each case has
a well-formed neighbour answered normally (the control)."""

from __future__ import annotations

from typing import Any

import nio
import pytest

from tests.support.harness import BotHarness, Human, config_text, joined
from tests.support.scripted_model import ScriptedModel, all_text, last_user_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


async def _raw(human: Human, room_id: str, content: dict[str, Any]) -> str:
    sent = await human.client.room_send(room_id, "m.room.message", content)
    assert isinstance(sent, nio.RoomSendResponse), sent
    return sent.event_id


async def _room_with_general(bot: BotHarness, human: Human, model: ScriptedModel) -> str:
    """A room of ``human`` with the agent ``general`` and the router (not a DM: an agent
    answers only when named)."""
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    agents = {"general": {"rooms": ["lobby"], "streaming": False}}
    return await bot.start_in_room(config_text(model.base_url, agents), "lobby", human)


async def test_a_mention_whose_formatted_body_is_not_text_gets_a_notice(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room_id = await _room_with_general(bot, human, model)
    assert bot.bot is not None
    agent = bot.bot.agents["general"].user_id
    mention = {"m.mentions": {"user_ids": [agent]}}
    number = await _raw(
        human,
        room_id,
        {
            "msgtype": "m.text",
            "body": "@general hello",
            "format": "org.matrix.custom.html",
            "formatted_body": 42,
            **mention,
        },
    )
    an_object = await _raw(
        human,
        room_id,
        {
            "msgtype": "m.text",
            "body": "@general hello again",
            "format": "org.matrix.custom.html",
            "formatted_body": {"html": "<b>hi</b>"},
            **mention,
        },
    )
    fine = await _raw(human, room_id, {"msgtype": "m.text", "body": "@general fine", **mention})

    answers = [await human.wait_for_reply(room_id, e, timeout=30) for e in (number, an_object)]
    control = await human.wait_for_reply(room_id, fine, timeout=30)

    for answer in answers:
        assert answer["content"]["msgtype"] == "m.notice"
        assert "formatted_body" in answer["content"]["body"]
    # the model saw the control (a room shared with others names its speaker: "Name (@id): ...")
    assert control["content"]["body"].startswith("echo: ")
    assert control["content"]["body"].endswith("@general fine")
    assert all("hello" not in all_text(r) for r in model.requests)  # no model saw them


async def _dm_with_general(bot: BotHarness, human: Human, model: ScriptedModel) -> str:
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    agents = {"general": {"rooms": [], "streaming": False}}
    await bot.start(config_text(model.base_url, agents))
    assert bot.bot is not None
    agent = bot.bot.agents["general"].user_id
    created = await human.client.room_create(invite=[agent], is_direct=True)
    assert isinstance(created, nio.RoomCreateResponse), created
    await human.wait_for(joined(agent, created.room_id))
    return created.room_id


async def test_a_file_without_a_url_gets_a_notice(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room_id = await _dm_with_general(bot, human, model)
    no_url = await _raw(
        human,
        room_id,
        {
            "msgtype": "m.file",
            "body": "report.pdf",
            "filename": "report.pdf",
            "info": {"mimetype": "application/pdf", "size": 100},
        },
    )
    fine = await _raw(human, room_id, {"msgtype": "m.text", "body": "still there?"})

    notice = await human.wait_for_reply(room_id, no_url, timeout=30)
    control = await human.wait_for_reply(room_id, fine, timeout=30)

    assert notice["content"]["msgtype"] == "m.notice"
    assert "report.pdf" in notice["content"]["body"]
    assert "no url" in notice["content"]["body"].lower()
    assert control["content"]["body"] == "echo: still there?"


async def test_a_35_kb_memory_confirm_argument_gets_a_notice(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room_id = await _dm_with_general(bot, human, model)
    huge = await _raw(
        human, room_id, {"msgtype": "m.text", "body": "!memory confirm " + "p" * 35_000}
    )
    short = await _raw(human, room_id, {"msgtype": "m.text", "body": "!memory confirm p-none"})

    notice = await human.wait_for_reply(room_id, huge, timeout=30)
    control = await human.wait_for_reply(room_id, short, timeout=30)

    assert notice["content"]["msgtype"] == "m.notice"
    assert "p" * 200 not in notice["content"]["body"]  # the argument is not echoed back
    assert "proposal" in notice["content"]["body"]
    assert "No proposal 'p-none'" in control["content"]["body"]


async def test_a_command_answer_too_large_to_post_gets_a_short_notice(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    """``!config get`` of a 40 KB role: the homeserver refuses the answer (too large), so a
    short notice says so instead of silence; a small value is shown (the control)."""
    agents = {"general": {"rooms": [], "role": "r" * 40_000}}
    config = config_text(model.base_url, agents, authorization={"admins": [human.user_id]})
    await bot.start(config)
    assert bot.bot is not None
    agent = bot.bot.agents["general"].user_id
    created = await human.client.room_create(invite=[agent], is_direct=True)
    assert isinstance(created, nio.RoomCreateResponse), created
    room_id = created.room_id
    await human.wait_for(joined(agent, room_id))
    big = await human.send(room_id, "!config get agents.general.role")
    small = await human.send(room_id, "!config get models.default.id")

    notice = await human.wait_for_reply(room_id, big, timeout=30)
    control = await human.wait_for_reply(room_id, small, timeout=30)

    assert notice["content"]["msgtype"] == "m.notice"
    assert "could not be posted" in notice["content"]["body"]
    assert "too large" in notice["content"]["body"]
    assert "scripted" in control["content"]["body"]
