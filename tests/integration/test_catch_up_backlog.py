"""A backlog larger than one sync, sent while the bot was down, is fetched and answered in full."""

from __future__ import annotations

import asyncio
import signal

import pytest

from tests.support.exactly_once import answers_to, restart, start_process
from tests.support.harness import (
    BotProcess,
    Human,
    config_text,
    settle,
    unique,
)
from tests.support.scripted_model import ScriptedModel

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


@pytest.mark.timeout(300)  # a bot process started twice; slow on a loaded machine
async def test_a_backlog_larger_than_one_sync_is_answered_in_full(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    await start_process(bot_process, config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await human.join(f"#{room}:localhost")
    await bot_process.stop(signal.SIGTERM)

    # more than the 50 events one sync returns (the client's timeline limit): the oldest are
    # left out of the sync and must be fetched, not skipped. The bulk are notices, which the bot
    # never answers, so the messages left out are the first few; a few more come last, in the
    # sync's own timeline (the notices' order among themselves does not matter).
    first = [await human.send(room_id, f"backlog {i}") for i in range(5)]
    await asyncio.gather(*(human.send(room_id, f"note {i}", msgtype="m.notice") for i in range(50)))
    last = [await human.send(room_id, f"backlog {i}") for i in range(5, 8)]
    sent = first + last
    await restart(bot_process)
    for event_id in sent:
        await human.wait_for_reply(room_id, event_id, timeout=90)
    await settle(human, room_id, bot_process.storage)

    assert all(len(answers_to(human, room_id, event_id)) == 1 for event_id in sent)
    assert "filling a gap" in (bot_process.storage / "bot.log").read_text()
