"""Agno learning is wired per agent, with its store under agents/<name>/learning/."""

from __future__ import annotations

from pathlib import Path

import pytest
from agno.learn import LearningMachine

from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest
from mindroom.config import parse_config
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import config_text
from tests.support.scripted_model import ScriptedModel


@pytest.mark.asyncio
async def test_learning_agent_gets_a_learning_machine_with_its_own_store(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config = parse_config(
        config_text(
            model.base_url,
            {
                "student": {"rooms": ["r"], "learning": True, "learning_mode": "agentic"},
                "plain": {"rooms": ["r"]},
            },
        ),
        "config.yaml",
    )
    runtime = AgentRuntime(config, tmp_path / "mindroom_data", MemoryRegistry(config, tmp_path))
    try:
        assert isinstance(runtime.build_agent("student").learning, LearningMachine)
        assert runtime.build_agent("plain").learning is None
        # learning keeps no audience: it joins a turn only where the person alone reads it
        group = RoomAudience.shared(frozenset({"@u:localhost", "@v:localhost"}), closed=True)
        dm = RoomAudience.private_to("@u:localhost")
        assert runtime.build_agent("student", requester="@u:localhost", room=group).learning is None
        in_dm = runtime.build_agent("student", requester="@u:localhost", room=dm)
        assert isinstance(in_dm.learning, LearningMachine)
        result = await runtime.run_turn(TurnRequest("student", "s1", "@u:localhost", "hi"))
        assert result.ok, result.error
        assert (tmp_path / "agents" / "student" / "learning" / "student.db").exists()
        assert not (tmp_path / "agents" / "plain" / "learning").exists()
    finally:
        await runtime.close()
