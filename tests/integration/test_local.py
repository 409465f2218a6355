"""The README's first command: ``mindroom run --local`` and ``mindroom chat``, as real processes."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.harness import REPO
from tests.support.scripted_model import ScriptedModel, last_user_text

pytestmark = pytest.mark.timeout(120)


def wait_for_line(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        content = log.read_text() if log.exists() else ""
        if text in content:
            return content
        if proc.poll() is not None:
            raise AssertionError(f"mindroom exited with {proc.returncode}:\n{content}")
        time.sleep(0.1)
    raise AssertionError(f"{text!r} not printed within {timeout} s:\n{log.read_text()}")


@pytest.mark.timeout(180)  # the start (up to 90 s on a loaded machine), then a chat (60)
def test_local_default_runs_and_the_terminal_chat_gets_an_answer(
    tmp_path: Path, model: ScriptedModel
) -> None:
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    env = dict(os.environ, OPENAI_BASE_URL=model.base_url, MINDROOM_MODEL="scripted")
    model.push("Hello from the local default!")
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mindroom", "run", "--local", "--port", "0"],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        printed = wait_for_line(log, "mindroom is running", proc, 90)
        assert "user:       @user:localhost" in printed
        assert "password:" in printed
        assert "homeserver: http://127.0.0.1:" in printed

        # the first turn may wait for the local embedder, which starts loading at the banner
        chat = subprocess.run(
            [sys.executable, "-m", "mindroom", "chat", "--timeout", "60", "@general hi there"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=90,
        )
        assert chat.returncode == 0, chat.stdout + chat.stderr
        assert "General: Hello from the local default!" in chat.stdout
        assert last_user_text(model.requests[0]).endswith("@general hi there")
        assert (tmp_path / "mindroom_data" / "local_user.json").stat().st_mode & 0o777 == 0o600
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    assert code == 0, log.read_text()
    assert "Homeserver" in log.read_text()
    assert "stopped" in log.read_text()


def test_port_in_use_error_names_the_port_option(tmp_path: Path) -> None:
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "mindroom", "run", "--local", "--port", str(port)],
            cwd=tmp_path,
            env=dict(os.environ, OPENAI_BASE_URL="http://127.0.0.1:9/v1"),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"port {port} is in use" in result.stderr
    assert "choose another with --port N" in result.stderr


def run_local(tmp_path: Path, log: Path) -> subprocess.Popen[bytes]:
    """``mindroom run --local`` in ``tmp_path``, its output to ``log``; the model is a closed
    port (the start-up does not need one)."""
    env = dict(os.environ, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "mindroom", "run", "--local", "--port", "0", "--no-dashboard"],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def stop(proc: subprocess.Popen[bytes], log: Path) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 0, log.read_text()


@pytest.mark.timeout(300)
def test_a_restart_launches_the_homeserver_first_and_still_follows_the_config(
    tmp_path: Path,
) -> None:
    """A restart of ``--local`` launches its homeserver before it reads the config; a changed
    ``matrix.room_version`` still reaches the homeserver (relaunched with it), and a config
    mistake still exits 2 and leaves no homeserver behind."""
    shutil.copy(REPO / "config.yaml", tmp_path / "config.yaml")
    homeserver_yaml = tmp_path / "mindroom_data" / "homeserver" / "homeserver.yaml"
    first = run_local(tmp_path, tmp_path / "first.log")
    try:
        wait_for_line(tmp_path / "first.log", "mindroom is running", first, 90)
    finally:
        stop(first, tmp_path / "first.log")
    assert "default_room_version: '10'" in homeserver_yaml.read_text()  # the positive control

    config = (tmp_path / "config.yaml").read_text()
    assert "\nmatrix:\n" in config
    (tmp_path / "config.yaml").write_text(
        config.replace("\nmatrix:\n", "\nmatrix:\n  room_version: '11'\n")
    )
    again = run_local(tmp_path, tmp_path / "again.log")
    try:
        printed = wait_for_line(tmp_path / "again.log", "mindroom is running", again, 90)
    finally:
        stop(again, tmp_path / "again.log")
    assert "default_room_version: '11'" in homeserver_yaml.read_text()
    assert printed.count("Starting the local homeserver") == 2  # early, then with version 11

    assert "thread_mode: thread" in config
    (tmp_path / "config.yaml").write_text(config.replace("thread_mode: thread", "thread_mode: no"))
    broken = run_local(tmp_path, tmp_path / "broken.log")
    assert broken.wait(60) == 2
    printed = (tmp_path / "broken.log").read_text()
    assert "Starting the local homeserver" in printed  # it was launched before the config...
    assert "thread_mode" in printed  # ...which was read, found wrong and said so
    pid_file = homeserver_yaml.parent / "homeserver.pid"
    if pid_file.exists():  # what the homeserver left: it is gone
        assert not Path(f"/proc/{pid_file.read_text().strip()}").exists()
