"""A turn killed with kill -9 in the middle of its memory writes is resumed without duplicates."""

from __future__ import annotations

import asyncio
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import BotProcess, Human, config_text, unique
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

FACTS = [f"Project fact number {n}: the deadline for part {n} is day {n}" for n in range(60)]
FACT_ID = re.compile(r"<!-- (m-[0-9a-f]{8})(?: [^<>]*)? -->")


def memory_file(bot_process: BotProcess) -> Path:
    return bot_process.storage / "agents" / "general" / "workspace" / "MEMORY.md"


def facts_in(bot_process: BotProcess) -> list[str]:
    path = memory_file(bot_process)
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return [line for line in text.splitlines() if FACT_ID.search(line)]


async def restart(bot_process: BotProcess) -> None:
    bot_process.mark_log()
    bot_process.start()
    await bot_process.wait_running()


@pytest.mark.timeout(240)
async def test_a_turn_killed_during_60_add_memory_calls_stores_each_fact_once_after_resume(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    answer = {"delay": 60.0}  # the first run never gets its final answer: it is killed

    def script(body: dict[str, Any]) -> Reply:
        if body["messages"][-1].get("role") == "tool":  # the tools ran: answer
            return Reply(text="all noted", delay=answer["delay"])
        return Reply(tool_calls=[ToolCall("add_memory", {"text": fact}) for fact in FACTS])

    model.set_handler(script)
    room = unique("facts")
    bot_process.storage.mkdir(parents=True, exist_ok=True)
    (bot_process.storage / "config.yaml").write_text(
        config_text(model.base_url, {"general": {"rooms": [room]}})
    )
    await restart(bot_process)
    room_id = await human.join(f"#{room}:localhost")

    asked = await human.send(room_id, "please remember these sixty facts")
    deadline = time.monotonic() + 60
    while len(facts_in(bot_process)) < 20:  # the turn is writing its memories
        assert time.monotonic() < deadline, "the tools never ran"
        await asyncio.sleep(0.01)
    await bot_process.stop(signal.SIGKILL)
    written_before_the_kill = len(facts_in(bot_process))
    answer["delay"] = 0.0
    await restart(bot_process)

    reply = await human.wait_for_reply(room_id, asked, timeout=90)

    assert reply["content"]["body"] == "all noted"
    lines = facts_in(bot_process)
    texts = [FACT_ID.sub("", line).removeprefix("- ").strip() for line in lines]
    print(f"facts before the kill: {written_before_the_kill}; after the resume: {len(lines)}")
    assert written_before_the_kill >= 20
    assert sorted(texts) == sorted(FACTS)  # each of the 60 once: no duplicate, none missing
    assert sorted(p.name for p in memory_file(bot_process).parent.iterdir()) == ["MEMORY.md"]
