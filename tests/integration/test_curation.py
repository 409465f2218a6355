"""Curation: durable facts move from the daily files into MEMORY.md, append-only, capped."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindroom.adapters.agno.runner import AgentRuntime
from mindroom.config import parse_config
from mindroom.memory.files.store import today
from mindroom.memory.flush.loop import FlushWorker
from mindroom.memory.flush.state import FlushEntry
from mindroom.memory.policy.consent import WriteConsent
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import config_text
from tests.support.scripted_model import ScriptedModel

SEEDED = WriteConsent.confirmed()  # test data stands for facts stored with consent


@pytest.mark.asyncio
async def test_curation_promotes_within_caps_once_a_day(
    tmp_path: Path, model: ScriptedModel
) -> None:
    curation = {"enabled": True, "max_lines_per_pass": 2, "max_passes_per_day": 1}
    config = parse_config(
        config_text(
            model.base_url,
            {"general": {"rooms": ["r"]}},
            memory={"auto_flush": {"enabled": True, "curation": curation}},
        ),
        "config.yaml",
    )
    registry = MemoryRegistry(config, tmp_path)
    runtime = AgentRuntime(config, tmp_path / "mindroom_data", registry)
    worker = FlushWorker(config, runtime, registry, tmp_path / "mindroom_data")
    memory = registry.for_agent("general")
    assert memory is not None
    daily = f"memory/{today()}.md"
    for fact in ("Ana is the user's daughter", "The user is vegetarian", "It rained today"):
        memory.add_sync(fact, actor="flush", path=daily)
    memory.add_sync("The user lives in Porto", actor="cli", consent=SEEDED)
    model.push(
        "- Ana is the user's daughter\n- The user is vegetarian\n- The user lives in Porto\n"
        "- A third line beyond the cap"
    )
    try:
        entry = FlushEntry("general", "s1")
        promoted = await worker.curate(entry)
        again = await worker.curate(entry)  # the per-day cap
        restarted = FlushWorker(config, runtime, registry, tmp_path / "mindroom_data")
        after_restart = await restarted.curate(entry)  # the cap survives a restart
        await restarted.aclose()
    finally:
        await worker.aclose()
        await runtime.close()
        registry.close()

    assert promoted == ["Ana is the user's daughter", "The user is vegetarian"]
    assert again == []
    assert after_restart == []
    long_term = [e.text for e in memory.list_sync() if e.path == "MEMORY.md"]
    assert long_term == ["The user lives in Porto", *promoted]
    daily_texts = [e.text for e in memory.list_sync() if e.path == daily]
    assert len(daily_texts) == 3  # append-only: the daily file is untouched
    assert {r.actor for r in memory.history_of() if r.path == "MEMORY.md"} == {"cli", "curation"}
    request = model.requests[0]["messages"][-1]["content"]
    assert "The user lives in Porto" in request  # it saw what MEMORY.md already holds
