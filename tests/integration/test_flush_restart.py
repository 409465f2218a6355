"""Killed during a flush's extraction, the bot flushes the session once after its restart."""

from __future__ import annotations

import signal

import pytest

from mindroom.memory.files.markdown import parse_entries
from tests.integration.test_flush_e2e import FLUSH, daily, flush_rows, is_extraction, sister_facts
from tests.support.harness import (
    BotProcess,
    Human,
    config_text,
    relation,
    unique,
)
from tests.support.scripted_model import Reply, ScriptedModel
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


async def test_killed_during_extraction_the_session_is_flushed_once_after_restart(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    bot_process.storage.mkdir(parents=True)
    (bot_process.storage / "config.yaml").write_text(
        config_text(model.base_url, {"general": {"rooms": [room]}}, memory=FLUSH)
    )
    calls = {"extractions": 0}

    def slow_first_extraction(request: dict) -> Reply | str:
        if is_extraction(request):
            calls["extractions"] += 1
            if calls["extractions"] == 1:
                return Reply(text="- The user's sister is called Maya", delay=30)
        return sister_facts(request)

    model.set_handler(slow_first_extraction)
    bot_process.mark_log()
    bot_process.start()
    await bot_process.wait_running()
    room_id = await human.join(f"#{room}:localhost")
    told = await human.send(room_id, "my sister is called Maya")
    await human.wait_for_reply(room_id, told)
    await wait_until(lambda: calls["extractions"] == 1)
    killed = bot_process.proc.pid if bot_process.proc else 0
    await bot_process.stop(signal.SIGKILL)
    rows = flush_rows(bot_process.storage)
    # the crash left the session claimed by the dead process
    assert [(r["in_flight"], r["claim_pid"]) for r in rows] == [(1, killed)]

    bot_process.mark_log()
    bot_process.start()
    await bot_process.wait_running()
    await wait_until(lambda: daily(bot_process.storage).exists(), timeout=30)
    # the flush is over once its claim is released and the session is clean
    await wait_until(
        lambda: [(r["dirty"], r["in_flight"]) for r in flush_rows(bot_process.storage)] == [(0, 0)]
    )
    await bot_process.stop(signal.SIGTERM)

    entries = parse_entries(daily(bot_process.storage).read_text(), "memory/x.md")
    assert [e.text for e in entries] == ["The user's sister is called Maya"]
    assert calls["extractions"] == 2
    posted = [
        e
        for e in human.messages(room_id)
        if e["sender"] != human.user_id and relation(e).get("rel_type") != "m.replace"
    ]
    assert len(posted) == 1
