"""Team conversations are flushed too, into the team memory mirrored to every member."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindroom.agents.runner import AgentRuntime, TeamSpec, TurnRequest
from mindroom.config import parse_config
from mindroom.flush import FlushWorker
from mindroom.memory.markdown import parse_entries
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.store import today
from tests.harness import config_text
from tests.scripted_model import ScriptedModel, all_text, system_text


@pytest.mark.asyncio
async def test_a_team_session_is_flushed_into_every_members_mirror(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config = parse_config(
        config_text(
            model.base_url,
            {"general": {"rooms": ["r"]}, "coder": {"rooms": ["r"]}},
            teams={"crew": {"agents": ["general", "coder"], "rooms": ["r"]}},
            memory={"auto_flush": {"enabled": True}},
        ),
        "config.yaml",
    )

    def handler(request: dict) -> str:
        if "You maintain the long-term memory" in system_text(request):
            return "- The launch is on Monday" if "launch" in all_text(request) else "NO_REPLY"
        return "We will launch on Monday."

    model.set_handler(handler)
    registry = MemoryRegistry(config, tmp_path)
    runtime = AgentRuntime(config, tmp_path / "mindroom_data", registry)
    worker = FlushWorker(config, runtime, registry, tmp_path / "mindroom_data")
    try:
        spec = TeamSpec.configured(config, "crew")
        result = await runtime.run_team_turn(
            spec, TurnRequest("general", "crew:room:t1", "@u:x", "when is the launch?")
        )
        assert result.ok, result.error
        await worker.turn_finished("crew", "crew:room:t1", "@u:x", spec.members)
        results = await worker.cycle(force=True)
    finally:
        await runtime.close()
        registry.close()

    assert [r.written for r in results] == [("The launch is on Monday",)]
    copies = [
        tmp_path / "agents" / m / "memory_files" / "team_coder+general" / "memory" / f"{today()}.md"
        for m in ("general", "coder")
    ]
    entries = [parse_entries(c.read_text(), "memory/x.md") for c in copies]
    assert [e.text for e in entries[0]] == ["The launch is on Monday"]
    assert entries[0] == entries[1]  # one id in both mirrors
