"""The start-up's audience backfill is work on people's data like an answer: it writes the
readers of rooms (people's Matrix IDs) into a shared memory's audience book, which forget-me
takes a person out of. So it does not run beside an erasure (mindroom.people.erasure): one that
read the rooms before the erasure would write the person back after it.

Real Synapse, a real bot and its real shared memory."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from mindroom.app.bot import Bot
from mindroom.config import parse_config
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.audience import BACKFILL_MARK
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.registry import MemoryRegistry
from mindroom.people.erasure import ErasureGate
from tests.support.harness import BotHarness, config_text, unique
from tests.support.scripted_model import ScriptedModel
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

ALICE_DM = "general:!dm:localhost"


def rooms(_bot: Bot, run: str, _requester: str | None) -> RoomAudience | None:
    """The room of the old entry's conversation, as the bot would see it."""
    if run == ALICE_DM:
        return RoomAudience.private_to("@alice:localhost", "!dm:localhost")
    return None


async def test_the_audience_backfill_waits_while_a_forget_me_runs(
    bot: BotHarness, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = config_text(model.base_url, {"general": {"rooms": [unique("backfill")]}})
    bot.write_config(text)
    before = MemoryRegistry(parse_config(text, "config.yaml"), bot.storage)
    try:  # an entry written from a conversation before audiences were recorded
        memory = before.for_agent("general")
        assert isinstance(memory, FileMemory)
        old = memory.add_sync("Alice earns 91k", actor="flush", run=ALICE_DM)
    finally:
        before.close()
    mark = memory.scope.state_dir / BACKFILL_MARK

    await bot.start()  # its backfill does not know that conversation's room: left for later
    await wait_until(mark.exists, "the start's backfill done")
    assert bot.bot is not None
    running = bot.bot
    memory = running.memories.for_agent("general")
    assert isinstance(memory, FileMemory)
    monkeypatch.setattr(Bot, "session_audience", rooms)  # now the room is known

    def audience() -> str | None:
        return next(e for e in memory.list_sync(100) if e.id == old.id).fields.audience

    assert audience() is None
    asked: list[asyncio.Task[Any] | None] = []  # the tasks that asked for the gate
    working = ErasureGate.working

    def asking(self: ErasureGate) -> contextlib.AbstractAsyncContextManager[None]:
        asked.append(asyncio.current_task())
        return working(self)

    monkeypatch.setattr(ErasureGate, "working", asking)
    gate = running.runtime.gate
    async with gate.erasing():  # a forget-me in progress
        backfilling = asyncio.create_task(running._backfill_audiences())
        await wait_until(lambda: backfilling in asked, "the backfill asked for the gate")
        assert gate.held_back >= 1  # and waits there
        assert not backfilling.done()
        assert audience() is None  # nothing written beside the erasure
    await backfilling
    assert audience() == "dm:@alice:localhost"  # the control: it ran once the erasure was done
