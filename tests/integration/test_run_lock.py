"""One ``mindroom run`` per storage: a second is refused while the first runs, and a killed one
leaves nothing that stops the next. Real processes, real Synapse."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys

import pytest

from tests.support.harness import BotProcess, config_text, unique
from tests.support.scripted_model import ScriptedModel

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio, pytest.mark.timeout(240)]


def second_run(bot_process: BotProcess) -> subprocess.CompletedProcess[str]:
    """Another ``python -m mindroom run`` on the first one's storage, set up the same way."""
    env = dict(
        os.environ,
        MATRIX_HOMESERVER=bot_process.homeserver.url,
        MATRIX_REGISTRATION_SHARED_SECRET=bot_process.homeserver.shared_secret,
        AGNO_TELEMETRY="false",
    )
    config = bot_process.storage / "config.yaml"
    return subprocess.run(
        [sys.executable, "-m", "mindroom", "run", "--config", str(config)],
        cwd=bot_process.storage,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,  # a run that is not refused runs until killed here: the test fails
    )


async def test_a_second_run_is_refused_and_a_killed_run_leaves_no_stale_lock(
    bot_process: BotProcess, model: ScriptedModel
) -> None:
    bot_process.storage.mkdir(parents=True)
    (bot_process.storage / "config.yaml").write_text(
        config_text(model.base_url, {"general": {"rooms": [unique("one")]}})
    )
    bot_process.start()
    await bot_process.wait_running()
    assert bot_process.proc is not None
    first_pid = bot_process.proc.pid
    lock = bot_process.storage.resolve() / "mindroom_data" / "run.lock"

    refused = await asyncio.to_thread(second_run, bot_process)
    assert refused.returncode != 0, refused.stdout + refused.stderr
    assert "already running" in refused.stderr, refused.stderr
    assert f"pid {first_pid}" in refused.stderr, refused.stderr
    assert str(lock) in refused.stderr, refused.stderr
    assert bot_process.proc.poll() is None  # the first one runs on

    await bot_process.stop(signal.SIGKILL)
    # The killed run's pid is still written in the file: only the lock says who runs.
    assert f"pid {first_pid}" in lock.read_text()
    bot_process.mark_log()
    bot_process.start()
    await bot_process.wait_running()
    assert bot_process.proc is not None
    assert f"pid {bot_process.proc.pid}" in lock.read_text()
