"""A reply cut short never stays cut short: resumed after kill -9, finished when its agent goes."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.reply import INTERRUPTED_NOTE, ReplyWriter, StreamPacing
from mindroom.adapters.matrix.send import IN_PROGRESS_MARKER
from mindroom.store.ledger import Ledger
from tests.integration.test_conversation import two_agents
from tests.integration.test_reload import write
from tests.support.exactly_once import (
    answers_to,
    restart,
    start_process,
    wait_until_answered,
)
from tests.support.harness import (
    BotHarness,
    BotProcess,
    Event,
    Human,
    config_text,
    relation,
    unique,
)
from tests.support.scripted_model import Reply, ScriptedModel
from tests.support.waiting import wait_until

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


@pytest.mark.timeout(300)  # many replies; slow on a loaded machine
async def test_a_reply_killed_while_streaming_is_finished_in_place_after_restart(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    rounds = 2  # the second round is a kill -9 during a reply after a recovered one
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

        assert [e["event_id"] for e in answers_to(human, room_id, asked)] == [partial["event_id"]]
        assert latest_body(human, partial) == final


ROUTER_MODEL = "router-model"


CODER, GENERAL = "@mindroom_coder:localhost", "@mindroom_general:localhost"
CUT = Reply(text=" ".join(f"cut{i}" for i in range(40)), chunks=40, chunk_delay=SLOW)


async def two_agents_and_a_router(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> str:
    """The bot as a process with general and coder in a room the person joined, and a router
    model of its own (it picks ``coder`` until told otherwise): the room's ID."""
    room = unique("lobby")
    doc = json.loads(two_agents(model, room))
    doc["models"]["router"] = {**doc["models"]["default"], "id": ROUTER_MODEL}
    doc["router"] = {"model": "router"}
    model.set_handler(lambda _body: '{"agent": "coder"}', model=ROUTER_MODEL)
    await start_process(bot_process, json.dumps(doc))
    return await human.join(f"#{room}:localhost")


async def killed_then_finished_by_coder(
    bot_process: BotProcess, human: Human, model: ScriptedModel, room_id: str, asked: str
) -> None:
    """Coder streams its answer to ``asked``; the process is killed mid-stream and restarted,
    with the router now picking general if asked. Coder's message is finished, nobody else
    answers, and the router is asked no more than it was before the kill."""
    partial = await human.wait_for(is_partial_answer(human, room_id, asked), timeout=30)
    assert partial["sender"] == CODER
    await bot_process.stop(signal.SIGKILL)  # mid-stream: the message shows "... ⋯"

    final = "the whole answer, finished"
    model.push(final, model="scripted")
    routed = len([r for r in model.requests if r["model"] == ROUTER_MODEL])
    model.set_handler(lambda _body: '{"agent": "general"}', model=ROUTER_MODEL)  # if asked
    await restart(bot_process)
    await wait_until_answered(bot_process.storage, [asked], timeout=60)
    # the control: answered, so everything posted about the message has reached the human
    await bot_process.settle(human, room_id)

    assert [e["event_id"] for e in answers_to(human, room_id, asked)] == [partial["event_id"]]
    assert latest_body(human, partial) == final
    assert human.messages(room_id, sender=GENERAL) == []
    assert len([r for r in model.requests if r["model"] == ROUTER_MODEL]) == routed


@pytest.mark.timeout(300)
async def test_a_thread_follow_up_killed_mid_answer_is_finished_by_the_threads_agent(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    """A restarted process knows nothing of a thread yet: the resumed follow-up still goes to
    the thread's agent, as it did live, and never to the router, who would pick another."""
    room_id = await two_agents_and_a_router(bot_process, human, model)
    model.push("coder here", model="scripted")
    root = await human.send(room_id, "@coder let's talk", mention=[CODER])
    assert (await human.wait_for_reply(room_id, root, timeout=30))["sender"] == CODER
    model.push(CUT, model="scripted")
    follow = await human.send(room_id, "and then?", thread_root=root)  # no mention: coder's
    await killed_then_finished_by_coder(bot_process, human, model, room_id, follow)
    assert [r for r in model.requests if r["model"] == ROUTER_MODEL] == []


@pytest.mark.timeout(300)
async def test_a_message_the_router_gave_an_agent_is_finished_by_it_after_a_kill(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    """The router picked coder; the process died while coder streamed. After the restart the
    router is not asked again (it might pick general): coder finishes its own answer."""
    room_id = await two_agents_and_a_router(bot_process, human, model)
    model.push(CUT, model="scripted")
    asked = await human.send(room_id, "who can write me a sorting function?")  # nobody named
    await killed_then_finished_by_coder(bot_process, human, model, room_id, asked)
    # the control: the router was asked, live (and only then)
    assert len([r for r in model.requests if r["model"] == ROUTER_MODEL]) == 1


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
    assert ended["content"]["m.new_content"]["body"].endswith(INTERRUPTED_NOTE)
    assert "word0" in ended["content"]["m.new_content"]["body"]
    assert latest_body(human, partial) == ended["content"]["m.new_content"]["body"]
    await wait_until_answered(bot.storage, [asked], status="failed")  # not left to resume


class CrashAfterSend(Exception):
    """Stands for the process dying between a post and the record of its event ID."""


class DiesBeforeRecording:
    """The real ledger, except that the process 'dies' before a posted part (from part
    ``from_part`` on) is recorded."""

    def __init__(self, ledger: Ledger, from_part: int = 0) -> None:
        self.ledger, self.from_part = ledger, from_part

    async def reply_parts(self, trigger_id: str, agent: str) -> dict[int, str | None]:
        return await self.ledger.reply_parts(trigger_id, agent)

    async def begin_reply_part(self, trigger_id: str, agent: str, part: int) -> None:
        await self.ledger.begin_reply_part(trigger_id, agent, part)

    async def record_reply_part(
        self, trigger_id: str, agent: str, part: int, event_id: str
    ) -> None:
        if part >= self.from_part:
            raise CrashAfterSend(event_id)
        await self.ledger.record_reply_part(trigger_id, agent, part, event_id)


async def a_notice_in_a_solo_room(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> tuple[str, MatrixAccount, str]:
    """``general`` alone in a room with ``human``, whose notice (the bot answers none) a test's
    own reply writers answer: (the room, general's account, the notice)."""
    room = unique("solo")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    account = bot.bot.agents["general"]
    asked = await human.send(room_id, "root", msgtype="m.notice")
    # the account sends only to rooms its client has synced (as when it answers a message)
    await wait_until(lambda: room_id in account.client.rooms, "the account synced the room")
    return room_id, account, asked


def answering(
    account: MatrixAccount, room_id: str, asked: str, posted: object, **options: Any
) -> ReplyWriter:
    """general's reply writer for the answer to ``asked`` in its thread."""
    return ReplyWriter(
        account,
        room_id,
        thread_root=asked,
        reply_to=asked,
        agent="general",
        posted=posted,  # type: ignore[arg-type]
        **options,
    )


async def resume_with_nothing_recorded(
    account: MatrixAccount, room_id: str, asked: str, ledger: Ledger
) -> ReplyWriter:
    """The answer to ``asked`` resumed where the ledger has part 0 begun, with no message ID."""
    assert await ledger.reply_parts(asked, "general") == {0: None}
    resumed = ReplyWriter(
        account, room_id, thread_root=asked, reply_to=asked, agent="general", posted=ledger
    )
    await resumed.finish("the whole answer, resumed")
    return resumed


async def test_a_post_whose_event_id_was_never_recorded_is_found_and_edited_not_repeated(
    bot: BotHarness, human: Human, model: ScriptedModel, tmp_path: Path
) -> None:
    room_id, account, asked = await a_notice_in_a_solo_room(bot, human, model)
    ledger = await Ledger.open(tmp_path / "ledger.db")
    now = [0.0]  # a clock the test moves: no waiting for the first send
    try:
        first = answering(
            account,
            room_id,
            asked,
            DiesBeforeRecording(ledger),
            pacing=StreamPacing(first_send_s=1.0),
            clock=lambda: now[0],
        )
        await first.update("the first words")  # starts the clock, posts nothing yet
        now[0] += 1.0  # past the first send's wait: the next update posts
        with pytest.raises(CrashAfterSend):
            await first.update("the first words of a long answer")
        resumed = await resume_with_nothing_recorded(account, room_id, asked, ledger)
    finally:
        await ledger.close()

    message = await human.wait_for(lambda e: e.get("event_id") == resumed.event_ids[0])
    await human.wait_for(
        lambda e: (
            relation(e).get("event_id") == message["event_id"]
            and e["content"].get("m.new_content", {}).get("body") == "the whole answer, resumed"
        )
    )
    assert message["content"]["body"].endswith(IN_PROGRESS_MARKER)  # the first run's post
    assert [e["event_id"] for e in answers_to(human, room_id, asked)] == [message["event_id"]]
    assert latest_body(human, message) == "the whole answer, resumed"


async def test_a_dead_runs_unrecorded_part_is_removed_when_the_resumed_answer_is_shorter(
    bot: BotHarness, human: Human, model: ScriptedModel, tmp_path: Path
) -> None:
    """A long answer is posted in parts; the process dies once part 1 is posted, before its
    event ID is recorded. The resumed answer needs one part: part 1 of the dead run is found
    by its transaction and redacted, not left in the room."""
    room_id, account, asked = await a_notice_in_a_solo_room(bot, human, model)
    ledger = await Ledger.open(tmp_path / "ledger.db")
    try:
        first = answering(
            account, room_id, asked, DiesBeforeRecording(ledger, from_part=1), limit=60
        )
        long = "The first paragraph of a long answer, in one part.\n\nThe dead run's second part."
        with pytest.raises(CrashAfterSend) as crashed:
            await first.finish(long)
        assert await ledger.reply_parts(asked, "general") == {0: first.event_ids[0], 1: None}
        resumed = answering(account, room_id, asked, ledger, limit=60)
        await resumed.finish("A short resumed answer.")
    finally:
        await ledger.close()

    orphan = str(crashed.value)  # the event part 1 was posted as
    await human.wait_for(
        lambda e: (
            e.get("type") == "m.room.redaction"
            and (e.get("redacts") or e["content"].get("redacts")) == orphan
        )
    )
    assert resumed.event_ids == [first.event_ids[0]]  # the control: part 0 edited in place
    part_0 = await human.wait_for(lambda e: e.get("event_id") == first.event_ids[0])
    assert latest_body(human, part_0) == "A short resumed answer."


async def test_an_answer_resumed_after_a_crash_before_its_first_post_is_posted_once_unedited(
    bot: BotHarness, human: Human, model: ScriptedModel, tmp_path: Path
) -> None:
    """Part 0 is begun in the ledger as the turn starts: a crash during the model's call leaves
    it begun with nothing posted. The resumed answer is then a new message, shown as it is,
    not posted and edited to the same text (the test above is the control: an earlier run's
    post is edited)."""
    room_id, account, asked = await a_notice_in_a_solo_room(bot, human, model)
    ledger = await Ledger.open(tmp_path / "ledger.db")
    try:
        first = ReplyWriter(
            account, room_id, thread_root=asked, reply_to=asked, agent="general", posted=ledger
        )
        async with first.interruptible():  # the turn starts; the crash comes before any text
            first.begin()
        resumed = await resume_with_nothing_recorded(account, room_id, asked, ledger)
    finally:
        await ledger.close()

    message = await human.wait_for(lambda e: e.get("event_id") == resumed.event_ids[0])
    await bot.settle(human, room_id)  # anything else the account sent has been seen by now
    assert message["content"]["body"] == "the whole answer, resumed"
    assert human.edits_of(message["event_id"]) == []
    assert [e["event_id"] for e in answers_to(human, room_id, asked)] == [message["event_id"]]


async def test_a_reply_cut_short_by_shutdown_says_so_and_is_finished_by_the_next_start(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    model.push(Reply(text=" ".join(f"word{i}" for i in range(80)), chunks=80, chunk_delay=SLOW))
    model.push("the answer after the restart")
    asked = await human.send(room_id, "a long answer, please")
    partial = await human.wait_for(is_partial_answer(human, room_id, asked), timeout=30)

    await bot.stop()  # outlasts the shutdown grace: the answer is cancelled
    interrupted = await human.wait_for(
        lambda e: (
            relation(e).get("event_id") == partial["event_id"]
            and e["content"].get("m.new_content", {}).get("body", "").endswith(INTERRUPTED_NOTE)
        )
    )
    await wait_until_answered(bot.storage, [asked], status="claimed")  # left to resume

    await bot.start()
    await human.wait_for(
        lambda e: (
            relation(e).get("event_id") == partial["event_id"]
            and e["content"].get("m.new_content", {}).get("body") == "the answer after the restart"
        )
    )
    await wait_until_answered(bot.storage, [asked])
    assert "word0" in interrupted["content"]["m.new_content"]["body"]
    assert [e["event_id"] for e in answers_to(human, room_id, asked)] == [partial["event_id"]]
    assert latest_body(human, partial) == "the answer after the restart"
