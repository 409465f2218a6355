"""``mindroom memory flush`` and ``flush-status`` from the command line."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mindroom.agents.runner import AgentRuntime, TurnRequest
from mindroom.cli import main
from mindroom.config import load_config
from mindroom.flush import FlushWorker
from mindroom.memory.registry import MemoryRegistry
from tests.harness import config_text
from tests.scripted_model import ScriptedModel, system_text


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


def test_flush_command_writes_and_reports_and_status_shows_the_table(
    tmp_path: Path, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
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
