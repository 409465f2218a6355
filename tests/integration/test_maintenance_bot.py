"""The bot runs maintenance: a due job at start (in the background), never twice beside
``mindroom maintenance tick``, interrupted cleanly at shutdown and run again at the next start."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from mindroom.adapters.agno.runner import AgentRuntime
from mindroom.cli.main import main
from mindroom.memory.flush.loop import FlushWorker
from mindroom.memory.jobs.maintenance.runner import JOB_TYPES, JobContext
from mindroom.memory.jobs.maintenance.store import MaintenanceStore
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import BotHarness, config_text, unique
from tests.support.maintenance import EVERY_HOUR, CountingJob, maintenance_config
from tests.support.scripted_model import ScriptedModel
from tests.support.waiting import wait_until


def bot_config(model: ScriptedModel, jobs: dict[str, Any], **settings: Any) -> str:
    """One agent; maintenance with ``jobs`` (the default jobs off), windows in UTC."""
    maintenance = {
        "timezone": "UTC",
        **settings,
        "jobs": {
            "consolidation_daily": {"enabled": False},
            "consolidation_weekly": {"enabled": False},
            "memory_lifecycle": {"enabled": False},
            **jobs,
        },
    }
    memory = {"auto_flush": {"enabled": False}, "embedder": "none", "maintenance": maintenance}
    return config_text(model.base_url, {"general": {"rooms": [unique("lobby")]}}, memory=memory)


def store_of(storage: Path) -> MaintenanceStore:
    return MaintenanceStore(storage / "mindroom_data" / "maintenance.db")


@pytest.fixture
def counting(monkeypatch: pytest.MonkeyPatch) -> CountingJob:
    job = CountingJob()
    monkeypatch.setitem(JOB_TYPES, "consolidation", job)
    return job


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_the_bot_runs_a_due_job_at_start_and_a_cli_tick_beside_it_does_not_run_it_again(
    bot: BotHarness, model: ScriptedModel, counting: CountingJob, capsys: pytest.CaptureFixture[str]
) -> None:
    counting.gate = threading.Event()  # the run stays open until the test lets it finish
    await bot.start(bot_config(model, {"hourly": EVERY_HOUR}))  # returns with the run open
    assert bot.bot is not None
    await wait_until(lambda: len(counting.runs) == 1)
    assert counting.runs[0].registry is bot.bot.memories  # the bot's open memories
    config = str(bot.storage / "config.yaml")
    assert await asyncio.to_thread(main, ["maintenance", "tick", "--config", config]) == 0
    assert "hourly: skipped: running in" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["maintenance", "status", "--config", config]) == 0
    assert "  running   in " in capsys.readouterr().out
    assert len(counting.runs) == 1
    counting.gate.set()
    store = store_of(bot.storage)
    await wait_until(lambda: [run.status for run in store.runs("hourly")] == ["completed"])
    assert await asyncio.to_thread(main, ["maintenance", "tick", "--config", config]) == 0
    assert "nothing due; next: hourly" in capsys.readouterr().out
    assert len(counting.runs) == 1


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_a_job_the_bot_stops_between_scopes_runs_again_at_the_next_start(
    bot: BotHarness, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    started = asyncio.Event()
    finished: list[int] = []
    release = asyncio.Event()

    async def scoped(ctx: JobContext) -> dict[str, int]:
        started.set()
        while not release.is_set():  # scopes, each followed by a heartbeat
            await asyncio.sleep(0.01)
            ctx.heartbeat()
        finished.append(1)
        return {"model_calls": 0}

    monkeypatch.setitem(JOB_TYPES, "consolidation", scoped)
    await bot.start(bot_config(model, {"hourly": EVERY_HOUR}))
    await asyncio.wait_for(started.wait(), 30)
    await bot.stop()
    store = store_of(bot.storage)
    [run] = store.runs("hourly")
    assert run.status == "failed"
    assert "stopping" in (run.error_message or "")
    job = store.job("hourly")
    assert job is not None
    assert job.lease_owner is None
    assert finished == []
    release.set()  # the next run goes through
    started.clear()
    await bot.start()
    await wait_until(
        lambda: [run.status for run in store.runs("hourly")] == ["failed", "completed"]
    )
    assert finished == [1]


@pytest.mark.asyncio
async def test_the_flush_worker_calls_its_cycle_hook_after_each_cycle(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config = maintenance_config({})
    registry = MemoryRegistry(config, tmp_path)
    runtime = AgentRuntime(config, tmp_path / "mindroom_data", registry)
    worker = FlushWorker(config, runtime, registry, tmp_path / "mindroom_data")
    cycles: list[int] = []
    worker.on_cycle = lambda: cycles.append(1)
    task = asyncio.create_task(worker.run())  # its first cycle runs at once
    try:
        await wait_until(lambda: len(cycles) == 1)
    finally:
        worker.stop()
        await task
        await runtime.close()
        registry.close()
