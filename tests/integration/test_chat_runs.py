"""``mindroom chat`` started before ``mindroom run``: it says at once that mindroom is not running,
and answers once it runs."""

from __future__ import annotations

import asyncio
import functools
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mindroom.adapters.matrix.chat import chat
from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from mindroom.app.runlock import require_running
from tests.integration.test_chat import Terminal, _local_user
from tests.support.harness import (
    REPO,
    BotProcess,
    Human,
    config_text,
    unique,
)
from tests.support.scripted_model import ScriptedModel

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]


def _chat_process(storage: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m mindroom chat`` as a real process. Its --timeout is far longer than the
    subprocess's own: a chat that waits for an answer instead of saying why fails the test."""
    return subprocess.run(
        [sys.executable, "-m", "mindroom", "chat", "--storage", str(storage), "--timeout", "300"]
        + list(args),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _write_config(storage: Path, model: ScriptedModel, room: str) -> None:
    storage.mkdir(parents=True, exist_ok=True)
    config = config_text(model.base_url, {"general": {"role": "Helps.", "rooms": [room]}})
    (storage / "config.yaml").write_text(config)


@pytest.mark.timeout(300)
async def test_chat_says_at_once_that_mindroom_is_not_running_and_answers_once_it_runs(
    bot_process: BotProcess, model: ScriptedModel, synapse: EmbeddedHomeserver
) -> None:
    storage = bot_process.storage
    room = unique("up")
    _write_config(storage, model, room)
    await _local_user(synapse, storage / "mindroom_data")
    bot_process.start()  # once, so the room exists and only the bot is missing
    await bot_process.wait_running()
    await bot_process.stop()

    down = await asyncio.to_thread(_chat_process, storage, "--room", room, "anyone there?")
    assert down.returncode == 3, down.stdout + down.stderr
    assert f"mindroom is not running for {storage.resolve()}" in down.stderr, down.stderr
    assert " run --local" in down.stderr, down.stderr  # the command that starts it

    # The positive control: the same chat, with mindroom running, gets its answer.
    bot_process.mark_log()
    bot_process.start()
    await bot_process.wait_running()
    model.push("I am here.")
    up = await asyncio.to_thread(_chat_process, storage, "--room", room, "anyone there?")
    assert up.returncode == 0, up.stdout + up.stderr
    assert "General: I am here." in up.stdout

    # A killed mindroom leaves its lock file behind, but nothing holds it.
    await bot_process.stop(signal.SIGKILL)
    assert (storage / "mindroom_data" / "run.lock").exists()
    again = await asyncio.to_thread(_chat_process, storage, "--room", room, "anyone there?")
    assert again.returncode == 3, again.stdout + again.stderr
    assert "mindroom is not running" in again.stderr


@pytest.mark.timeout(300)
async def test_the_prompt_checks_before_every_line_that_mindroom_runs(
    bot_process: BotProcess, human: Human, model: ScriptedModel, synapse: EmbeddedHomeserver
) -> None:
    storage = bot_process.storage
    room = unique("prompt")
    _write_config(storage, model, room)
    data_dir = storage / "mindroom_data"
    await _local_user(synapse, data_dir)
    bot_process.start()  # once, so the room exists
    await bot_process.wait_running()
    room_id = await human.join(f"#{room}:{synapse.server_name}")
    await bot_process.stop()

    terminal = Terminal()
    check = functools.partial(require_running, data_dir, "mindroom run")
    session = asyncio.create_task(
        chat(
            data_dir,
            room,
            None,
            out=terminal.printed.append,
            lines=terminal.lines(),
            bot_check=check,
        )
    )
    await terminal.wait_printed("mindroom is not running")  # said when the prompt opens
    await terminal.typed.put("typed while it is down")
    await terminal.wait_printed("not sent")
    bot_process.mark_log()
    bot_process.start()  # started after the prompt began: the next line goes through
    await bot_process.wait_running()
    model.push("Now I am here.")
    await terminal.typed.put("typed while it runs")
    await terminal.wait_printed("General: Now I am here.")
    await terminal.typed.put(None)
    assert await session == 3  # a line was held back

    await human.fence(room_id)
    bodies = [e["content"].get("body") for e in human.messages(room_id)]
    assert "typed while it runs" in bodies, bodies  # the positive control
    assert "typed while it is down" not in bodies
