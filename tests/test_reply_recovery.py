"""A reply cut short never stays cut short: resumed after kill -9, finished when its agent goes."""

from __future__ import annotations

import json
import signal

import pytest

from mindroom.matrix.send import IN_PROGRESS_MARKER
from tests.harness import BotHarness, BotProcess, Event, Human, config_text, relation, unique
from tests.scripted_model import Reply, ScriptedModel
from tests.test_exactly_once import answers_to, restart, start_process, wait_until_answered
from tests.test_reload import write

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

SLOW = 0.5  # seconds between streamed chunks: the stream outlasts the test's reaction


def latest_body(human: Human, message: Event) -> str:
    """What ``message`` shows now: the body of its last edit, else its own."""
    edits = human.edits_of(message["event_id"])
    if edits:
        return edits[-1]["content"]["m.new_content"]["body"]
    return message["content"]["body"]


def is_partial_answer(human: Human, room_id: str, asked: str):  # noqa: ANN201
    return lambda e: (
        e.get("room_id") == room_id
        and e.get("type") == "m.room.message"
        and e.get("sender") != human.user_id
        and relation(e).get("m.in_reply_to", {}).get("event_id") == asked
        and relation(e).get("rel_type") != "m.replace"
        and e["content"]["body"].endswith(IN_PROGRESS_MARKER)
    )


async def test_a_reply_killed_while_streaming_is_finished_in_place_after_restart(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    rounds = 3
    room = unique("solo")
    await start_process(bot_process, config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await human.join(f"#{room}:localhost")

    for round_no in range(rounds):
        killed = " ".join(f"killed{round_no}w{i}" for i in range(40))
        final = " ".join(f"final{round_no}w{i}" for i in range(12))
        model.push(Reply(text=killed, chunks=40, chunk_delay=SLOW))
        model.push(Reply(text=final, chunks=6, chunk_delay=0.05))
        asked = await human.send(room_id, f"tell me a long story, round {round_no}")
        partial = await human.wait_for(is_partial_answer(human, room_id, asked), timeout=30)
        await bot_process.stop(signal.SIGKILL)  # mid-stream: the message shows "... ⋯"
        await restart(bot_process)

        await human.wait_for(
            lambda e, event_id=partial["event_id"], text=final: (
                relation(e).get("rel_type") == "m.replace"
                and relation(e).get("event_id") == event_id
                and e["content"]["m.new_content"]["body"] == text
            ),
            timeout=30,
        )
        await wait_until_answered(bot_process.storage, [asked])
        # a later message answered proves every event of this reply reached the human
        model.push("noted")
        sentinel = await human.send(room_id, f"thanks, round {round_no}")
        await human.wait_for_reply(room_id, sentinel, timeout=30)

        assert [e["event_id"] for e in answers_to(human, room_id, asked)] == [
            partial["event_id"]
        ]
        assert latest_body(human, partial) == final


async def test_an_agent_removed_mid_answer_leaves_a_finished_message(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("live")
    doc = json.loads(
        config_text(
            model.base_url,
            {"general": {"rooms": [room]}, "coder": {"role": "Writes code.", "rooms": [room]}},
        )
    )
    room_id = await bot.start_in_room(json.dumps(doc), room, human)
    coder = bot.bot.agents["coder"].user_id
    model.push(Reply(text=" ".join(f"word{i}" for i in range(60)), chunks=60, chunk_delay=SLOW))
    asked = await human.send(room_id, "@coder write a long poem", mention=[coder])
    partial = await human.wait_for(is_partial_answer(human, room_id, asked), timeout=30)
    assert partial["sender"] == coder

    del doc["agents"]["coder"]
    write(bot, doc)
    ended = await human.wait_for(
        lambda e: (
            relation(e).get("rel_type") == "m.replace"
            and relation(e).get("event_id") == partial["event_id"]
            and not e["content"]["m.new_content"]["body"].endswith(IN_PROGRESS_MARKER)
        ),
        timeout=30,
    )
    await human.wait_for(
        lambda e: (
            e.get("type") == "m.room.member"
            and e.get("state_key") == coder
            and e["content"].get("membership") == "leave"
        )
    )
    assert ended["content"]["m.new_content"]["body"].endswith("*(interrupted)*")
    assert "word0" in ended["content"]["m.new_content"]["body"]
    assert latest_body(human, partial) == ended["content"]["m.new_content"]["body"]
    await wait_until_answered(bot.storage, [asked], status="failed")  # not left to resume
