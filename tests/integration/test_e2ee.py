"""End-to-end encryption: agents read and answer encrypted rooms, on a real
Synapse, with an encrypting nio client as the person (as Element would be)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import nio
import pytest

from tests.support.harness import (
    DECRYPTED,
    BotHarness,
    Human,
    client_api,
    config_text,
    encrypted_dm,
)
from tests.support.scripted_model import ScriptedModel, last_user_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


@contextlib.asynccontextmanager
async def echo_agent_in_encrypted_dm(
    bot: BotHarness,
    model: ScriptedModel,
    synapse,
    keys: Path,  # noqa: ANN001
) -> AsyncIterator[tuple[Human, str, str]]:
    """An encrypting person in an encrypted DM with an agent that echoes: (them, the agent's
    user ID, the room); the person's client is closed after the block."""
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    person = await Human.create(synapse, keys=keys)
    try:
        await bot.start(config_text(model.base_url, {"general": {"rooms": [], "streaming": False}}))
        assert bot.bot is not None
        agent = bot.bot.agents["general"].user_id
        yield person, agent, await encrypted_dm(person, agent)
    finally:
        await person.close()


async def test_an_encrypted_dm_is_answered_encrypted_and_still_read_after_a_restart(
    bot: BotHarness, model: ScriptedModel, synapse, tmp_path: Path
) -> None:
    async with echo_agent_in_encrypted_dm(bot, model, synapse, tmp_path / "keys") as (
        person,
        _,
        room_id,
    ):
        first = await person.send(room_id, "the secret word is heliotrope")
        reply = await person.wait_for_reply(room_id, first, timeout=40)
        await bot.stop()
        await bot.start()  # the same storage: the agent's keys must still be there
        second = await person.send(room_id, "and after the restart?")
        again = await person.wait_for_reply(room_id, second, timeout=40)
        seen_by_model = [last_user_text(r) for r in model.requests]
        history = await person.client.room_messages(room_id, start="", limit=50)

    assert "the secret word is heliotrope" in seen_by_model  # the agent decrypted it
    assert "and after the restart?" in seen_by_model
    assert reply["content"]["body"] == "echo: the secret word is heliotrope"
    assert again["content"]["body"] == "echo: and after the restart?"
    assert reply.get(DECRYPTED)  # the answer itself was sent encrypted
    assert again.get(DECRYPTED)
    assert isinstance(history, nio.RoomMessagesResponse)
    plaintext = [e for e in history.chunk if isinstance(e, nio.RoomMessageText) and not e.decrypted]
    assert plaintext == []  # nothing of the conversation went over the wire in the clear


async def test_the_agents_device_is_cross_signed_so_clients_trust_it_with_room_keys(
    bot: BotHarness, model: ScriptedModel, synapse, human: Human
) -> None:
    await bot.start(config_text(model.base_url, {"general": {"rooms": []}}))
    assert bot.bot is not None
    client = bot.bot.agents["general"].client
    agent, device = client.user_id, client.device_id

    keys = await client_api(
        human.client, "POST", "/_matrix/client/v3/keys/query", {"device_keys": {agent: []}}
    )

    [master] = keys["master_keys"][agent]["keys"].values()
    [self_signing] = keys["self_signing_keys"][agent]["keys"].values()
    signed_by = keys["device_keys"][agent][device]["signatures"][agent]
    assert f"ed25519:{self_signing}" in signed_by  # the device is signed by its account
    assert f"ed25519:{master}" in keys["self_signing_keys"][agent]["signatures"][agent]
    assert f"ed25519:{device}" in signed_by  # and by itself, as every device is


async def test_a_message_the_agent_cannot_decrypt_gets_a_notice_asking_to_send_it_again(
    bot: BotHarness, model: ScriptedModel, synapse, tmp_path: Path
) -> None:
    async with echo_agent_in_encrypted_dm(bot, model, synapse, tmp_path / "keys") as (
        person,
        agent,
        room_id,
    ):
        readable = await person.send(room_id, "this one is readable")
        await person.wait_for_reply(room_id, readable, timeout=40)  # the positive control
        lost = {  # a Megolm event whose session no device of the agent was ever given
            "algorithm": "m.megolm.v1.aes-sha2",
            "sender_key": person.client.olm.account.identity_keys["curve25519"],
            "ciphertext": "AwgAEnB3X3Vua25vd24" * 4,
            "session_id": "bm90LWEtcmVhbC1zZXNzaW9u",
            "device_id": person.client.device_id,
        }
        sent = await client_api(
            person.client,
            "PUT",
            f"/_matrix/client/v3/rooms/{room_id}/send/m.room.encrypted/lost-1",
            lost,
        )
        notice = await person.wait_for(
            lambda e: (
                e.get("sender") == agent and "could not decrypt" in e["content"].get("body", "")
            ),
            timeout=40,
        )

    assert notice["content"]["msgtype"] == "m.notice"
    assert notice["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == sent["event_id"]
    asked = [
        e
        for e in person.messages(room_id, agent)
        if "could not decrypt" in e["content"].get("body", "")
    ]
    assert len(asked) == 1  # once, however many accounts heard it


async def test_an_agent_reads_back_its_own_encrypted_message(
    bot: BotHarness, model: ScriptedModel, synapse, tmp_path: Path
) -> None:
    """What a resumed answer asks of a post whose ID was never recorded (``body_of``): in an
    encrypted room the agent decrypts its own message with its own room key."""
    async with echo_agent_in_encrypted_dm(bot, model, synapse, tmp_path / "keys") as (
        person,
        _,
        room_id,
    ):
        asked = await person.send(room_id, "read this back")
        reply = await person.wait_for_reply(room_id, asked, timeout=40)
        assert bot.bot is not None
        read_back = await bot.bot.agents["general"].body_of(room_id, reply["event_id"])

    assert reply.get(DECRYPTED)  # it went over the wire encrypted
    assert read_back == "echo: read this back"
