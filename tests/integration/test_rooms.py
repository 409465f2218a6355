"""End to end: rooms as people make them (invites while down, encrypted rooms, absent agents)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nio
import pytest

from tests.support.harness import (
    DECRYPTED,
    ENCRYPTION_STATE,
    BotHarness,
    Human,
    answers,
    client_api,
    config_text,
    joined,
    unique,
)
from tests.support.scripted_model import ScriptedModel, last_user_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

# An encrypted event whose room key no device of mindroom's was ever given.
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


async def test_an_undecryptable_message_in_an_encrypted_room_is_asked_for_once_across_restarts(
    bot: BotHarness, synapse, model: ScriptedModel, tmp_path: Path
) -> None:
    person = await Human.create(synapse, keys=tmp_path / "keys")
    try:
        await bot.start(config_text(model.base_url, {"general": {"rooms": []}}))
        general = bot.bot.agents["general"].user_id
        created = await person.client.room_create(
            invite=[general], is_direct=True, initial_state=[ENCRYPTION_STATE]
        )
        assert isinstance(created, nio.RoomCreateResponse), created
        room_id = created.room_id
        await person.wait_for(joined(general, room_id), timeout=30)
        await bot.settle(person, room_id)  # answered: the agent reads the encrypted room
        assert encryption_notices(person, room_id, general) == []

        path = f"/_matrix/client/v3/rooms/{room_id}/send/m.room.encrypted/undecryptable-1"
        sent = await client_api(
            person.client, "PUT", path, MEGOLM_CONTENT
        )  # as sent, not re-encrypted
        await person.wait_for(lambda e: bool(asked_again(person, room_id, general)), timeout=30)
        await bot.stop()
        await bot.start()  # a restart neither repeats nor loses it
        await bot.settle(person, room_id)
        notices = asked_again(person, room_id, general)
    finally:
        await person.close()

    assert len(notices) == 1
    assert notices[0]["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == sent["event_id"]


def asked_again(human: Human, room_id: str, sender: str) -> list[dict[str, Any]]:
    return [
        e
        for e in human.posted(room_id, sender)
        if "could not decrypt" in e["content"].get("body", "")
    ]


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


async def test_a_room_that_turns_encryption_on_keeps_its_conversation_encrypted(
    bot: BotHarness, synapse, model: ScriptedModel, tmp_path: Path
) -> None:
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    person = await Human.create(synapse, keys=tmp_path / "keys")
    try:
        await bot.start(config_text(model.base_url, {"general": {"rooms": []}}))
        general = bot.bot.agents["general"].user_id
        created = await person.client.room_create(invite=[general], is_direct=True)
        assert isinstance(created, nio.RoomCreateResponse), created
        room_id = created.room_id
        await person.wait_for(joined(general, room_id), timeout=30)
        before = await person.send(room_id, "in the clear")
        plain = await person.wait_for_reply(room_id, before)

        turned_on = await person.client.room_put_state(
            room_id, "m.room.encryption", {"algorithm": "m.megolm.v1.aes-sha2"}
        )
        assert isinstance(turned_on, nio.RoomPutStateResponse), turned_on
        await person.wait_for(lambda e: e.get("type") == "m.room.encryption")
        after = await person.send(room_id, "now encrypted")
        secret = await person.wait_for_reply(room_id, after)
    finally:
        await person.close()

    assert plain["content"]["body"] == "echo: in the clear"
    assert not plain.get(DECRYPTED)
    assert secret["content"]["body"] == "echo: now encrypted"
    assert secret.get(DECRYPTED)
    assert encryption_notices(person, room_id, general) == []


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
