"""Facts the flush writes: tagged with category and importance, validated, within the allowlist
and the caps (3 a message, a daily cap), through the real flush worker and scripted model."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest
from mindroom.config import load_config
from mindroom.config.schema import Config
from mindroom.memory.files.facts import admit, tagged
from mindroom.memory.flush.loop import FlushWorker
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import config_text
from tests.support.scripted_model import ScriptedModel, system_text

EVERYTHING = CategoryAccess.everything()


def test_a_tag_gives_the_category_and_importance() -> None:
    assert tagged("[preferences, 4] Alice prefers green tea") == (
        "Alice prefers green tea",
        "preferences",
        4,
    )
    assert tagged("[Goals] Alice wants to run a marathon") == (
        "Alice wants to run a marathon",
        "goals",
        None,
    )
    assert tagged("Alice likes chess") == ("Alice likes chess", None, None)


def test_admit_validates_checks_the_allowlist_and_caps_per_message_and_day() -> None:
    config = Config.model_validate({"agents": {}, "memory": {"allowlists": {}}})
    tasks_only = CategoryAccess.of(config, None)
    tasks_only = CategoryAccess(
        "planner", frozenset({"tasks", "general"}), "general", tasks_only.rules
    )
    lines = [
        "[tasks] Alice must renew her passport",
        "[profile] Alice lives in Lyon",  # not on the list
        "I love tea",  # first person
        "[unknown-cat] Alice keeps bees",  # not a category
        "[tasks] Alice must call the bank",
        "[tasks] Alice must water the plants",
        "[tasks] Alice must book a dentist",  # the fourth admitted one: over 3 for one message
    ]
    decided = admit(lines, tasks_only, turns=1, written_today=0, daily_cap=60)
    assert [f.text for f in decided if f.written] == [
        "Alice must renew her passport",
        "Alice must call the bank",
        "Alice must water the plants",
    ]
    reasons = {f.text: f.reason for f in decided if not f.written}
    assert "may not write memories in category 'profile'" in reasons["Alice lives in Lyon"]
    assert "first person" in reasons["I love tea"]
    assert "unknown memory category 'unknown-cat'" in reasons["Alice keeps bees"]
    assert "over the cap" in reasons["Alice must book a dentist"]
    daily = admit(lines[:1], EVERYTHING, turns=5, written_today=60, daily_cap=60)
    assert not daily[0].written
    assert "60 a day" in daily[0].reason


def test_the_flush_writes_tagged_facts_with_their_fields_and_skips_what_fails(
    tmp_path: Path,
) -> None:
    with ScriptedModel() as model:
        config_path = tmp_path / "config.yaml"
        memory = {"auto_flush": {"enabled": True, "idle_seconds": 3600}, "embedder": "none"}
        config_path.write_text(
            config_text(model.base_url, {"general": {"rooms": ["r"]}}, memory=memory)
        )
        prompts: list[str] = []

        def handler(request: dict[str, Any]) -> str:
            if "You maintain the long-term memory" in system_text(request):
                prompts.append(system_text(request))
                return (
                    "- [preferences, 4] The user prefers green tea\n"
                    "- I am the assistant and I noted this\n"
                    "- [tasks] The user wants to book a trip to Kyoto"
                )
            return "Noted!"

        model.set_handler(handler)

        async def converse() -> None:
            config = load_config(config_path)
            registry = MemoryRegistry(config, tmp_path, tmp_path)
            runtime = AgentRuntime(config, tmp_path / "mindroom_data", registry)
            worker = FlushWorker(config, runtime, registry, tmp_path / "mindroom_data")
            try:
                await runtime.run_turn(
                    TurnRequest("general", "s1", "@u:x", "green tea, and Kyoto!")
                )
                await worker.turn_finished("general", "s1", None)
                await worker.cycle(force=True)
            finally:
                await worker.aclose()
                await runtime.close()
                registry.close()

        asyncio.run(converse())
    daily = next(
        (tmp_path / "agents" / "general" / "workspace" / "memory").glob("*.md")
    ).read_text()
    assert "- The user prefers green tea <!-- m-" in daily
    assert "category=preferences importance=4" in daily
    assert "- The user wants to book a trip to Kyoto <!-- m-" in daily
    assert "category=tasks" in daily
    assert "assistant" not in daily  # the first-person line was not written
    assert "one of: general, profile, preferences" in prompts[0]  # the agent's categories
    assert "third-person" in prompts[0]
