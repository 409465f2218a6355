"""The recall contract in the prompt and ``!reset``: agents with
memory are told when to search it and to read only what they need; ``!reset`` is ``!new``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest
from mindroom.config import load_config
from mindroom.config.schema import Config
from mindroom.memory.registry import MemoryRegistry
from mindroom.pipeline.commands import Command, help_text, parse_command
from tests.support.harness import config_text
from tests.support.scripted_model import ScriptedModel, system_text

CONTRACT = "Before answering a question about prior work, decisions, dates, people"


def _system_of(tmp_path: Path, agents: dict[str, Any], **memory: Any) -> str:
    with ScriptedModel() as model:
        settings = {"auto_flush": {"enabled": False}, "embedder": "none", **memory}
        path = tmp_path / "config.yaml"
        path.write_text(config_text(model.base_url, agents, memory=settings))
        config = load_config(path)

        async def turn() -> None:
            registry = MemoryRegistry(config, tmp_path, tmp_path)
            runtime = AgentRuntime(config, tmp_path / "mindroom_data", registry)
            try:
                await runtime.run_turn(TurnRequest(next(iter(agents)), "s1", "@u:x", "hi"))
            finally:
                await runtime.close()
                registry.close()

        asyncio.run(turn())
        return system_text(model.requests[-1])


def test_an_agent_with_memory_is_told_when_to_search_it_and_to_read_little(
    tmp_path: Path,
) -> None:
    system = _system_of(tmp_path, {"general": {"rooms": ["r"]}})
    assert CONTRACT in system
    assert "memory_get with from_line and lines" in system


def test_the_contract_names_only_the_tools_the_agent_has(tmp_path: Path) -> None:
    system = _system_of(tmp_path, {"general": {"rooms": ["r"]}}, tools="query")
    assert CONTRACT in system
    assert "memory_query" in system
    assert "memory_get" not in system


def test_an_agent_without_memory_is_not_told_to_search_it(tmp_path: Path) -> None:
    system = _system_of(tmp_path, {"general": {"rooms": ["r"], "memory_backend": "none"}})
    assert CONTRACT not in system  # the control: the two tests above see it


def test_reset_is_a_known_command_that_does_what_new_does() -> None:
    assert parse_command("!reset") == Command("reset")
    assert Command("reset").known
    assert "`!new` (or `!reset`)" in help_text(Config(), [], {})
