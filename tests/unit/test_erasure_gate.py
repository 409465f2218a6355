"""The erasure gate: forget-me runs alone, after the work running when it was asked for, and
before the work that came after (mindroom.people.erasure)."""

from __future__ import annotations

import asyncio

import pytest

from mindroom.people.erasure import ErasureGate

pytestmark = pytest.mark.asyncio


async def until(condition, what: str) -> None:  # noqa: ANN001
    """Let the loop run until ``condition()`` holds (bounded; no clock involved)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


async def test_an_erasure_waits_for_running_work_and_later_work_waits_for_it() -> None:
    gate = ErasureGate()
    log: list[str] = []
    finish_first = asyncio.Event()

    async def work(name: str, done: asyncio.Event | None = None) -> None:
        async with gate.working():
            log.append(f"{name} starts")
            if done is not None:
                await done.wait()
            log.append(f"{name} ends")

    async def erase() -> None:
        async with gate.erasing():
            log.append("erase starts")
            await asyncio.sleep(0)
            log.append("erase ends")

    first = asyncio.create_task(work("first", finish_first))
    await until(lambda: gate.working_now == 1, "the first work runs")
    erasure = asyncio.create_task(erase())
    await until(lambda: gate.erasure_waiting, "the erasure waits")
    later = asyncio.create_task(work("later"))
    await until(lambda: gate.held_back == 1, "the later work waits")
    assert log == ["first starts"]  # neither the erasure nor the later work has started
    finish_first.set()
    await asyncio.gather(first, erasure, later)

    assert log == ["first starts", "first ends", "erase starts", "erase ends", "later starts",
                   "later ends"]  # fmt: skip
    assert gate.working_now == 0
    assert not gate.erasure_waiting
    assert gate.held_back == 0


async def test_work_nested_in_work_joins_it_while_an_erasure_waits() -> None:
    gate = ErasureGate()
    inner_ran = asyncio.Event()
    go_on = asyncio.Event()
    log: list[str] = []

    async def answer() -> None:
        async with gate.working():
            await go_on.wait()  # an erasure queues up meanwhile
            async with gate.working():  # a command the answer runs, say
                inner_ran.set()

    async def fresh() -> None:
        async with gate.working():
            log.append("fresh")

    async def erase() -> None:
        async with gate.erasing():
            log.append("erase")

    outer = asyncio.create_task(answer())
    await until(lambda: gate.working_now == 1, "the answer runs")
    erasure = asyncio.create_task(erase())
    await until(lambda: gate.erasure_waiting, "the erasure waits")
    other = asyncio.create_task(fresh())  # the control: unrelated work waits behind it
    go_on.set()
    await asyncio.wait_for(inner_ran.wait(), 5)  # nested work was not held back
    await asyncio.gather(outer, erasure, other)

    assert log == ["erase", "fresh"]


async def test_a_task_outliving_its_work_queues_like_any_other() -> None:
    gate = ErasureGate()
    spawned: list[asyncio.Task[None]] = []
    log: list[str] = []

    go = asyncio.Event()

    async def late() -> None:
        await go.wait()
        async with gate.working():
            log.append("late")

    async def answer() -> None:
        async with gate.working():
            spawned.append(asyncio.create_task(late()))  # runs after the answer ended

    async def erase() -> None:
        async with gate.erasing():
            log.append("erase")

    async with gate.working():  # the erasure queues while this runs
        await asyncio.create_task(answer())
        erasure = asyncio.create_task(erase())
        await until(lambda: gate.erasure_waiting, "the erasure waits")
        go.set()  # the spawned task asks for the gate after its answer ended
        for _ in range(10):
            await asyncio.sleep(0)
        assert log == []
    await asyncio.gather(erasure, *spawned)

    assert log == ["erase", "late"]  # its lease had ended: it did not slip past the erasure


async def test_a_cancelled_erasure_lets_the_work_it_held_back_go() -> None:
    gate = ErasureGate()
    release = asyncio.Event()
    ran: list[str] = []

    async def long_work() -> None:
        async with gate.working():
            await release.wait()

    async def held_back() -> None:
        async with gate.working():
            ran.append("held back")

    async def erase() -> None:
        async with gate.erasing():
            ran.append("erased")  # never: it is cancelled while it waits

    first = asyncio.create_task(long_work())
    await until(lambda: gate.working_now == 1, "the work runs")
    erasure = asyncio.create_task(erase())
    await until(lambda: gate.erasure_waiting, "the erasure waits")
    waiting = asyncio.create_task(held_back())
    for _ in range(10):
        await asyncio.sleep(0)
    assert ran == []  # the control: held back while the erasure waits
    erasure.cancel()
    await asyncio.wait_for(waiting, 5)
    release.set()
    await first

    assert ran == ["held back"]
    assert erasure.cancelled()


async def test_work_that_fails_or_is_cancelled_still_lets_an_erasure_run() -> None:
    gate = ErasureGate()
    started = asyncio.Event()

    async def failing() -> None:
        async with gate.working():
            raise RuntimeError("the model failed")

    async def cancelled() -> None:
        async with gate.working():
            started.set()
            await asyncio.Event().wait()

    with pytest.raises(RuntimeError):
        await failing()
    task = asyncio.create_task(cancelled())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with asyncio.timeout(5):
        async with gate.erasing():
            assert gate.working_now == 0


async def test_an_erasure_waits_for_tracked_work_that_outlived_its_lease() -> None:
    gate = ErasureGate()
    thread_done = asyncio.get_running_loop().create_future()  # a thread past its timeout
    log: list[str] = []

    async def flush() -> None:
        async with gate.working():
            gate.track(thread_done)  # the flush gives up on it; it keeps writing

    async def erase() -> None:
        async with gate.erasing():
            log.append("erase")

    async def later() -> None:
        async with gate.working():
            log.append("later")

    await flush()
    erasure = asyncio.create_task(erase())
    await until(lambda: gate.working_now == 0 and not gate.erasure_waiting, "the erasure holds")
    waiting = asyncio.create_task(later())
    await until(lambda: gate.held_back == 1, "later work waits")
    assert log == []  # the control: the erasure waits for the tracked thread
    log.append("thread done")
    thread_done.set_result(None)
    await asyncio.gather(erasure, waiting)

    assert log == ["thread done", "erase", "later"]
