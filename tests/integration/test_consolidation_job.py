"""The consolidation job as the scheduler runs it: every scope of a storage (a shared agent, a
team mirrored into its members, each person's private root), the model over real HTTP within
the budget, the run audited; one person's memory never meets another's."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

from mindroom.config import Config, parse_config
from mindroom.memory.files.archive import archived_entries
from mindroom.memory.files.protocol import read_text
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords, db_path
from mindroom.memory.jobs.maintenance.runner import MaintenanceRunner
from mindroom.memory.jobs.maintenance.store import MaintenanceStore
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import config_text
from tests.support.maintenance import FakeClock
from tests.support.scripted_judge import is_judge_request, judge_handler
from tests.support.scripted_model import ScriptedModel

ALICE = "@alice:localhost"
BOB = "@bob:localhost"
NOW = dt.datetime(2026, 11, 25, 11, 0, tzinfo=dt.UTC)


def storage_config(model: ScriptedModel, mode: str = "deep", **job: Any) -> Config:
    return parse_config(
        config_text(
            model.base_url,
            {"general": {}, "coder": {}, "mind": {"private": {"per": "user"}}},
            teams={"crew": {"agents": ["general", "coder"]}},
            memory={
                "embedder": "none",
                "auto_flush": {"enabled": False},
                "maintenance": {
                    "timezone": "UTC",
                    "consolidation": {"promotion_confidence": 1.0},
                    "jobs": {
                        "consolidation_daily": {"enabled": False},
                        "consolidation_weekly": {"enabled": False},
                        "memory_lifecycle": {"enabled": False},
                        "now": {"mode": mode, "cadence": "interval", "interval_minutes": 60, **job},
                    },
                },
            },
        ),
        "config.yaml",
    )


def texts(memory: FileMemory) -> list[str]:
    return sorted(e.text for e in memory.list_sync(1000))


def plant(registry: MemoryRegistry) -> None:
    """Duplicates in every scope; the same sentence in Alice's and Bob's private roots."""
    general = registry.for_agent("general")
    team = registry.for_team(["general", "coder"])
    alice, bob = registry.for_agent("mind", ALICE), registry.for_agent("mind", BOB)
    assert isinstance(general, FileMemory)
    assert isinstance(team, FileMemory)
    assert isinstance(alice, FileMemory)
    assert isinstance(bob, FileMemory)
    for day in ("2026-11-01", "2026-11-03"):
        general.add_sync("The staging server runs Debian", actor="t", path=f"memory/{day}.md")
        team.add_sync("The launch is on Monday", actor="t", path=f"memory/{day}.md")
        alice.add_sync("I have a dog called Pixel", actor="t", path=f"memory/{day}.md")
        bob.add_sync("I have a cat called Miso", actor="t", path=f"memory/{day}.md")
    general.add_sync("The deploy day is Friday", actor="t", path="memory/2026-11-02.md")
    general.add_sync("The deploy day is Tuesday", actor="t", path="memory/2026-11-04.md")
    for person in (alice, bob):  # one sentence in both: never one fact across people
        person.add_sync("My sister is called Ines", actor="t", path="memory/2026-11-02.md")


def planted(config: Config, storage: Path) -> None:
    """:func:`plant` into ``storage``'s memories, closed again (the job opens its own)."""
    registry = MemoryRegistry(config, storage)
    try:
        plant(registry)
    finally:
        registry.close()


def tick(config: Config, storage: Path, registry: MemoryRegistry | None = None) -> Any:
    store = MaintenanceStore(storage / "mindroom_data" / "maintenance.db")
    runner = MaintenanceRunner(
        store, storage, lambda: config, registry=registry, clock=FakeClock(NOW)
    )
    results = asyncio.run(runner.tick())
    return results, store.runs("now")


def test_a_deep_run_consolidates_every_scope_apart_and_is_audited(
    tmp_path: Path, model: ScriptedModel
) -> None:
    model.set_handler(
        judge_handler({("The deploy day is Friday", "The deploy day is Tuesday"): "conflict"})
    )
    config = storage_config(model)
    planted(config, tmp_path)

    results, runs = tick(config, tmp_path)

    assert [(r.job, r.status) for r in results] == [("now", "completed")], results
    (run,) = runs
    judge_calls = [r for r in model.requests if is_judge_request(r)]
    assert run.stats["model_calls"] == len(judge_calls) >= 1
    # general, coder (empty), the team, and two private roots
    assert run.stats["scopes"] == 5, run.stats
    assert run.stats["scope_errors"] == 0, run.stats
    assert run.stats["merged"] == 4  # one duplicate in each scope
    assert run.stats["conflicts"] == 1

    registry = MemoryRegistry(config, tmp_path)
    try:
        general = registry.for_agent("general")
        alice, bob = registry.for_agent("mind", ALICE), registry.for_agent("mind", BOB)
        assert isinstance(general, FileMemory)
        assert isinstance(alice, FileMemory)
        assert isinstance(bob, FileMemory)
        assert texts(alice) == ["I have a dog called Pixel", "My sister is called Ines"]
        assert texts(bob) == ["I have a cat called Miso", "My sister is called Ines"]
        # each person's archive holds their own duplicate, nothing of the other's
        assert [a.entry.text for a in archived_entries(alice)] == ["I have a dog called Pixel"]
        assert [a.entry.text for a in archived_entries(bob)] == ["I have a cat called Miso"]
        (conflict,) = ConsolidationRecords(db_path(general.scope.state_dir)).conflicts()
        assert {conflict.metadata["a"]["text"], conflict.metadata["b"]["text"]} == {
            "The deploy day is Friday",
            "The deploy day is Tuesday",
        }
        for person in (alice, bob):
            assert ConsolidationRecords(db_path(person.scope.state_dir)).conflicts() == []
        # no judge prompt carried a private sentence next to another scope's (or person's)
        for request in judge_calls:
            body = str(request)
            assert "Pixel" not in body or "Miso" not in body
    finally:
        registry.close()

    # the team's merge reached every member's mirror: one archive, one set of entries
    roots = [
        tmp_path / "agents" / m / "memory_files" / "team_coder+general"
        for m in ("general", "coder")
    ]
    archives = [read_text(root / "memory/archive/2026-11.md") for root in roots]
    assert archives[0] == archives[1]
    assert "The launch is on Monday" in archives[0]
    dailies = [read_text(root / "memory/2026-11-03.md") for root in roots]
    assert dailies[0] == dailies[1]
    assert (
        sum(
            "The launch is on Monday" in read_text(r / "memory/2026-11-01.md") + d
            for r, d in zip(roots, dailies, strict=True)
        )
        == 2
    )


def test_a_light_run_asks_no_model_and_leaves_the_model_pairs_for_the_deep_run(
    tmp_path: Path, model: ScriptedModel
) -> None:
    model.set_handler(judge_handler({}, default="conflict"))
    config = storage_config(model, mode="light")
    planted(config, tmp_path)

    results, runs = tick(config, tmp_path)

    assert [r.status for r in results] == ["completed"]
    assert model.requests == []
    assert runs[0].stats["model_calls"] == 0
    assert runs[0].stats["merged"] == 4
    assert runs[0].stats["conflicts"] == 0
    assert runs[0].stats["unjudged"] >= 1


def test_a_job_without_a_usable_model_still_merges_and_says_why(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config = storage_config(model, llm_command=[str(tmp_path / "no-such-judge")])
    planted(config, tmp_path)

    results, runs = tick(config, tmp_path)

    assert [r.status for r in results] == ["completed"]
    assert runs[0].stats["merged"] == 4
    assert runs[0].stats["conflicts"] == 0
    assert runs[0].stats["model_failures"] >= 1 or "model_skipped" in runs[0].stats
    assert model.requests == []
