"""The task supervisor: failures are logged the moment they happen, services come back."""

from __future__ import annotations

import asyncio
import logging

import pytest

from mindroom import tasks
from mindroom.tasks import TaskSupervisor
from tests.support.waiting import wait_until

pytestmark = pytest.mark.asyncio


async def test_a_failing_service_is_logged_at_once_and_restarted(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(tasks, "RESTART_FIRST_S", 0.01)
    runs: list[int] = []
    forever = asyncio.Event()

    async def flaky() -> None:
        runs.append(len(runs))
        if len(runs) < 3:
            raise RuntimeError(f"boom {len(runs)}")
        await forever.wait()

    supervisor = TaskSupervisor()
    with caplog.at_level(logging.ERROR, logger="mindroom.tasks"):
        supervisor.keep_running("memory-watch", flaky)
        await wait_until(lambda: len(runs) == 3)
        assert supervisor.running("memory-watch")
        failures = [r for r in caplog.records if "memory-watch failed" in r.getMessage()]
        assert len(failures) == 2  # each failure logged while the service was still running
        assert failures[0].exc_info is not None
        assert "boom 2" in supervisor.failures["memory-watch"]
        await supervisor.stop(grace_s=1)
    assert not supervisor.running("memory-watch")


async def test_a_service_that_returns_is_not_restarted() -> None:
    runs: list[int] = []

    async def once() -> None:
        runs.append(1)

    supervisor = TaskSupervisor()
    supervisor.keep_running("config-watch", once)
    await wait_until(lambda: not supervisor.running("config-watch"))
    await supervisor.stop(grace_s=1)
    assert runs == [1]


async def test_a_failing_job_is_logged_when_it_fails_not_at_shutdown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    supervisor = TaskSupervisor()
    release = asyncio.Event()

    async def bad() -> None:
        raise ValueError("answer broke")

    async def slow() -> None:
        await release.wait()

    with caplog.at_level(logging.ERROR, logger="mindroom.tasks"):
        supervisor.spawn(slow(), "handle:$slow")
        supervisor.spawn(bad(), "handle:$bad")
        await wait_until(
            lambda: any("handle:$bad failed" in r.getMessage() for r in caplog.records)
        )
        assert [t.get_name() for t in supervisor.jobs("handle:")] == ["handle:$slow"]
        release.set()
        await supervisor.stop(grace_s=1)
    assert "answer broke" in supervisor.failures["handle:$bad"]


async def test_stop_cancels_jobs_that_outlive_the_grace_period() -> None:
    supervisor = TaskSupervisor()
    cancelled = asyncio.Event()

    async def stuck() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    supervisor.spawn(stuck(), "handle:$stuck")
    await asyncio.sleep(0)
    await supervisor.stop(grace_s=0.05)
    assert cancelled.is_set()
    assert supervisor.jobs() == []
