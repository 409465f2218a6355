"""The answers running in this process, so they can be ended for a reason.

Each message being handled has a *lead* (the account whose lease its ledger row is filed
under, :mod:`mindroom.cluster.leases`) and runs one answer task per answering account. When an
account
stops running here, its work ends in one of three ways:

* **removed** from the config (:meth:`Running.interrupt`): its answers finish with what they
  wrote and a note; their messages are done.
* **moved** to another process (:meth:`Running.abandon`, its lease lost or handed back): the
  messages it leads are cut off and stay claimed, for the new holder to resume whole; its
  answers to messages another account here leads are *handed over* to the new holder (the
  answerer sees :meth:`Running.moved` and queues that one answer).
* **shutdown**: everything is cut off and stays claimed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

Task = asyncio.Task[Any]


class Running:
    """Message tasks by lead, answer tasks by answering account."""

    def __init__(self) -> None:
        self._led: dict[str, set[Task]] = {}
        self._answering: dict[str, set[Task]] = {}
        self._lead_of: dict[Task, str | None] = {}  # an answer task -> its message's lead
        self._interrupted: set[Task] = set()
        self._moved: set[Task] = set()

    @contextlib.contextmanager
    def leading(self, lead: str | None) -> Iterator[None]:
        """The current task handles a message led by ``lead`` (None: not filed under one)."""
        task = asyncio.current_task()
        assert task is not None
        if lead is not None:
            self._led.setdefault(lead, set()).add(task)
        try:
            yield
        finally:
            if lead is not None:
                self._led.get(lead, set()).discard(task)

    @contextlib.contextmanager
    def answering(self, agent: str, lead: str | None) -> Iterator[Task]:
        """The current task is ``agent``'s answer to a message led by ``lead``."""
        task = asyncio.current_task()
        assert task is not None
        self._answering.setdefault(agent, set()).add(task)
        self._lead_of[task] = lead
        try:
            yield task
        finally:
            self._answering.get(agent, set()).discard(task)
            self._lead_of.pop(task, None)
            self._interrupted.discard(task)
            self._moved.discard(task)

    def interrupted(self, task: Task) -> bool:
        return task in self._interrupted

    def moved(self, task: Task) -> bool:
        return task in self._moved

    def busy(self, name: str) -> bool:
        """True while ``name`` answers here or leads a message being handled here."""
        return bool(self._answering.get(name)) or bool(self._led.get(name))

    async def interrupt(self, agent: str) -> None:
        """End ``agent``'s answers: each finishes with what it wrote and a note."""
        tasks = self._answering.pop(agent, set())
        self._interrupted |= tasks
        await _cancel(tasks)

    async def abandon(self, name: str) -> None:
        """``name`` runs elsewhere now: cut off the messages it leads (they stay claimed) and
        mark its other answers moved (their answerer hands them over)."""
        led = self._led.pop(name, set())
        answers = self._answering.pop(name, set())
        moved = {task for task in answers if self._lead_of.get(task) != name}
        self._moved |= moved
        await _cancel(led | answers)


async def _cancel(tasks: set[Task]) -> None:
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
