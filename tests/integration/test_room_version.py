"""Rooms mindroom creates use a room version common clients handle; the embedded homeserver
registers accounts only through its shared secret."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import nio
import pytest

from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from mindroom.cli.doctor import run_doctor
from mindroom.config import parse_config
from tests.support.harness import BotHarness, Human, config_text, unique
from tests.support.scripted_model import ScriptedModel


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


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_doctor_accepts_registration_through_the_local_homeservers_secret(
    synapse: EmbeddedHomeserver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `mindroom run --local` registers with the secret in its homeserver.yaml; the doctor,
    # run next to it without MATRIX_REGISTRATION_SHARED_SECRET, must not call that a failure.
    monkeypatch.delenv("MATRIX_REGISTRATION_SHARED_SECRET", raising=False)
    config = tmp_path / "config.yaml"
    config.write_text("agents: {}\n")

    checks = {c.name: c for c in await run_doctor(config, tmp_path, synapse.url)}
    assert not checks["registration"].ok  # no local homeserver here, no secret: a real problem
    assert "MATRIX_REGISTRATION_SHARED_SECRET" in checks["registration"].fix

    local = tmp_path / "mindroom_data" / "homeserver"
    local.mkdir(parents=True)
    (local / "homeserver.yaml").write_text(f"registration_shared_secret: {synapse.shared_secret}\n")
    checks = {c.name: c for c in await run_doctor(config, tmp_path, synapse.url)}
    assert checks["registration"].ok, checks["registration"]
    assert "shared-secret" in checks["registration"].detail
