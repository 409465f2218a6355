"""Rooms mindroom creates use a room version common clients handle; the embedded homeserver
registers accounts only through its shared secret (issue 11, item 13)."""

from __future__ import annotations

import aiohttp
import nio
import pytest

from mindroom.config import parse_config
from mindroom.matrix.homeserver import EmbeddedHomeserver
from tests.harness import BotHarness, Human, config_text, unique
from tests.scripted_model import ScriptedModel


async def _room_version(human: Human, room_id: str) -> str:
    response = await human.client.room_get_state_event(room_id, "m.room.create")
    assert isinstance(response, nio.RoomGetStateEventResponse), response
    return str(response.content.get("room_version"))


def test_room_version_defaults_to_10() -> None:
    config = parse_config("agents: {}\n", "config.yaml")
    assert config.matrix.room_version == "10"


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_a_room_mindroom_creates_has_room_version_10_by_default(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("version")
    config = config_text(model.base_url, {"general": {"role": "Helps.", "rooms": [room]}})
    room_id = await bot.start_in_room(config, room, human)
    assert await _room_version(human, room_id) == "10"


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_matrix_room_version_key_sets_the_version_of_created_rooms(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("version")
    config = config_text(
        model.base_url,
        {"general": {"role": "Helps.", "rooms": [room]}},
        matrix={"room_version": "9"},
    )
    room_id = await bot.start_in_room(config, room, human)
    assert await _room_version(human, room_id) == "9"


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_embedded_homeserver_refuses_registration_without_the_shared_secret(
    synapse: EmbeddedHomeserver,
) -> None:
    username = unique("walkin")
    body = {"username": username, "password": "pw-123456", "auth": {"type": "m.login.dummy"}}
    url = f"{synapse.url}/_matrix/client/v3/register"
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        status = resp.status
        answer = await resp.json()
    assert status == 403, answer
    assert answer.get("errcode") == "M_FORBIDDEN"
    # Positive control: the same name registers through the shared secret.
    assert await synapse.register_user(username, "pw-123456") == f"@{username}:localhost"
