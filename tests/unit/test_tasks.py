"""The task supervisor: failures are logged the moment they happen, services come back."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable

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


async def test_stop_waits_for_the_jobs_a_job_spawns_while_stop_waits() -> None:
    """A turn finishing during shutdown spawns its follow-up (indexing its session): stop
    waits for that one too, within the grace, instead of returning while it still runs (it
    would then run on past the close of what it uses)."""
    supervisor = TaskSupervisor()
    release, proceed = asyncio.Event(), asyncio.Event()
    done: list[str] = []

    async def follow_up() -> None:
        await proceed.wait()
        done.append("follow-up")

    async def turn() -> None:
        await release.wait()
        supervisor.spawn(follow_up(), "index-session:s")
        done.append("turn")

    supervisor.spawn(turn(), "handle:$turn")
    stopping = asyncio.create_task(supervisor.stop(grace_s=30))
    await asyncio.sleep(0)  # one round: the turn waits for its release, stop waits for the turn
    release.set()
    await wait_until(lambda: done == ["turn"] and supervisor.jobs("index-session"))
    assert not stopping.done()  # the follow-up is running: stop is still waiting for it
    proceed.set()
    await stopping
    assert done == ["turn", "follow-up"]
    assert supervisor.jobs() == []  # and it returned once the follow-up finished


async def _loop_until_cancelled(
    wait: Callable[[asyncio.Event], Awaitable[None]], yields: int
) -> bool:
    """A background loop that waits for a wake-up with a timeout, cancelled ``yields`` loop
    rounds after its wake-up came (the moment a shutdown meets a handled message): True if the
    cancel ended it."""
    wake, waiting = asyncio.Event(), asyncio.Event()

    async def loop() -> None:
        while True:
            wake.clear()
            waiting.set()  # and on, without a pause, into the wait
            with contextlib.suppress(TimeoutError):
                await wait(wake)

    task = asyncio.create_task(loop())
    await waiting.wait()  # it is suspended in its wait now
    wake.set()
    for _ in range(yields):
        await asyncio.sleep(0)  # the wait's inner future completes meanwhile...
    task.cancel()  # ...and the cancel arrives
    done, _ = await asyncio.wait({task}, timeout=1)
    if not done:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return bool(done)


MOMENTS = range(4)  # how many loop rounds after the wake-up the cancel comes


async def test_within_ends_a_loop_cancelled_whenever_its_wait_finishes() -> None:
    ended = [await _loop_until_cancelled(lambda w: tasks.within(w.wait(), 60), n) for n in MOMENTS]
    assert ended == [True] * len(MOMENTS)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="wait_for was mended in Python 3.12")
async def test_the_control_asyncio_wait_for_swallows_that_cancel_at_some_moment() -> None:
    ended = [
        await _loop_until_cancelled(lambda w: asyncio.wait_for(w.wait(), 60), n) for n in MOMENTS
    ]
    assert False in ended


async def test_cancel_and_wait_cancels_again_a_task_that_swallowed_the_first_cancel() -> None:
    swallowed: list[int] = []

    async def stubborn() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            swallowed.append(1)  # carries on, as code with the wait_for flaw did
        await asyncio.Event().wait()

    task = asyncio.create_task(stubborn(), name="stubborn")
    await asyncio.sleep(0)
    await tasks.cancel_and_wait(task)
    assert swallowed == [1]  # the first cancel was swallowed...
    assert task.cancelled()  # ...and the second one ended it


async def test_to_the_end_waits_for_its_work_through_a_second_cancel() -> None:
    """A caller cancelled twice (a stop, then the shutdown's cancel of every task) still ends
    only once the work ended: a step after it (a rollback, a close) never runs beside it."""
    release = asyncio.Event()
    ended: list[str] = []
    asked: list[int] = []

    async def work() -> int:
        await release.wait()
        ended.append("work")
        return 1

    async def caller() -> int:
        try:
            return await tasks.to_the_end(work(), on_cancel=lambda: asked.append(1))
        finally:
            ended.append("caller")

    task = asyncio.create_task(caller())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()
    for _ in range(20):  # the loop runs on; the caller still waits for the work
        await asyncio.sleep(0)
    assert not task.done()
    assert asked == [1]  # asked to end soon once, at the first cancel
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ended == ["work", "caller"]


async def test_to_the_end_returns_the_works_result_and_raises_its_error() -> None:
    async def fails() -> None:
        raise ValueError("no")

    async def answers() -> int:
        return 42

    assert await tasks.to_the_end(answers()) == 42
    with pytest.raises(ValueError, match="no"):
        await tasks.to_the_end(fails())
