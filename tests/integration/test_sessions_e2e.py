"""Sessions on a real Synapse with real Agno sessions: freshness, !compact, !status,
overflow recovery and transcript repair."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import time
from pathlib import Path

import pytest
from nio import RoomCreateResponse

from mindroom.cli.main import main
from mindroom.memory.search.session_index import SessionIndex, transcript_path
from tests.integration.test_flush_e2e import daily, is_extraction
from tests.support.exactly_once import wait_until_answered
from tests.support.harness import (
    BotHarness,
    Human,
    config_text,
    joined,
    unique,
    wait_until_ledger_idle,
)
from tests.support.scripted_model import (
    Reply,
    ScriptedModel,
    ToolCall,
    all_text,
    last_user_text,
    system_text,
    tool_pairing_refusal,
)
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

FLUSH_ON_DEMAND = {  # the flush runs when asked (a session ends), not on its own timers
    "auto_flush": {"enabled": True, "idle_seconds": 3600, "max_dirty_age_seconds": 3600},
}


def ledger_path(storage: Path) -> Path:
    return storage / "mindroom_data" / "ledger.db"


def book_rows(storage: Path) -> list[dict]:
    """The session book, read as another process would."""
    with contextlib.closing(sqlite3.connect(ledger_path(storage))) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM conversation_sessions ORDER BY key")]


async def settled_book(storage: Path) -> list[dict]:
    """The book once no claimed message is still being answered: a turn is counted after its
    answer is posted and before its message is finished."""
    await wait_until_ledger_idle(ledger_path(storage), time.monotonic() + 30)
    return book_rows(storage)


async def age_conversations(storage: Path, turns: int, seconds: float) -> None:
    """Once the book counts ``turns`` turns in all, pretend every conversation was last
    active ``seconds`` earlier than it was (in a thread: the bot shares this event loop)."""
    await wait_until(lambda: sum(r["turns"] for r in book_rows(storage)) == turns)

    def age() -> None:
        with contextlib.closing(sqlite3.connect(ledger_path(storage), timeout=30)) as db:
            db.execute(
                "UPDATE conversation_sessions SET last_active_at = last_active_at - ?", (seconds,)
            )
            db.commit()

    await asyncio.to_thread(age)


def indexed(storage: Path) -> list[str]:
    """Every search row's text in every session index under ``storage``."""
    texts = []
    for path in storage.rglob("transcripts.db"):
        index = SessionIndex(path)
        try:
            texts += [h.entry.text for h in index.search("locker code", 50)]
        finally:
            index.close()
    return texts


def chat_requests(model: ScriptedModel) -> list[dict]:
    return [r for r in model.requests if not is_extraction(r)]


async def open_dm(bot: BotHarness, human: Human, config: str) -> tuple[str, str]:
    await bot.start(config)
    assert bot.bot is not None
    general = bot.bot.agents["general"].user_id
    created = await human.client.room_create(invite=[general], is_direct=True)
    await human.wait_for(joined(general, created.room_id))
    return general, created.room_id


async def test_a_stale_dm_is_flushed_and_the_next_message_starts_a_fresh_session(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    def handler(request: dict) -> str:
        if is_extraction(request):
            return "- The user's name is Ada" if "Ada" in all_text(request) else "NO_REPLY"
        return f"echo: {last_user_text(request)}"

    model.set_handler(handler)
    config = config_text(
        model.base_url,
        {"general": {"rooms": []}},
        memory=FLUSH_ON_DEMAND,
        sessions={"daily_reset": None, "dm": {"idle_minutes": 60}},
    )
    _, room_id = await open_dm(bot, human, config)

    await human.wait_for_reply(room_id, await human.send(room_id, "my name is Ada"))
    await human.wait_for_reply(room_id, await human.send(room_id, "I like tea"))
    control = all_text(chat_requests(model)[-1])  # fresh: the history came along
    await age_conversations(bot.storage, 2, 2 * 3600)  # two idle hours later
    [first] = book_rows(bot.storage)
    assert not daily(bot.storage).exists()  # nothing flushed yet: the flush waits an hour

    await human.wait_for_reply(room_id, await human.send(room_id, "good morning"))
    fresh = chat_requests(model)[-1]
    await wait_until(lambda: daily(bot.storage).exists())  # the ended session, flushed
    # the turn is counted after its reply is posted: wait for it, never race it
    await wait_until(lambda: [r["turns"] for r in book_rows(bot.storage)] == [1])

    assert "my name is Ada" in control
    assert "my name is Ada" not in all_text(fresh)  # the stale history stayed behind
    assert "fresh session" in system_text(fresh)
    assert "idle for" in system_text(fresh)
    [row] = book_rows(bot.storage)
    assert row["previous"] == first["session_id"]
    assert row["session_id"] != first["session_id"]
    assert row["turns"] == 1
    assert row["reason"].startswith("idle for 2.0 hours")
    assert "The user's name is Ada" in daily(bot.storage).read_text()

    await human.wait_for_reply(room_id, await human.send(room_id, "and again"))
    again = chat_requests(model)[-1]
    assert "good morning" in all_text(again)  # the fresh session keeps its own history
    assert "fresh session" not in system_text(again)  # said once, at the start


async def test_a_thread_keeps_its_session_however_long_it_waits(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    room = unique("stale")
    config = config_text(
        model.base_url,
        {"general": {"rooms": [room]}},
        sessions={"daily_reset": "04:00", "idle_minutes": 1},
    )
    room_id = await bot.start_in_room(config, room, human)
    root = await human.send(room_id, "my name is Ada")
    await human.wait_for_reply(room_id, root)

    await age_conversations(bot.storage, 1, 3 * 86400)  # three days, past every boundary
    follow = await human.send(room_id, "what is my name?", thread_root=root)
    await human.wait_for_reply(room_id, follow)

    assert "my name is Ada" in all_text(model.requests[-1])
    [row] = await settled_book(bot.storage)
    assert (row["kind"], row["serial"], row["turns"]) == ("thread", 0, 2)


def notice_with(human: Human, room_id: str, sender: str, words: str):  # noqa: ANN201
    """A predicate for a notice from ``sender`` containing ``words``."""
    return lambda e: e.get("sender") == sender and words in e["content"].get("body", "")


async def test_compact_summarizes_now_with_instructions_and_status_shows_the_session(
    bot: BotHarness, human: Human, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    def handler(request: dict) -> str:
        if "Summarize the conversation" in system_text(request):
            return "SUMMARY: a trip to Lisbon in May"
        return f"echo: {last_user_text(request)}"

    model.set_handler(handler)
    room = unique("compact")
    config = config_text(
        model.base_url,
        {"general": {"rooms": [room]}},
        memory={
            "auto_flush": {"enabled": False},
            "embedder": "none",
            "compaction": {"keep_recent_messages": 2},
        },
    )
    room_id = await bot.start_in_room(config, room, human)
    assert bot.bot is not None
    router = bot.bot.router
    assert router is not None
    root = await human.send(room_id, "I am planning a trip to Lisbon in May")
    await human.wait_for_reply(room_id, root)
    for text in ("the flights are booked", "the hotel is near the river"):
        await human.wait_for_reply(room_id, await human.send(room_id, text, thread_root=root))

    await human.send(room_id, "!compact keep the city names", thread_root=root)
    await human.wait_for(notice_with(human, room_id, router.user_id, "compacted"))
    summary_request = [r for r in model.requests if "Summarize" in system_text(r)][-1]
    what_else = await human.send(room_id, "what else?", thread_root=root)
    await human.wait_for_reply(room_id, what_else)
    after = model.requests[-1]
    # the turn is counted once its answer is posted and its usage saved (the ledger's done)
    await wait_until_answered(bot.storage, [what_else])
    await human.send(room_id, "!status", thread_root=root)
    status = await human.wait_for(notice_with(human, room_id, router.user_id, "compactions"))

    assert "keep the city names" in system_text(summary_request)  # the instructions reached it
    assert "I am planning a trip to Lisbon" in all_text(summary_request)
    notice = next(
        e["content"]["body"]
        for e in human.messages(room_id)
        if e.get("sender") == router.user_id and "compacted" in e["content"].get("body", "")
    )
    assert "4 messages summarized, 2 recent ones kept" in notice
    assert "compaction 1 of this session" in notice
    assert "SUMMARY: a trip to Lisbon in May" in system_text(after)
    assert "I am planning a trip" not in all_text(after)  # the old messages themselves are gone
    body = status["content"]["body"]
    assert "compactions: 1" in body
    assert "4 turns" in body
    assert "tokens: " in body
    assert "tokens: 0 in" not in body
    assert "~c1" in body  # the Agno session the thread continues in

    capsys.readouterr()
    where = ["--config", str(bot.storage / "config.yaml"), "--storage", str(bot.storage)]
    assert await asyncio.to_thread(main, ["sessions", "list", "--json", *where]) == 0
    [listed] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert await asyncio.to_thread(main, ["sessions", "show", listed["key"], *where]) == 0
    shown = capsys.readouterr().out
    assert await asyncio.to_thread(main, ["sessions", "show", "no-such-thing", *where]) == 1

    assert listed["owner"] == "general"
    assert listed["compactions"] == 1
    assert listed["turns"] == 4
    assert listed["input_tokens"] > 0
    assert listed["agno_session"].endswith("~c1")
    assert "compactions: 1" in shown
    assert "4 turns" in shown


OVERFLOW = Reply(
    status=400,
    error_message="This model's maximum context length is 8192 tokens. However, your "
    "messages resulted in 9100 tokens. Please reduce the length of the messages.",
    error_type="invalid_request_error",
    retryable=False,
)


async def thread_of_three(bot: BotHarness, human: Human, model: ScriptedModel, first: str):  # noqa: ANN201
    room = unique("overflow")
    config = config_text(
        model.base_url,
        {"general": {"rooms": [room]}},
        memory={
            "auto_flush": {"enabled": False},
            "embedder": "none",
            "compaction": {"keep_recent_messages": 2},
        },
    )
    room_id = await bot.start_in_room(config, room, human)
    root = await human.send(room_id, first)
    await human.wait_for_reply(room_id, root)
    for text in ("the flights are booked", "the hotel is near the river"):
        await human.wait_for_reply(room_id, await human.send(room_id, text, thread_root=root))
    return room_id, root


async def test_a_context_overflow_is_compacted_and_the_turn_retried_in_the_same_session(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    room_id, root = await thread_of_three(bot, human, model, "I plan a trip to Lisbon")
    refused: list[dict] = []

    def handler(request: dict) -> str | Reply:
        if "Summarize the conversation" in system_text(request):
            return "SUMMARY: a trip to Lisbon, flights booked"
        if "the flights are booked" in all_text(request):  # the old history: too long
            refused.append(request)
            return OVERFLOW
        return f"echo: {last_user_text(request)}"

    model.set_handler(handler)
    asked = await human.send(room_id, "and the museums?", thread_root=root)
    reply = await human.wait_for_reply(room_id, asked)

    assert len(refused) == 1  # the positive control: the model did refuse the long prompt
    assert reply["content"]["body"] == "echo: and the museums?"
    retried = model.requests[-1]
    assert "SUMMARY: a trip to Lisbon" in system_text(retried)
    assert not [
        e
        for e in human.messages(room_id)
        if "⚠️" in e["content"].get("body", "") or "fresh session" in e["content"].get("body", "")
    ]
    [row] = await settled_book(bot.storage)
    assert row["serial"] == 0  # the same session, compacted once
    assert row["turns"] == 4


async def test_an_overflow_compaction_cannot_fix_rotates_to_a_fresh_session_with_a_notice(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    room_id, root = await thread_of_three(bot, human, model, "I plan a trip to Lisbon")
    blob = "HUGE-ATTACHMENT " * 50
    await human.wait_for_reply(room_id, await human.send(room_id, blob, thread_root=root))
    refused: list[dict] = []

    def handler(request: dict) -> str | Reply:
        if "Summarize the conversation" in system_text(request):
            return "SUMMARY: a trip to Lisbon"
        if "HUGE-ATTACHMENT" in all_text(request):  # kept verbatim after compaction too
            refused.append(request)
            return OVERFLOW
        return f"echo: {last_user_text(request)}"

    model.set_handler(handler)
    await human.send(room_id, "so, the museums?", thread_root=root)
    reply = await human.wait_for(lambda e: e["content"].get("body") == "echo: so, the museums?")
    notices = [
        e["content"]["body"]
        for e in human.messages(room_id)
        if "grew too long" in e["content"].get("body", "")
    ]

    assert len(refused) == 2  # the long prompt, then the compacted one: both refused
    assert reply["content"].get("msgtype") == "m.text"
    assert len(notices) == 1
    assert "HUGE-ATTACHMENT" not in all_text(model.requests[-1])
    [row] = await settled_book(bot.storage)
    assert row["serial"] == 1  # rotated once
    assert row["reason"] == "context overflow"
    assert row["turns"] == 1  # the retried turn, in the fresh session


def sessions_db(storage: Path) -> Path:
    return storage / "mindroom_data" / "sessions" / "general.db"


async def edit_last_run(storage: Path, session_id: str, edit) -> None:  # noqa: ANN001
    """Rewrite the stored JSON of ``session_id``'s last run (in a thread: the bot shares this
    event loop)."""

    def rewrite() -> None:
        with contextlib.closing(sqlite3.connect(sessions_db(storage), timeout=30)) as db:
            run_id, data = db.execute(
                "SELECT run_id, run_data FROM agent_sessions_runs WHERE session_id = ?"
                " ORDER BY run_index DESC LIMIT 1",
                (session_id,),
            ).fetchone()
            db.execute(
                "UPDATE agent_sessions_runs SET run_data = ? WHERE run_id = ?",
                (edit(data), run_id),
            )
            db.commit()

    await asyncio.to_thread(rewrite)


async def first_thread(
    bot: BotHarness, human: Human, model: ScriptedModel, text: str
) -> tuple[str, str, dict]:
    """A bot with one agent in a fresh room, and a thread ``text`` started and answered once:
    (the room, the thread root, the conversation's row in the session book)."""
    room = unique("thread")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    root = await human.send(room_id, text)
    await human.wait_for_reply(room_id, root)
    await wait_until(lambda: [r["turns"] for r in book_rows(bot.storage)] == [1])
    [row] = book_rows(bot.storage)
    return room_id, root, row


def like_openai(request: dict) -> str | Reply:
    refusal = tool_pairing_refusal(request)
    if refusal is not None:
        return Reply(status=400, error_message=refusal, retryable=False)
    return f"echo: {last_user_text(request)}"


async def test_a_tool_call_cut_off_by_a_crash_gets_an_error_result_before_the_next_run(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    model.set_handler(like_openai)
    room_id, root, row = await first_thread(bot, human, model, "look up my tea")

    def interrupted(data: str) -> str:  # the turn died after the model asked for a tool
        run = json.loads(data)
        run["messages"].append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_lost",
                        "type": "function",
                        "function": {"name": "search_memories", "arguments": "{}"},
                    }
                ],
            }
        )
        return json.dumps(run)

    await edit_last_run(bot.storage, row["session_id"], interrupted)
    follow = await human.send(room_id, "and coffee?", thread_root=root)
    reply = await human.wait_for_reply(room_id, follow)

    sent = model.requests[-1]["messages"]
    calls = [m for m in sent if m.get("tool_calls")]
    results = [m for m in sent if m.get("role") == "tool"]
    assert [c["tool_calls"][0]["id"] for c in calls] == ["call_lost"]  # the orphan was sent...
    assert [r["tool_call_id"] for r in results] == ["call_lost"]  # ...with a result
    assert "did not finish" in results[0]["content"]
    assert reply["content"]["body"] == "echo: and coffee?"  # OpenAI would have refused it


async def test_a_corrupt_session_is_rotated_with_a_notice_never_a_crash_loop(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    room_id, root, row = await first_thread(bot, human, model, "remember the garden")
    await edit_last_run(bot.storage, row["session_id"], lambda data: data[: len(data) // 2])

    await human.send(room_id, "what about the roses?", thread_root=root)
    await human.wait_for(lambda e: e["content"].get("body") == "echo: what about the roses?")
    await human.send(room_id, "and the tulips?", thread_root=root)
    await human.wait_for(lambda e: e["content"].get("body") == "echo: and the tulips?")

    notices = [
        e for e in human.messages(room_id) if "could not be read" in e["content"].get("body", "")
    ]
    assert len(notices) == 1  # once: the fresh session is readable
    [after] = await settled_book(bot.storage)
    assert after["serial"] == 1
    assert after["reason"] == "unreadable history"
    assert after["turns"] == 2
    assert "what about the roses?" in all_text(model.requests[-1])  # the new session's history


def last_tool_result(request: dict) -> str:
    return str(request["messages"][-1].get("content"))


def companion_plays(request: dict) -> str | Reply:
    """mind searches or reads its memory when asked to; otherwise it acknowledges."""
    if request["messages"][-1]["role"] == "tool":
        return "tool said: " + last_tool_result(request)
    last = last_user_text(request)
    if "search for the locker" in last:
        return Reply(tool_calls=[ToolCall("memory_search", {"query": "locker code"})])
    if "read sessions/" in last:
        path = "sessions/" + last.split("read sessions/", 1)[1].split()[0]
        return Reply(tool_calls=[ToolCall("memory_get", {"path": path})])
    return "noted"


async def _dm(person: Human, agent: str) -> str:
    created = await person.client.room_create(invite=[agent], is_direct=True)
    assert isinstance(created, RoomCreateResponse), created
    await person.wait_for(joined(agent, created.room_id))
    return created.room_id


async def test_past_conversations_are_searchable_only_in_their_persons_scope(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    alice, room = human, unique("past")
    model.set_handler(companion_plays)
    config = config_text(
        model.base_url,
        {"mind": {"role": "A private companion.", "rooms": [room], "private": {"per": "user"}}},
        memory={
            "auto_flush": {"enabled": False},
            "embedder": "none",
            "maintenance": {"enabled": False},
            "sources": ["memory", "sessions"],
            "session_index_messages": 2,
        },
    )
    bob = await Human.create(synapse)
    try:
        room_id = await bot.start_in_room(config, room, alice)
        await bob.join(room_id)
        assert bot.bot is not None
        mind = bot.bot.agents["mind"].user_id
        # private memory (past conversations included) is used in each person's own DM
        alices_dm, bobs_dm = [await _dm(person, mind) for person in (alice, bob)]
        said = await alice.send(alices_dm, "my locker code is LOCKER-4711")
        await alice.wait_for_reply(alices_dm, said)
        [row] = book_rows(bot.storage)
        path = transcript_path(row["session_id"])
        await wait_until(lambda: any("LOCKER-4711" in t for t in indexed(bot.storage)))

        asked = await bob.send(bobs_dm, "search for the locker code")
        bobs = await bob.wait_for(lambda e: e["content"].get("body", "").startswith("tool said"))
        bob_reads = await bob.send(bobs_dm, f"read {path}")
        bobs_read = await bob.wait_for(
            lambda e: (
                "tool said" in e["content"].get("body", "")
                and e is not bobs
                and "transcript" in e["content"]["body"]
            )
        )

        mine = await alice.send(alices_dm, "search for the locker code")
        alices = await alice.wait_for(
            lambda e: (
                "LOCKER-4711" in e["content"].get("body", "")
                and "tool said" in e["content"]["body"]
            )
        )
        recalled = next(r for r in reversed(model.requests) if "search for" in last_user_text(r))
        await alice.send(alices_dm, f"read {path}")
        alices_read = await alice.wait_for(
            lambda e: (
                "tool said" in e["content"].get("body", "") and "lines 1-" in e["content"]["body"]
            )
        )
    finally:
        await bob.close()

    assert asked
    assert bob_reads
    assert mine
    assert "LOCKER-4711" not in bobs["content"]["body"]  # bob's search: his scope only
    assert "no session transcript" in bobs_read["content"]["body"]
    assert "LOCKER-4711" in alices["content"]["body"]  # the control: alice's search finds it
    assert path in alices["content"]["body"]
    assert "Past conversations" in system_text(recalled)  # her recall shows it too
    assert "LOCKER-4711" in alices_read["content"]["body"]  # memory_get reads the transcript


async def test_status_and_compact_in_a_shared_thread_touch_only_the_senders_conversation(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    alice, room = human, unique("two")
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    config = config_text(
        model.base_url,
        {"mind": {"role": "A private companion.", "rooms": [room], "private": {"per": "user"}}},
    )
    bob = await Human.create(synapse)
    try:
        room_id = await bot.start_in_room(config, room, alice)
        await bob.join(room_id)
        assert bot.bot is not None
        assert bot.bot.router is not None
        router, mind = bot.bot.router.user_id, bot.bot.agents["mind"].user_id
        root = await alice.send(room_id, "@mind alice here", mention=[mind])
        await alice.wait_for_reply(room_id, root)
        said = await bob.send(room_id, "@mind bob here", mention=[mind], thread_root=root)
        await bob.wait_for_reply(room_id, said)
        await wait_until(lambda: len(book_rows(bot.storage)) == 2)

        await bob.send(room_id, "!status", thread_root=root)
        status = await bob.wait_for(notice_with(bob, room_id, router, "compactions"))
        await bob.send(room_id, "!compact", thread_root=root)
        compacted = await bob.wait_for(notice_with(bob, room_id, router, "nothing to compact"))
        await alice.send(room_id, "!new", thread_root=root)
        await alice.wait_for(notice_with(alice, room_id, router, "fresh conversation"))
        again = await alice.send(room_id, "@mind and now?", mention=[mind], thread_root=root)
        await alice.wait_for_reply(room_id, again)
        await wait_until_answered(bot.storage, [again])  # and its turn counted
        await alice.send(room_id, "!status", thread_root=root)
        renewed = await alice.wait_for(
            lambda e: (
                notice_with(alice, room_id, router, "!new")(e)
                and "compactions" in e["content"]["body"]
            )
        )
    finally:
        await bob.close()

    body = status["content"]["body"]
    assert bob.user_id in body
    assert alice.user_id not in body  # another person's private conversation is not shown
    assert body.count("session `") == 1
    assert compacted["content"]["body"].count("**mind**") == 1  # his conversation only
    assert "only recent messages" in compacted["content"]["body"]
    new_body = renewed["content"]["body"]
    assert alice.user_id in new_body
    assert "1 turns" in new_body  # the book started over with !new
    assert "compactions: 0" in new_body
