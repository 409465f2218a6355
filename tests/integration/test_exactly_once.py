"""Exactly-once replies across kill -9: what was owed is answered once after each restart, and an
answer republished with the same key posts nothing new (the downtime and catch-up cases are in
test_catch_up.py and test_catch_up_backlog.py)."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable, Callable

import pytest

from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.reply import ReplyWriter
from mindroom.errors import ClaimError
from mindroom.store import ledger_tables
from tests.integration.test_companions_teams import team_config, team_leader
from tests.support.exactly_once import answers_to, echo, restart, start_process, wait_until_answered
from tests.support.harness import (
    BotHarness,
    BotProcess,
    Human,
    config_text,
    unique,
)
from tests.support.scripted_model import Reply, ScriptedModel, last_user_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


async def test_kill_9_between_receipt_and_reply_answers_once_after_restart(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    await start_process(bot_process, config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await human.join(f"#{room}:localhost")
    model.push(Reply(text="this answer never arrives", delay=30))
    model.push("answered after the crash")

    asked = await human.send(room_id, "please answer exactly once")
    await asyncio.to_thread(model.wait_for_requests, 1, 20)  # received, claimed, not answered
    await bot_process.stop(signal.SIGKILL)
    await restart(bot_process)

    reply = await human.wait_for_reply(room_id, asked, timeout=30)
    model.push("and the next one")
    sentinel = await human.send(room_id, "answered after everything before it")
    await human.wait_for_reply(room_id, sentinel, timeout=30)
    await wait_until_answered(bot_process.storage, [asked, sentinel])
    assert reply["content"]["body"] == "answered after the crash"
    assert len(answers_to(human, room_id, asked)) == 1


async def test_republishing_an_answer_with_the_same_key_posts_nothing_new(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    await bot.start(config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await human.join(f"#{room}:localhost")
    account = bot.bot.agents["general"]
    root = await human.send(room_id, "root", msgtype="m.notice")  # the bot answers no notice
    # the account sends only to rooms its client has synced (as when it answers a message)
    await wait_until(lambda: room_id in account.client.rooms, "the account synced the room")

    first = ReplyWriter(account, room_id, thread_root=root, reply_to=root, agent="general")
    await first.finish("the one answer")
    again = ReplyWriter(account, room_id, thread_root=root, reply_to=root, agent="general")
    await again.finish("the one answer")
    await human.wait_for(lambda e: e.get("event_id") == first.event_ids[0])
    await bot.settle(human, room_id)  # positive control: the room's events were all seen

    assert again.event_ids == first.event_ids  # the homeserver deduplicated the retry
    bodies = [e["content"]["body"] for e in human.messages(room_id, account.user_id)]
    assert bodies.count("the one answer") == 1


@pytest.mark.timeout(300)  # many replies; slow on a loaded machine
async def test_messages_sent_while_killed_are_all_answered_exactly_once_every_round(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    rounds, per_round = 3, 3  # each round is a kill -9 and a restart, the same scenario again
    model.set_handler(echo)
    room = unique("solo")
    await start_process(bot_process, config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await human.join(f"#{room}:localhost")
    warmup = await human.send(room_id, "warm up")  # the bot has synced past the join
    await human.wait_for_reply(room_id, warmup, timeout=30)
    await wait_until_answered(bot_process.storage, [warmup])

    asked: list[str] = []
    for round_no in range(rounds):
        await bot_process.stop(signal.SIGKILL)
        batch = [await human.send(room_id, f"round {round_no} msg {i}") for i in range(per_round)]
        await restart(bot_process)
        for event_id in batch:
            await human.wait_for_reply(room_id, event_id, timeout=30)
        # killed only once recorded as answered: a reply killed before that is resumed (and
        # asks the model again, posting nothing new), which the count below would not allow
        await wait_until_answered(bot_process.storage, batch)
        asked += batch

    # a last message answered after everything above proves the bot handled the backlog
    sentinel = await human.send(room_id, "sentinel")
    await human.wait_for_reply(room_id, sentinel, timeout=30)
    answered = {event_id: len(answers_to(human, room_id, event_id)) for event_id in asked}
    assert answered == dict.fromkeys(asked, 1)
    questions = [last_user_text(request) for request in model.requests]
    assert len(questions) == len(asked) + 2, "\n".join(questions)  # + warm up and sentinel


async def test_a_message_heard_while_the_ledger_cannot_claim_it_is_answered_once_it_can(
    bot: BotHarness, human: Human, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ledger's database fails for a while (locked past the busy timeout, a PostgreSQL
    blip): a message heard then is not dropped. The sync that brought it fails and comes
    again from the same position, and once the ledger answers, the message is answered once."""
    room = unique("solo")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    real = ledger_tables.Handled.claim
    failed: list[str] = []
    outage = True

    async def failing(self: ledger_tables.Handled, event_id: str, *args: object, **kw: object):  # type: ignore[no-untyped-def]
        if outage:
            failed.append(event_id)
            raise ClaimError(f"cannot claim {event_id}: OperationalError")
        return await real(self, event_id, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(ledger_tables.Handled, "claim", failing)
    model.set_handler(echo)
    asked = await human.send(room_id, "asked while the ledger is out")
    # heard again after the first failure: the sync came again from the same position
    await wait_until(lambda: failed.count(asked) >= 2, "the claim tried again", timeout=30)
    outage = False
    reply = await human.wait_for_reply(room_id, asked, timeout=30)
    assert "asked while the ledger is out" in reply["content"]["body"]
    sentinel = await human.send(room_id, "and after it")
    await human.wait_for_reply(room_id, sentinel, timeout=30)
    await wait_until_answered(bot.storage, [asked, sentinel])
    assert len(answers_to(human, room_id, asked)) == 1


_MARK_READ = MatrixAccount.mark_read


async def dead_once_the_turn_is_stored(
    bot: BotHarness, monkeypatch: pytest.MonkeyPatch, send: Callable[[], Awaitable[str]]
) -> str:
    """``send()`` a message; the bot 'dies' once its turn is stored, at the read receipt that
    comes before the message is marked done (it hangs there, as a dead process would), and is
    stopped: the message's ID, left claimed."""
    dying = asyncio.Event()

    async def dies_here(self: MatrixAccount, *args: object) -> None:
        dying.set()
        await asyncio.Event().wait()  # the process is gone: nothing after this runs

    monkeypatch.setattr(MatrixAccount, "mark_read", dies_here)
    asked = await send()
    await wait_until(dying.is_set, "the turn stored, the message not marked done")
    await bot.stop()
    await wait_until_answered(bot.storage, [asked], status="claimed")
    return asked


async def restarted_and_answered(
    bot: BotHarness, monkeypatch: pytest.MonkeyPatch, asked: str
) -> None:
    """Start the bot again, alive this time, and wait until it marked ``asked`` done."""
    monkeypatch.setattr(MatrixAccount, "mark_read", _MARK_READ)
    await bot.start()
    await wait_until_answered(bot.storage, [asked])


async def test_a_turn_stored_before_a_crash_is_posted_again_not_run_again(
    bot: BotHarness, human: Human, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process stops after Agno stored the finished turn, before the message was marked
    done (its read receipt was on the way). The resumed message posts the stored answer: the
    model is not asked again, and the conversation holds the question once."""
    room = unique("solo")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    asked_model: list[str] = []

    def answers(request: dict) -> str:  # type: ignore[type-arg]
        asked_model.append(last_user_text(request))
        return f"answer #{len(asked_model)}"

    model.set_handler(answers)
    asked = await dead_once_the_turn_is_stored(
        bot, monkeypatch, lambda: human.send(room_id, "my cat is called Tiger")
    )
    await restarted_and_answered(bot, monkeypatch, asked)
    sentinel = await human.send(room_id, "and the next message")  # the control: asked anew
    await human.wait_for_reply(room_id, sentinel, timeout=30)
    await wait_until_answered(bot.storage, [sentinel])

    assert len(answers_to(human, room_id, asked)) == 1
    assert answers_to(human, room_id, asked)[0]["content"]["body"].startswith("answer #1")
    assert [text for text in asked_model if "Tiger" in text] == ["my cat is called Tiger"]
    assert len(asked_model) == 2  # the sentinel's turn asked the model: it was not stopped


async def test_a_team_turn_stored_before_a_crash_is_posted_again_not_run_again(
    bot: BotHarness, human: Human, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, for a team: the resumed message posts the team's stored answer; neither its
    leader nor a member is asked again."""
    room = unique("team")
    room_id = await bot.start_in_room(team_config(model, room, "coordinate"), room, human)
    model.set_handler(
        team_leader("delegate_task_to_member", {"member_id": "coder", "task": "write hello"})
    )
    crew = bot.bot.agents["crew"].user_id
    asked = await dead_once_the_turn_is_stored(
        bot,
        monkeypatch,
        lambda: human.send(room_id, "@crew please write hello world", mention=[crew]),
    )
    asked_before = len(model.requests)
    assert asked_before >= 3  # the control: the leader twice and a member were asked
    await restarted_and_answered(bot, monkeypatch, asked)
    await bot.settle(human, room_id)

    [answer] = answers_to(human, room_id, asked)
    assert answer["sender"] == crew
    assert answer["content"]["body"].startswith("Team answer:")
    assert len(model.requests) == asked_before
