"""``mindroom doctor`` against a real homeserver and the scripted model."""

from __future__ import annotations

import shutil
from pathlib import Path

import nio
import pytest

from mindroom.adapters.agno.probe import model_fix
from mindroom.checks import Check
from mindroom.cli.doctor import render, run_doctor
from mindroom.config import load_config
from tests.integration.test_router_rest import leave_earlier_rooms
from tests.support.harness import ENCRYPTION_STATE, BotHarness, Human, config_text, joined, unique
from tests.support.scripted_model import Reply, ScriptedModel


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_doctor_reports_working_parts_and_explains_broken_ones(
    tmp_path: Path, model: ScriptedModel, synapse, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.yaml"
    text = config_text(model.base_url, {"general": {"rooms": ["r"]}})
    config.write_text(
        text.replace(
            '"models": {',
            '"models": {"down": {"id": "x", "base_url": '
            '"http://127.0.0.1:9/v1", "max_retries": 0},',
            1,
        )
    )
    model.push(Reply(text="pong"))
    monkeypatch.setenv("MATRIX_REGISTRATION_SHARED_SECRET", synapse.shared_secret)

    checks = {c.name: c for c in await run_doctor(config, tmp_path, synapse.url)}

    assert checks["config"].ok
    assert checks["homeserver"].ok
    assert checks["registration"].ok
    assert checks["model default"].ok
    assert not checks["model down"].ok
    assert "base_url" in checks["model down"].fix
    # the same words as the start-up warning and the error notice in the room
    assert checks["model down"].fix == model_fix("down", load_config(config).models["down"])
    assert checks["storage"].ok
    # No agent has logged in from this storage yet: the rooms are not read, the support is said
    assert not checks["encryption"].warning
    assert "not checked" in checks["encryption"].detail
    assert "end-to-end encryption is on" in checks["encryption"].detail
    table = render(list(checks.values()))
    assert "FAIL model down" in table
    assert model.requests[0]["max_tokens"] == 1


@pytest.mark.asyncio
async def test_doctor_names_a_broken_config_and_an_unreachable_homeserver(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("agents:\n  general:\n    modle: x\n")
    checks = {c.name: c for c in await run_doctor(config, tmp_path, "http://127.0.0.1:9")}
    assert not checks["config"].ok
    assert "unknown key" in checks["config"].detail
    assert not checks["homeserver"].ok
    assert "mindroom run --local" in checks["homeserver"].fix
    assert "end-to-end encryption is on" in checks["encryption"].detail


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_doctor_counts_encrypted_rooms_and_warns_when_an_agents_keys_are_gone(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    # A new agent: the session's shared accounts are in other tests' rooms, encrypted ones too.
    name = unique("doc")
    await bot.start(config_text(model.base_url, {name: {"rooms": []}}))
    await leave_earlier_rooms(bot)  # the router's, some of them encrypted: counted otherwise
    agent = bot.bot.agents[name].user_id
    encrypted = await human.client.room_create(
        invite=[agent], is_direct=True, initial_state=[ENCRYPTION_STATE]
    )
    plain = await human.client.room_create(invite=[agent], is_direct=True)
    assert isinstance(encrypted, nio.RoomCreateResponse), encrypted
    assert isinstance(plain, nio.RoomCreateResponse), plain
    for room_id in (encrypted.room_id, plain.room_id):
        await human.wait_for(joined(agent, room_id), timeout=30)

    async def encryption() -> list[Check]:
        checks = await run_doctor(bot.storage / "config.yaml", bot.storage, bot.homeserver.url)
        found = [c for c in checks if c.name == "encryption"]
        assert all(c.ok for c in found)  # warnings, not failures: the exit status stays 0
        return found

    kept = await encryption()
    await bot.stop()
    shutil.rmtree(bot.storage / "mindroom_data" / "crypto" / f"mindroom_{name}")
    lost = await encryption()

    assert len(kept) == 1
    # the agent's two rooms, and no other: the shared router left the earlier tests' rooms
    assert "1 of the 2 rooms the agents are in is end-to-end encrypted" in kept[0].detail
    assert "encryption is on" in kept[0].detail
    assert not kept[0].warning
    [warned] = [c for c in lost if c.warning]  # the control: a lost key store is told
    assert name in warned.detail
    assert "keys of device" in warned.detail
    assert "restore mindroom_data/crypto/" in warned.fix


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_doctor_checks_the_local_homeserver_where_run_local_served_it(
    tmp_path: Path, model: ScriptedModel, synapse
) -> None:
    """After ``run --local --port N`` the doctor checks port N, not the config's URL; with the
    bot stopped it says the local homeserver runs only while ``run --local`` does."""
    from mindroom.adapters.matrix.accounts import Credentials
    from mindroom.adapters.matrix.local import local_user_store
    from mindroom.adapters.matrix.synapse_config import CONFIG_FILE

    config = tmp_path / "config.yaml"
    config.write_text(config_text(model.base_url, {"general": {"rooms": ["r"]}}))
    data_dir = tmp_path / "mindroom_data"
    (data_dir / "homeserver").mkdir(parents=True)
    (data_dir / "homeserver" / CONFIG_FILE).write_text("server_name: localhost\n")
    saved = Credentials("@user:localhost", "pw")
    local_user_store(data_dir).put(synapse.url, "user", saved)  # where run --local served it
    model.push(Reply(text="pong"))

    checks = {c.name: c for c in await run_doctor(config, tmp_path, None)}
    assert checks["homeserver"].ok, checks["homeserver"]
    assert synapse.url in checks["homeserver"].detail

    local_user_store(data_dir).rehome(synapse.url, "http://127.0.0.1:9")  # nothing listens
    checks = {c.name: c for c in await run_doctor(config, tmp_path, None)}
    assert not checks["homeserver"].ok
    assert "runs only while" in checks["homeserver"].fix
    assert "run --local" in checks["homeserver"].fix


def test_a_model_failure_notice_ends_its_reason_once() -> None:
    from mindroom.adapters.agno.probe import model_failed
    from mindroom.config import parse_config

    config = parse_config(config_text("http://127.0.0.1:9/v1", {"general": {}}), "config.yaml")
    notice = model_failed("default", config.models["default"], "Connection error.")
    assert "failed: Connection error. Fix: " in notice
    assert ".." not in notice


def test_the_fix_follows_the_failure_a_refused_key_a_missing_model_or_no_server() -> None:
    from mindroom.adapters.agno.probe import model_fix
    from mindroom.config import parse_config

    config = parse_config(config_text("http://127.0.0.1:9/v1", {"general": {}}), "config.yaml")
    default = config.models["default"]
    assert "refused the key: check models.default.api_key" in model_fix(
        "default", default, "Error code: 401 - Incorrect API key provided"
    )
    assert "check models.default.id" in model_fix("default", default, "model 'x' not found")
    assert "running?" in model_fix("default", default, "Connection error.")
    for reason in ("401", "not found", "Connection error."):
        assert "doctor" in model_fix("default", default, reason)  # each ends the same way


@pytest.mark.asyncio
async def test_the_doctors_model_request_names_a_refused_key_and_a_missing_model(
    tmp_path: Path, model: ScriptedModel
) -> None:
    """The doctor's one-token completion, against the scripted server: a 401 and a 404 get the
    fix for their cause, an answer passes."""
    from mindroom.adapters.agno.probe import check_model
    from mindroom.config import parse_config

    config = parse_config(config_text(model.base_url, {"general": {}}), "config.yaml")
    default = config.models["default"]
    model.push(Reply(status=401, error_message="Incorrect API key provided"))
    refused = await check_model("default", default)
    model.push(Reply(status=404, error_message="model 'x' not found"))
    missing = await check_model("default", default)
    model.push(Reply(text="pong"))
    answered = await check_model("default", default)

    assert not refused.ok
    assert "Error code: 401" in refused.detail
    assert "Incorrect API key provided" in refused.detail
    assert "refused the key: check models.default.api_key" in refused.fix
    assert not missing.ok
    assert "check models.default.id" in missing.fix
    assert answered.ok, answered
    assert answered.detail.endswith("answers")
    assert model.requests[-1]["max_tokens"] == 1
    assert model.requests[-1]["messages"] == [{"role": "user", "content": "ping"}]


@pytest.mark.asyncio
async def test_a_refused_key_reads_the_same_in_the_room_and_in_the_doctor(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    # The server's words say nothing of keys: the HTTP status classifies the failure
    refused = Reply(status=401, error_message="denied", retryable=False)
    room = unique("keys")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    model.push(refused)

    asked = await human.send(room_id, "hello")
    notice = (await human.wait_for_reply(room_id, asked))["content"]
    assert notice["msgtype"] == "m.notice"
    assert "failed: denied. Fix: " in notice["body"]
    assert "(HTTP 401) refused the key: check models.default.api_key" in notice["body"]

    model.push(refused)
    config = bot.storage / "config.yaml"
    checks = {c.name: c for c in await run_doctor(config, bot.storage, synapse.url)}
    assert not checks["model default"].ok
    assert notice["body"].endswith(f"Fix: {checks['model default'].fix}")  # word for word
    # control: the same server answering, the doctor finds the model fine
    model.push(Reply(text="pong"))
    checks = {c.name: c for c in await run_doctor(config, bot.storage, synapse.url)}
    assert checks["model default"].ok
