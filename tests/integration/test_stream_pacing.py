"""Streamed answers are paced, so clients that show each edit as a message stay readable: a
short answer is one message with no edits; a long one is a message after about a second, then
at most one edit per interval, the final text last. Real Synapse, the scripted model."""

from __future__ import annotations

import pytest

from mindroom.adapters.matrix.reply import ReplyWriter, StreamPacing
from mindroom.adapters.matrix.send import IN_PROGRESS_MARKER
from tests.support.exactly_once import answers_to
from tests.support.harness import BotHarness, Event, Human, config_text, relation, unique
from tests.support.scripted_model import Reply, ScriptedModel
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

INTERVAL_S = StreamPacing().edit_interval_s  # the default pace is what these tests run


def edit_events(human: Human, room_id: str) -> list[Event]:
    """Every ``m.replace`` event seen in ``room_id``."""
    return [e for e in human.messages(room_id) if relation(e).get("rel_type") == "m.replace"]


async def test_a_short_streamed_answer_is_one_message_and_no_edits(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("pace")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    short = "A short answer, streamed in three quick chunks."
    model.push(Reply(text=short, chunks=3, chunk_delay=0.05))

    asked = await human.send(room_id, "a quick question")
    reply = await human.wait_for_reply(room_id, asked)
    await bot.settle(human, room_id)  # an edit would have come by now

    assert [e["event_id"] for e in answers_to(human, room_id, asked)] == [reply["event_id"]]
    assert reply["content"]["body"] == short  # posted once, finished: no in-progress marker
    assert edit_events(human, room_id) == []
    # the positive control is the next test: the same path, streaming longer, does edit


async def test_a_long_slow_stream_is_edited_no_closer_than_the_interval(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("pace")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    full = " ".join(f"word{i}" for i in range(48))
    model.push(Reply(text=full, chunks=24, chunk_delay=0.25))  # about 6 s of streaming

    asked = await human.send(room_id, "tell me a long story")
    reply = await human.wait_for_reply(room_id, asked)
    await bot.settle(human, room_id)

    assert [e["event_id"] for e in answers_to(human, room_id, asked)] == [reply["event_id"]]
    edits = edit_events(human, room_id)
    assert all(relation(e)["event_id"] == reply["event_id"] for e in edits)
    assert reply["first_content"]["body"].endswith(IN_PROGRESS_MARKER)
    assert len(reply["first_content"]["body"]) < len(full)
    assert len(edits) >= 2  # it did stream: at least one edit in progress, then the final
    assert edits[-1]["content"]["m.new_content"]["body"] == full
    assert all(
        e["content"]["m.new_content"]["body"].endswith(IN_PROGRESS_MARKER) for e in edits[:-1]
    )
    # each send waits the interval after the previous one completed (server time, ms)
    sent_at = [reply["origin_server_ts"]] + [e["origin_server_ts"] for e in edits[:-1]]
    gaps = [b - a for a, b in zip(sent_at, sent_at[1:], strict=False)]
    assert all(gap >= INTERVAL_S * 1000 for gap in gaps), gaps
    duration_s = (edits[-1]["origin_server_ts"] - reply["origin_server_ts"]) / 1000
    assert len(edits) <= duration_s / INTERVAL_S + 1


async def test_a_writer_on_a_fake_clock_posts_and_edits_exactly_as_paced(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("pace")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    asked = await human.send(room_id, "root", msgtype="m.notice")  # the bot answers no notice
    account = bot.bot.agents["general"]
    # the account sends only to rooms its client has synced (as when it answers a message)
    await wait_until(lambda: room_id in account.client.rooms, "the account synced the room")
    now = [0.0]
    writer = ReplyWriter(
        account,
        room_id,
        thread_root=asked,
        reply_to=asked,
        agent="general",
        pacing=StreamPacing(first_send_s=1.0, edit_interval_s=1.5),
        clock=lambda: now[0],
    )
    words = [f"w{i}" for i in range(10)]
    for i in range(len(words)):  # a chunk every 0.4 s of the fake clock
        now[0] = i * 0.4
        await writer.update(" ".join(words[: i + 1]))
    await writer.finish(" ".join(words))
    await human.fence(room_id)

    sent = [
        e["content"].get("m.new_content", e["content"])["body"]
        for e in human.messages(room_id)
        if e["sender"] == bot.bot.agents["general"].user_id
    ]
    assert sent == [
        "w0 w1 w2 w3" + IN_PROGRESS_MARKER,  # 1.2 s: the first chunk past one second
        "w0 w1 w2 w3 w4 w5 w6 w7" + IN_PROGRESS_MARKER,  # 2.8 s: the first past 1.2 + 1.5
        "w0 w1 w2 w3 w4 w5 w6 w7 w8 w9",  # the final text, at once
    ]
    assert [e["event_id"] for e in answers_to(human, room_id, asked)] == writer.event_ids
