"""End to end: rooms as people make them (invites while down, encrypted rooms, absent agents)."""

from __future__ import annotations

import json
from typing import Any

import nio
import pytest

from tests.harness import (
    ENCRYPTION_STATE,
    BotHarness,
    Human,
    answers,
    config_text,
    joined,
    unique,
)
from tests.scripted_model import ScriptedModel

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

# What an encrypting client sends: mindroom cannot decrypt it (and need not, here).
MEGOLM_CONTENT = {
    "algorithm": "m.megolm.v1.aes-sha2",
    "ciphertext": "AwgAEpAB",
    "sender_key": "abc",
    "session_id": "def",
    "device_id": "DEVICE",
}


async def reload_with(bot: BotHarness, doc: dict[str, Any]) -> None:
    """Save config.yaml as an editor would and apply it now (the watcher may apply it too; a
    second reload of the same file changes nothing)."""
    assert bot.bot is not None
    assert bot.bot.reloader is not None
    bot.write_config(json.dumps(doc, indent=2))
    assert await bot.bot.reloader.reload() is not None


def encryption_notices(human: Human, room_id: str, sender: str) -> list[dict[str, Any]]:
    return [
        e
        for e in human.posted(room_id, sender)
        if e["content"].get("msgtype") == "m.notice"
        and "end-to-end encrypted" in e["content"].get("body", "")
    ]


@pytest.mark.parametrize("position", ["saved", "reset"])
async def test_invite_sent_while_the_bot_was_down_is_accepted_at_the_next_start(
    bot: BotHarness, human: Human, model: ScriptedModel, position: str
) -> None:
    """With a saved sync position the catch-up hears the invite; without one (the ledger was
    reset, the accounts kept) only the first sync sees it, pending in ``rooms.invite``."""
    config = config_text(model.base_url, {"general": {"rooms": []}})
    await bot.start(config)
    general = bot.bot.agents["general"].user_id
    await bot.stop()
    if position == "reset":
        (bot.storage / "mindroom_data" / "ledger.db").unlink()

    created = await human.client.room_create(invite=[general], is_direct=True)
    assert isinstance(created, nio.RoomCreateResponse), created
    await bot.start()

    await human.wait_for(joined(general, created.room_id), timeout=30)
    asked = await human.send(created.room_id, "are you there?")
    reply = await human.wait_for(lambda e: answers(e, asked) and e.get("sender") == general)
    assert "are you there?" in reply["content"]["body"]


@pytest.mark.parametrize("position", ["saved", "reset"])
async def test_invite_to_an_agent_a_reload_adds_back_is_accepted_when_it_starts(
    bot: BotHarness, human: Human, model: ScriptedModel, position: str
) -> None:
    """A person opens a DM with an agent removed from the config; adding it back answers it.

    With a saved sync position its catch-up hears the invite; without one (the ledger was reset,
    the account kept) only its first sync sees it, pending in ``rooms.invite``, as at start-up.
    """
    agents = {"general": {"rooms": []}, "coder": {"rooms": []}}
    doc = json.loads(config_text(model.base_url, agents))
    await bot.start(json.dumps(doc))
    coder = bot.bot.agents["coder"].user_id
    without = json.loads(json.dumps(doc))
    del without["agents"]["coder"]
    if position == "saved":
        await reload_with(bot, without)
        assert "coder" not in bot.bot.agents
    else:
        await bot.stop()
        (bot.storage / "mindroom_data" / "ledger.db").unlink()
        await bot.start(json.dumps(without))

    created = await human.client.room_create(invite=[coder], is_direct=True)
    assert isinstance(created, nio.RoomCreateResponse), created
    await human.wait_for(lambda e: e.get("room_id") == created.room_id)  # the invite is out
    await reload_with(bot, doc)

    await human.wait_for(joined(coder, created.room_id), timeout=30)
    asked = await human.send(created.room_id, "are you back?")
    reply = await human.wait_for(lambda e: answers(e, asked) and e.get("sender") == coder)
    assert "are you back?" in reply["content"]["body"]


async def test_invite_from_an_outsider_sent_while_the_bot_was_down_is_declined_at_start(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse: Any
) -> None:
    outsider = await Human.create(synapse)
    try:
        config = config_text(
            model.base_url,
            {"general": {"rooms": []}},
            authorization={"allowed_users": [human.user_id]},
        )
        await bot.start(config)
        general = bot.bot.agents["general"].user_id
        await bot.stop()
        (bot.storage / "mindroom_data" / "ledger.db").unlink()  # only the first sync sees it
        created = await outsider.client.room_create(invite=[general], is_direct=True)
        assert isinstance(created, nio.RoomCreateResponse), created
        await bot.start()
        await outsider.wait_for(
            lambda e: (
                e.get("room_id") == created.room_id
                and e.get("type") == "m.room.member"
                and e.get("state_key") == general
                and e["content"].get("membership") == "leave"
            )
        )
        assert not any(joined(general, created.room_id)(e) for e in outsider.events)
    finally:
        await outsider.close()


async def test_agent_invited_to_an_encrypted_room_posts_one_notice_that_survives_restarts(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    config = config_text(model.base_url, {"general": {"rooms": []}})
    await bot.start(config)
    general = bot.bot.agents["general"].user_id
    created = await human.client.room_create(
        invite=[general], is_direct=True, initial_state=[ENCRYPTION_STATE]
    )
    assert isinstance(created, nio.RoomCreateResponse), created
    room_id = created.room_id
    notice = await human.wait_for(
        lambda e: (
            e.get("room_id") == room_id
            and e.get("sender") == general
            and "end-to-end encrypted" in e.get("content", {}).get("body", "")
        )
    )
    assert notice["content"]["msgtype"] == "m.notice"
    assert "without encryption" in notice["content"]["body"]

    # An encrypted message (what Element sends there) is the same signal: not a second notice.
    sent = await human.client.room_send(
        room_id,
        "m.room.encrypted",
        MEGOLM_CONTENT,
    )
    assert isinstance(sent, nio.RoomSendResponse), sent
    await bot.stop()
    await bot.start()  # at start the bot looks at every encrypted room it is in

    # Positive control: the bot has read everything before this command and answered it.
    await bot.settle(human, room_id)
    assert len(encryption_notices(human, room_id, general)) == 1


async def test_mention_of_an_agent_not_in_the_room_gets_a_notice_on_how_to_invite_it(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("absent")
    config = config_text(model.base_url, {"general": {"rooms": [room]}, "coder": {"rooms": []}})
    room_id = await bot.start_in_room(config, room, human)
    coder = bot.bot.agents["coder"].user_id
    router = bot.bot.router.user_id

    asked = await human.send(room_id, "@coder can you look at this?", mention=[coder])
    notice = await human.wait_for(lambda e: answers(e, asked))
    assert notice["sender"] == router
    assert notice["content"]["msgtype"] == "m.notice"
    assert f"/invite {coder}" in notice["content"]["body"]

    await bot.settle(human, room_id)
    general = bot.bot.agents["general"].user_id
    assert human.posted(room_id, general) == []
    assert model.requests == []


async def test_a_room_that_turns_encryption_on_gets_the_notice_at_its_first_encrypted_message(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    config = config_text(model.base_url, {"general": {"rooms": []}})
    await bot.start(config)
    general = bot.bot.agents["general"].user_id
    created = await human.client.room_create(invite=[general], is_direct=True)
    assert isinstance(created, nio.RoomCreateResponse), created
    room_id = created.room_id
    await human.wait_for(joined(general, room_id), timeout=30)
    await bot.settle(human, room_id)
    assert encryption_notices(human, room_id, general) == []

    turned_on = await human.client.room_put_state(
        room_id, "m.room.encryption", {"algorithm": "m.megolm.v1.aes-sha2"}
    )
    assert isinstance(turned_on, nio.RoomPutStateResponse), turned_on
    sent = await human.client.room_send(room_id, "m.room.encrypted", MEGOLM_CONTENT)
    assert isinstance(sent, nio.RoomSendResponse), sent
    await human.wait_for(lambda e: bool(encryption_notices(human, room_id, general)))
    await bot.settle(human, room_id)
    assert len(encryption_notices(human, room_id, general)) == 1


@pytest.mark.parametrize("rel_type", ["m.reference", "org.example.x"])
async def test_message_with_an_unknown_relation_type_is_answered_as_a_plain_message(
    bot: BotHarness, human: Human, model: ScriptedModel, rel_type: str
) -> None:
    room = unique("relation")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    general = bot.bot.agents["general"].user_id
    first = await human.send(room_id, "first")
    await human.wait_for(lambda e: answers(e, first) and e.get("sender") == general)
    related = {"m.relates_to": {"rel_type": rel_type, "event_id": first}}
    asked = await human.send(room_id, "and this one?", extra=related)
    reply = await human.wait_for(lambda e: answers(e, asked) and e.get("sender") == general)
    assert "and this one?" in reply["content"]["body"]
