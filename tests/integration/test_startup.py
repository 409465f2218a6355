"""Starting mindroom: an unreachable homeserver, an unreachable model, a ``.env`` file."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mindroom.adapters.agno.probe import model_fix
from mindroom.config import load_config
from mindroom.config.load import load_dotenv_beside
from tests.support.harness import BotHarness, Human, config_text, unique


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for_log(path: Path, text: str, proc: subprocess.Popen[bytes], timeout: float) -> str:
    """Poll the log until ``text`` appears (the process must still be running meanwhile)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = path.read_text() if path.exists() else ""
        if text in log:
            return log
        if proc.poll() is not None:
            raise AssertionError(f"mindroom exited ({proc.returncode}):\n{log[-3000:]}")
        time.sleep(0.1)
    raise TimeoutError(f"{text!r} not logged:\n{path.read_text()[-3000:]}")


def start_run(tmp_path: Path, homeserver: str) -> tuple[subprocess.Popen[bytes], Path]:
    """``python -m mindroom run`` as a real process against ``homeserver``; its log file."""
    (tmp_path / "config.yaml").write_text(
        config_text("http://127.0.0.1:9/v1", {"general": {"rooms": ["lobby"]}})
    )
    log = tmp_path / "run.log"
    env = {**os.environ, "MATRIX_HOMESERVER": homeserver, "AGNO_TELEMETRY": "false"}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mindroom", "run", "--config", str(tmp_path / "config.yaml")],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=tmp_path,
        )
    return proc, log


def stop_run(proc: subprocess.Popen[bytes], sig: int) -> int:
    """Send ``sig`` and return the exit code; a process still running after a generous bound
    is killed and fails the test."""
    try:
        proc.send_signal(sig)
        return proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_run_against_an_unreachable_homeserver_says_why_and_stops_on_a_signal(
    tmp_path: Path, sig: signal.Signals
) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    proc, log = start_run(tmp_path, url)
    # Two attempts: the first, then one after the backoff; each names the URL and the error.
    try:
        wait_for_log(log, "attempt 2", proc, 60)
    finally:
        code = stop_run(proc, sig)
    text = log.read_text()
    attempts = [line for line in text.splitlines() if "cannot reach the homeserver" in line]
    assert len(attempts) >= 2, text
    assert url in attempts[0]
    assert "onnect" in attempts[0]  # the reason: connection refused
    assert "retrying in 1 s" in attempts[0]
    assert "retrying in 2 s" in attempts[1]  # the wait grows
    assert "Timed out, sleeping" not in text
    assert code == 0, text
    assert "stopping" in text


def test_a_dotenv_beside_the_config_provides_its_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MINDROOM_TEST_KEY", raising=False)
    monkeypatch.setenv("MINDROOM_TEST_SET", "from-the-shell")
    config = tmp_path / "config.yaml"
    config.write_text(
        config_text("http://127.0.0.1:9/v1", {"general": {"rooms": ["lobby"]}}).replace(
            '"api_key": "test"', '"api_key": "${MINDROOM_TEST_KEY}-${MINDROOM_TEST_SET}"'
        )
    )
    (tmp_path / ".env").write_text(
        "# secrets\nMINDROOM_TEST_KEY=sk-from-dotenv\nMINDROOM_TEST_SET=from-the-file\n"
    )
    # Without the .env the variable is missing: the control that the file is what provides it.
    with pytest.raises(Exception, match="MINDROOM_TEST_KEY is not set"):
        load_config(config)

    load_dotenv_beside(config)

    loaded = load_config(config)
    # The file fills in what is missing; what the shell set wins.
    assert loaded.models["default"].api_key == "sk-from-dotenv-from-the-shell"
    assert os.environ["MINDROOM_TEST_SET"] == "from-the-shell"
    monkeypatch.delenv("MINDROOM_TEST_KEY")


def test_doctor_reads_the_dotenv_beside_the_config(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        config_text("http://127.0.0.1:9/v1", {"general": {"rooms": ["lobby"]}}).replace(
            '"api_key": "test"', '"api_key": "${MINDROOM_DOCTOR_KEY}"'
        )
    )
    (tmp_path / ".env").write_text("MINDROOM_DOCTOR_KEY=sk-dotenv\n")
    env = {k: v for k, v in os.environ.items() if k != "MINDROOM_DOCTOR_KEY"}
    env["MATRIX_HOMESERVER"] = f"http://127.0.0.1:{closed_port()}"
    done = subprocess.run(
        [sys.executable, "-m", "mindroom", "doctor", "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "ok   config" in done.stdout, done.stdout + done.stderr
    assert "FAIL homeserver" in done.stdout  # the control: the doctor ran every check


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_an_unreachable_model_is_warned_about_once_at_start_with_the_fix(
    bot: BotHarness, human: Human, caplog: pytest.LogCaptureFixture
) -> None:
    room = unique("probe")
    base = f"http://127.0.0.1:{closed_port()}/v1"
    config = config_text(base, {"general": {"rooms": [room]}})
    caplog.set_level(logging.WARNING, logger="mindroom")
    started = await bot.start(config)
    await started.model_probed.wait()  # the probe runs in the background; wait for its result

    warnings = [r.getMessage() for r in caplog.records if "is unreachable" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert base in warnings[0]
    fix = model_fix("default", load_config_of(bot).models["default"])
    assert fix in warnings[0]

    room_id = await human.join(f"#{room}:{bot.homeserver.server_name}")
    asked = await human.send(room_id, "hello")
    notice = await human.wait_for_reply(room_id, asked)
    assert notice["content"]["msgtype"] == "m.notice"
    assert fix in notice["content"]["body"]
    warnings = [r.getMessage() for r in caplog.records if "is unreachable" in r.getMessage()]
    assert len(warnings) == 1, warnings  # not again per message


def load_config_of(bot: BotHarness):  # type: ignore[no-untyped-def]
    return load_config(bot.storage / "config.yaml")
