"""``mindroom memory flush`` and ``flush-status`` from the command line."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest
from mindroom.cli.main import main
from mindroom.config import load_config
from mindroom.memory.flush.loop import FlushWorker
from mindroom.memory.flush.state import FlushEntry
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import config_text
from tests.support.scripted_model import ScriptedModel, system_text


async def _converse(config_path: Path) -> None:
    config = load_config(config_path)
    registry = MemoryRegistry(config, config_path.parent)
    runtime = AgentRuntime(config, config_path.parent / "mindroom_data", registry)
    worker = FlushWorker(config, runtime, registry, config_path.parent / "mindroom_data")
    try:
        await runtime.run_turn(TurnRequest("general", "s1", "@u:x", "my cat is called Miso"))
        await worker.turn_finished("general", "s1", None)
    finally:
        await worker.aclose()
        await runtime.close()
        registry.close()


def _conversed(tmp_path: Path, model: ScriptedModel) -> Path:
    """A config whose general agent has had one conversation about a cat, not yet flushed."""
    config_path = tmp_path / "config.yaml"
    config_path.write_text(
        config_text(
            model.base_url,
            {"general": {"rooms": ["r"]}},
            memory={"auto_flush": {"enabled": True, "idle_seconds": 3600}},
        )
    )
    model.set_handler(
        lambda r: (
            "- The user's cat is called Miso"
            if "You maintain the long-term memory" in system_text(r)
            else "Cute!"
        )
    )
    asyncio.run(_converse(config_path))
    return config_path


def test_flush_command_writes_and_reports_and_status_shows_the_table(
    tmp_path: Path, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    config_path = _conversed(tmp_path, model)

    assert main(["memory", "flush-status", "--config", str(config_path)]) == 0
    status = capsys.readouterr().out
    assert "general" in status
    assert "yes" in status  # dirty

    assert main(["memory", "flush", "--config", str(config_path)]) == 0
    out = capsys.readouterr().out
    assert "1 new facts" in out
    assert "+ The user's cat is called Miso" in out

    assert main(["memory", "flush", "--config", str(config_path)]) == 0
    assert "nothing to flush" in capsys.readouterr().out
    daily = list((tmp_path / "agents" / "general" / "workspace" / "memory").glob("*.md"))
    assert len(daily) == 1
    assert daily[0].read_text().count("Miso") == 1


def _claim(storage: Path, pid: int) -> None:
    """Mark every flush row claimed by process ``pid``, as a running bot extracting it would."""
    with contextlib.closing(sqlite3.connect(storage / "mindroom_data" / "ledger.db")) as db:
        db.execute(
            "UPDATE flush_sessions SET in_flight = 1, claim_id = 'bot', claim_pid = ?,"
            " claimed_at = ?",
            (pid, time.time()),
        )
        db.commit()


def test_flush_leaves_a_session_the_running_bot_is_extracting_to_it_and_says_so(
    tmp_path: Path, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    config_path = _conversed(tmp_path, model)
    _claim(tmp_path, os.getpid())  # a live process holds it

    assert main(["memory", "flush", "--config", str(config_path)]) == 0
    out = capsys.readouterr().out
    assert "1 sessions are being flushed by another process" in out
    assert not any("You maintain the long-term memory" in system_text(r) for r in model.requests)

    dead = subprocess.Popen(["true"])
    dead.wait()
    _claim(tmp_path, dead.pid)  # its owner died: the claim is cleared and the CLI flushes it

    assert main(["memory", "flush", "--config", str(config_path)]) == 0
    assert "1 new facts" in capsys.readouterr().out


def test_flush_status_shows_the_sessions_of_an_old_state_file_after_moving_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config_path = tmp_path / "config.yaml"
    config_path.write_text(config_text("http://127.0.0.1:9/v1", {"general": {"rooms": ["r"]}}))
    data = tmp_path / "mindroom_data"
    data.mkdir()
    old = FlushEntry("general", "s-old", dirty=True, cursor=6, failures=2)
    (data / "memory_flush_state.json").write_text(json.dumps({"entries": [asdict(old)]}))

    assert main(["memory", "flush-status", "--config", str(config_path)]) == 0

    line = next(x for x in capsys.readouterr().out.splitlines() if "s-old" in x)
    assert line.split()[:4] == ["general", "yes", "6", "2"]
    assert (data / "memory_flush_state.json.migrated").exists()
    assert not (data / "memory_flush_state.json").exists()
