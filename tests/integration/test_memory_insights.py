"""Theory-of-mind insights: after a flush, at most once a day per person, one budgeted model
call writes 1-3 third-person insights (type insight, relationship_dynamic); nothing when empty."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest
from mindroom.config import load_config
from mindroom.memory.flush.loop import FlushWorker
from mindroom.memory.jobs.insights import PROMPT, parse_insights
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import config_text
from tests.support.scripted_model import ScriptedModel, system_text

ALICE = "@alice:example.org"
INSIGHTS = {
    "insights": [
        {"summary": "Alice opens up more when mistakes are admitted.", "tags": ["trust"]},
        {"summary": "I think she likes me.", "importance": 2},  # first person: rejected
    ]
}


def _world(tmp_path: Path, model: ScriptedModel, insights: dict[str, Any]) -> Path:
    path = tmp_path / "config.yaml"
    memory = {
        "auto_flush": {"enabled": True, "idle_seconds": 3600},
        "embedder": "none",
        "insights": insights,
    }
    path.write_text(config_text(model.base_url, {"general": {"rooms": ["r"]}}, memory=memory))
    return path


def _talk_and_flush(config_path: Path, sessions: list[str]) -> None:
    async def run() -> None:
        config = load_config(config_path)
        root = config_path.parent
        registry = MemoryRegistry(config, root, root)
        runtime = AgentRuntime(config, root / "mindroom_data", registry)
        worker = FlushWorker(config, runtime, registry, root / "mindroom_data")
        try:
            for session in sessions:
                await runtime.run_turn(TurnRequest("general", session, ALICE, "sorry, my mistake"))
                await worker.turn_finished("general", session, None)
                await worker.cycle(force=True)
        finally:
            await worker.aclose()
            await runtime.close()
            registry.close()

    asyncio.run(run())


def test_a_flush_writes_valid_insights_once_a_day(tmp_path: Path) -> None:
    asked: list[dict[str, Any]] = []
    with ScriptedModel() as model:

        def handler(request: dict[str, Any]) -> str:
            system = system_text(request)
            if system.startswith(PROMPT[:40]):
                asked.append(request)
                return json.dumps(INSIGHTS)
            if "You maintain the long-term memory" in system:
                return "- [general] Alice apologised for a mistake in the report"
            return "No worries!"

        model.set_handler(handler)
        _talk_and_flush(_world(tmp_path, model, {"enabled": True}), ["s1", "s2"])
    assert len(asked) == 1  # the second flush that day did not ask again
    assert asked[0]["temperature"] == 0.0
    assert asked[0]["max_tokens"] == 220
    assert "sorry, my mistake" in asked[0]["messages"][-1]["content"]
    text = (tmp_path / "agents" / "general" / "workspace" / "insights.md").read_text()
    assert "- Alice opens up more when mistakes are admitted. <!-- m-" in text
    assert "category=relationship_dynamic importance=2 type=insight" in text
    assert "likes me" not in text


def test_nothing_is_asked_when_off_and_nothing_written_when_empty(tmp_path: Path) -> None:
    asked: list[str] = []
    for enabled, answer in ((False, INSIGHTS), (True, {"insights": []})):
        folder = tmp_path / str(enabled)
        folder.mkdir()
        with ScriptedModel() as model:

            def handler(
                request: dict[str, Any], answer: dict[str, Any] = answer, on: bool = enabled
            ) -> str:
                system = system_text(request)
                if system.startswith(PROMPT[:40]):
                    asked.append(str(on))
                    return json.dumps(answer)
                if "You maintain the long-term memory" in system:
                    return "NO_REPLY"
                return "ok"

            model.set_handler(handler)
            _talk_and_flush(_world(folder, model, {"enabled": enabled}), ["s1"])
        assert not (folder / "agents" / "general" / "workspace" / "insights.md").exists()
    assert asked == ["True"]  # off: not even asked; on with nothing: asked, nothing written


def test_unreadable_answers_give_no_insights() -> None:
    assert parse_insights("I cannot tell.") == []
    assert parse_insights('{"insights": "many"}') == []
    assert parse_insights('```json\n{"insights": [{"summary": "A", "importance": 9}]}\n```') == [
        ("A", 2)
    ]
