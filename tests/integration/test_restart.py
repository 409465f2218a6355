"""Restarts: saved credentials are reused (no new device) and threads keep their history."""

from __future__ import annotations

import nio
import pytest

from tests.support.harness import BotHarness, Human, config_text, unique
from tests.support.scripted_model import ScriptedModel, all_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


async def devices_of(account_client: nio.AsyncClient) -> set[str]:
    response = await account_client.devices()
    assert isinstance(response, nio.DevicesResponse), response
    return {device.id for device in response.devices}


async def test_restart_reuses_credentials_and_keeps_thread_history(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    await bot.start(config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await human.join(f"#{room}:localhost")
    first_bot = bot.bot
    general_id = first_bot.agents["general"].user_id
    devices_before = await devices_of(first_bot.agents["general"].client)
    model.push("Noted: the code word is heliotrope.")
    root = await human.send(room_id, "the code word is heliotrope")
    await human.wait_for_reply(room_id, root)
    await bot.stop()

    creds = bot.storage / "mindroom_data" / "credentials.json"
    assert creds.stat().st_mode & 0o777 == 0o600

    await bot.start()  # same storage, same config
    second_bot = bot.bot
    assert second_bot is not first_bot
    assert second_bot.agents["general"].user_id == general_id
    assert await devices_of(second_bot.agents["general"].client) == devices_before

    model.push("It is heliotrope.")
    follow = await human.send(room_id, "what was the code word?", thread_root=root)
    reply = await human.wait_for_reply(room_id, follow)
    assert reply["sender"] == general_id
    assert reply["content"]["body"] == "It is heliotrope."
    history = all_text(model.requests[-1])
    assert "the code word is heliotrope" in history
    assert "Noted: the code word is heliotrope." in history
