"""Logs a person reads: one line per event worth knowing, nothing per routine step (item 15)."""

from __future__ import annotations

import logging
import socket

import pytest

from tests.support.harness import BotHarness, BotProcess, Human, config_text, unique
from tests.support.scripted_model import Reply, ScriptedModel
from tests.support.waiting import wait_until


def _messages(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records]


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_joining_and_answering_logs_no_gap_of_zero_events(
    bot: BotHarness, human: Human, model: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    room = unique("gaps")
    config = config_text(model.base_url, {"general": {"role": "Helps.", "rooms": [room]}})
    room_id = await bot.start_in_room(config, room, human)
    model.push("hi")
    asked = await human.send(room_id, "@general hello")
    await human.wait_for_reply(room_id, asked)
    await bot.settle(human, room_id)

    messages = _messages(caplog)
    # Positive control: the bot's INFO lines about this room's events were captured.
    assert any(asked in m for m in messages), messages
    assert not [m for m in messages if "filling a gap of 0 events" in m]


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_fixing_a_broken_config_logs_that_it_is_valid_again(
    bot: BotHarness, human: Human, model: ScriptedModel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    room = unique("fixed")
    text = config_text(model.base_url, {"general": {"role": "Helps.", "rooms": [room]}})
    await bot.start_in_room(text, room, human)
    assert bot.bot.reloader is not None
    path = bot.storage / "config.yaml"

    path.write_text("agents: [this is: not valid")
    await wait_until(lambda: bot.bot.reloader.error is not None)
    assert any("config not reloaded" in m for m in _messages(caplog))
    path.write_text(text)  # the same config as before the breakage: nothing to change
    await wait_until(lambda: bot.bot.reloader.error is None)

    valid_again = [m for m in _messages(caplog) if "config is valid again; applied" in m]
    assert len(valid_again) == 1, _messages(caplog)


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_model_errors_are_one_log_line_each_and_requests_are_not_logged(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    room = unique("quiet")
    config = config_text(
        model.base_url,
        {
            "general": {"role": "Helps.", "rooms": [room]},
            "offline": {"role": "Unreachable.", "rooms": [room], "model": "offline"},
        },
    )
    offline_url = f"http://127.0.0.1:{_closed_port()}/v1"
    config = config.replace(
        '"models": {',
        '"models": {"offline": {"provider": "openai", "id": "gone", "base_url": "'
        + offline_url
        + '", "api_key": "x", "max_retries": 0, "timeout_seconds": 5},',
    )
    bot_process.storage.mkdir(parents=True)
    (bot_process.storage / "config.yaml").write_text(config)
    bot_process.start()
    await bot_process.wait_running()
    room_id = await human.join(f"#{room}:localhost")
    log = bot_process.storage / "bot.log"

    model.push("fine, thanks")  # positive control: a request that succeeds
    asked = await human.send(room_id, "@general how are you?")
    assert (await human.wait_for_reply(room_id, asked))["content"]["body"] == "fine, thanks"
    model.push(Reply(status=500, error_message="the model is down", retryable=False))
    asked = await human.send(room_id, "@general and now?")
    failed = await human.wait_for_reply(room_id, asked)
    assert "the model is down" in failed["content"]["body"]
    asked = await human.send(room_id, "@offline are you there?")
    unreachable = await human.wait_for_reply(room_id, asked)
    await bot_process.settle(human, room_id)
    # A file change (watchfiles logs each one at INFO) that the bot does act on.
    (bot_process.storage / "config.yaml").write_text(config.replace("Helps.", "Helps more."))
    await wait_until(lambda: "config reloaded" in log.read_text(), timeout=30)
    await bot_process.stop()
    text = log.read_text()

    assert len(model.requests) == 2
    assert "Traceback" not in text, text
    assert "HTTP Request" not in text, text
    assert "change detected" not in text, text
    assert len([line for line in text.splitlines() if "the model is down" in line]) == 1, text
    # (the start-up reachability warning of mindroom.adapters.agno.probe is its own, earlier line)
    offline_lines = [
        line
        for line in text.splitlines()
        if "offline" in line and "fail" in line and "mindroom.adapters.agno.probe" not in line
    ]
    assert len(offline_lines) == 1, (unreachable["content"]["body"], text)
