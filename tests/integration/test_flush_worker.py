"""The flush worker on real Agno sessions, real SQLite and real memory files (no Matrix).

Conversations are produced with ``AgentRuntime.run_turn`` against the scripted model; the
worker is driven by hand (``turn_finished``, ``prompted``, ``cycle``) instead of its loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest
from mindroom.config import parse_config
from mindroom.config.schema import Config
from mindroom.memory.files.markdown import parse_entries
from mindroom.memory.files.store import today
from mindroom.memory.flush import loop as flush_loop
from mindroom.memory.flush.loop import FlushWorker
from mindroom.memory.flush.state import FlushEntry
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import config_text
from tests.support.scripted_model import (
    Reply,
    ReplyLike,
    ScriptedModel,
    last_user_text,
    system_text,
)
from tests.support.waiting import wait_until

pytestmark = pytest.mark.asyncio

EXTRACTION_MARK = "You maintain the long-term memory"
USER = "@u:localhost"
SISTER = "The user's sister is called Maya"
BROTHER = "The user's brother is called Tom"


def is_extraction(request: dict[str, Any]) -> bool:
    return EXTRACTION_MARK in system_text(request)


def conversation(request: dict[str, Any]) -> str:
    """The conversation part of an extraction prompt (not what is already remembered)."""
    prompt = last_user_text(request)
    return prompt.split("Conversation:\n", 1)[1].split("\n\nDurable facts", 1)[0]


def family_facts(request: dict[str, Any]) -> str:
    """Chat: a short answer. Extraction: the sister/brother facts the conversation states."""
    if not is_extraction(request):
        return "Nice to hear!"
    said = conversation(request)
    facts = [
        f"- {fact}" for word, fact in (("sister", SISTER), ("brother", BROTHER)) if word in said
    ]
    return "\n".join(facts) or "NO_REPLY"


@dataclass
class World:
    """A config, its memories, the Agno runtime and a flush worker, all under ``tmp_path``."""

    model: ScriptedModel
    tmp_path: Path
    config: Config
    registry: MemoryRegistry
    runtime: AgentRuntime
    worker: FlushWorker
    workers: list[FlushWorker]

    @property
    def data_dir(self) -> Path:
        return self.tmp_path / "mindroom_data"

    @property
    def daily(self) -> Path:
        return self.tmp_path / "agents" / "general" / "workspace" / "memory" / f"{today()}.md"

    def facts(self) -> list[str]:
        """Texts of the entries in today's daily file, in order."""
        if not self.daily.exists():
            return []
        return [e.text for e in parse_entries(self.daily.read_text(), "memory/x.md")]

    async def entry(self, session: str = "s1", worker: FlushWorker | None = None) -> FlushEntry:
        found = await (worker or self.worker).entry(FlushEntry("general", session).key)
        assert found is not None, f"no flush entry for {session}"
        return found

    def force(self, session: str = "s1", **columns: object) -> None:
        """Set columns of a session's row in the ledger, as another process could have."""
        sets = ", ".join(f"{name} = ?" for name in columns)
        with contextlib.closing(sqlite3.connect(self.data_dir / "ledger.db")) as db:
            db.execute(
                f"UPDATE flush_sessions SET {sets} WHERE key = ?",
                (*columns.values(), FlushEntry("general", session).key),
            )
            db.commit()

    def extractions(self) -> list[dict[str, Any]]:
        return [r for r in self.model.requests if is_extraction(r)]

    def new_worker(self) -> FlushWorker:
        worker = FlushWorker(self.config, self.runtime, self.registry, self.data_dir)
        self.workers.append(worker)
        return worker

    async def turn(self, text: str, session: str = "s1", room: RoomAudience | None = None) -> None:
        """One conversational turn (in ``room``, who could read it), then the mark the bot
        makes after it."""
        result = await self.runtime.run_turn(TurnRequest("general", session, USER, text))
        assert result.ok, result.error
        await self.worker.turn_finished("general", session, None, room=room)


@pytest_asyncio.fixture
async def make_world(model: ScriptedModel, tmp_path: Path) -> AsyncIterator[Callable[..., World]]:
    """``make_world(**auto_flush)``: a World with those ``memory.auto_flush`` settings."""
    made: list[World] = []

    def make(
        handler: Callable[[dict[str, Any]], ReplyLike] = family_facts, **auto_flush: Any
    ) -> World:
        model.set_handler(handler)
        text = config_text(
            model.base_url, {"general": {"rooms": ["r"]}}, memory={"auto_flush": auto_flush}
        )
        config = parse_config(text, "config.yaml")
        registry = MemoryRegistry(config, tmp_path)
        runtime = AgentRuntime(config, tmp_path / "mindroom_data", registry)
        worker = FlushWorker(config, runtime, registry, tmp_path / "mindroom_data")
        world = World(model, tmp_path, config, registry, runtime, worker, [worker])
        made.append(world)
        return world

    yield make
    for world in made:
        for worker in world.workers:
            await worker.aclose()
        await world.runtime.close()
        world.registry.close()


async def test_a_fact_stated_in_a_conversation_lands_in_todays_daily_file_written_by_flush(
    make_world: Callable[..., World],
) -> None:
    world = make_world(idle_seconds=0)
    await world.turn("my sister is called Maya")

    results = await world.worker.cycle()

    assert [r.written for r in results] == [(SISTER,)]
    assert world.facts() == [SISTER]
    memory = world.registry.for_agent("general")
    assert memory is not None
    assert [(h.actor, h.op, h.new) for h in memory.history_of()] == [("flush", "add", SISTER)]
    entry = await world.entry()
    assert (entry.dirty, entry.in_flight, entry.cursor, entry.failures) == (False, False, 2, 0)
    assert entry.flushed_updated_at > 0
    # the extractor saw the conversation, and the chat reply was the only other model call
    assert len(world.extractions()) == 1
    assert f"{USER}: my sister is called Maya" in conversation(world.extractions()[0])
    assert len(world.model.requests) == 2


async def test_no_reply_writes_nothing_yet_the_session_is_clean_and_the_cursor_advanced(
    make_world: Callable[..., World],
) -> None:
    world = make_world(idle_seconds=0)
    await world.turn("nice weather today")

    results = await world.worker.cycle()

    assert [(r.written, r.messages, r.error) for r in results] == [((), 2, None)]
    assert len(world.extractions()) == 1
    assert not world.daily.exists()
    entry = await world.entry()
    assert (entry.dirty, entry.cursor) == (False, 2)
    assert await world.worker.cycle(force=True) == []  # nothing left to look at


async def test_flushing_again_never_duplicates_a_fact(make_world: Callable[..., World]) -> None:
    world = make_world(idle_seconds=0)
    await world.turn("my sister is called Maya")
    await world.worker.cycle()

    # nothing new: the session is not looked at again
    assert await world.worker.cycle(force=True) == []
    assert len(world.extractions()) == 1

    # the same chunk extracted again (as after a crash that lost the cursor): nothing is added
    world.force(cursor=0, dirty=1)
    results = await world.worker.cycle(force=True)

    assert len(world.extractions()) == 2
    assert [(r.written, r.messages, r.error) for r in results] == [((), 2, None)]
    assert world.facts() == [SISTER]
    memory = world.registry.for_agent("general")
    assert memory is not None
    assert len(memory.history_of()) == 1


async def test_a_flush_done_again_on_another_day_writes_nothing_twice(
    make_world: Callable[..., World], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flush whose process died after it wrote its facts but before the ledger moved the
    cursor is done again, maybe after midnight: the fact is in yesterday's daily file, and is
    not written into today's as well. A new fact of the same conversation still is."""
    world = make_world(idle_seconds=0)
    await world.turn("my sister is called Maya")
    monkeypatch.setattr(flush_loop, "today", lambda: "2031-03-01")
    await world.worker.cycle()
    world.force(cursor=0, dirty=1)  # what the death before the finish leaves
    monkeypatch.setattr(flush_loop, "today", lambda: "2031-03-02")
    await world.turn("and my brother is called Tom")

    results = await world.worker.cycle(force=True)

    assert [r.written for r in results] == [(BROTHER,)]  # the control: a new fact is written
    days = world.daily.parent
    assert daily_texts(days / "2031-03-01.md") == [SISTER]
    assert daily_texts(days / "2031-03-02.md") == [BROTHER]


def daily_texts(path: Path) -> list[str]:
    return [e.text for e in parse_entries(path.read_text(), "memory/day.md")]


async def test_what_a_dm_taught_stays_its_persons_when_someone_joins_before_the_flush(
    make_world: Callable[..., World],
) -> None:
    """Alice says something in her DM; before the flush runs, she invites Bob into that room.
    The fact is recorded for her DM (who could read it then), not for the room of both (where
    Bob's own DM would have recalled it). The control: a conversation held with both of them
    there from its start is recorded for the room of both."""
    world = make_world(idle_seconds=0)
    bob = "@bob:example.org"
    room: dict[str, RoomAudience] = {"now": RoomAudience.private_to(USER, "!dm:example.org")}
    world.worker.audience = lambda _session, _requester: room["now"]
    await world.turn("my sister is called Maya", room=room["now"])
    room["now"] = RoomAudience.shared(
        frozenset({USER, bob}), closed=True, room_id="!dm:example.org"
    )
    await world.turn("and my brother is called Tom", session="s2", room=room["now"])

    await world.worker.cycle()

    audiences = {
        e.text: e.fields.audience for e in parse_entries(world.daily.read_text(), "memory/x.md")
    }
    assert audiences[SISTER] == f"dm:{USER}"
    assert (audiences[BROTHER] or "").startswith("room:")  # the control
    assert json.loads((await world.entry()).told or "{}") == {"readers": [USER]}


MESSAGE_N = re.compile(r"\bmessage (\d+)\b")


def fact_per_message(request: dict[str, Any]) -> str:
    if not is_extraction(request):
        return "ok"
    numbers = MESSAGE_N.findall(conversation(request))
    return "\n".join(f"- fact about message {n}" for n in numbers) or "NO_REPLY"


async def test_a_long_backlog_is_extracted_in_bounded_chunks_over_several_cycles(
    make_world: Callable[..., World],
) -> None:
    world = make_world(fact_per_message, idle_seconds=0, extractor={"max_messages_per_flush": 20})
    for n in range(1, 51):
        await world.turn(f"message {n}")

    per_cycle = []
    for _ in range(10):
        if not (await world.entry()).dirty:
            break
        results = await world.worker.cycle(force=True)
        per_cycle.append([r.messages for r in results])

    assert per_cycle == [[20]] * 5  # one bounded chunk per cycle, five cycles for 100 messages
    chunks = [conversation(r).splitlines() for r in world.extractions()]
    assert [len(c) for c in chunks] == [20] * 5
    seen = [int(n) for c in chunks for line in c for n in MESSAGE_N.findall(line)]
    assert sorted(seen) == list(range(1, 51))  # every message once, none skipped or repeated
    counts = Counter(world.facts())
    assert counts == Counter(f"fact about message {n}" for n in range(1, 51))
    entry = await world.entry()
    assert (entry.cursor, entry.dirty, entry.in_flight) == (100, False, False)


def slow_extraction(request: dict[str, Any]) -> ReplyLike:
    if is_extraction(request):
        return Reply(f"- {SISTER}", delay=3.0)
    return "Nice to hear!"


async def test_a_slow_extraction_times_out_and_backs_off_twice_as_long_each_time(
    make_world: Callable[..., World],
) -> None:
    world = make_world(
        slow_extraction,
        idle_seconds=0,
        retry_cooldown_seconds=10,
        max_retry_cooldown_seconds=100,
        extractor={"max_extraction_seconds": 0.3},
    )
    await world.turn("my sister is called Maya")

    before = time.time()
    results = await world.worker.cycle()
    after = time.time()

    assert [r.error for r in results] == ["timed out"]
    assert after - before < 2.0  # the 3 s answer was not waited for
    entry = await world.entry()
    assert (entry.failures, entry.in_flight, entry.dirty, entry.cursor) == (1, False, True, 0)
    assert before + 10 <= entry.next_attempt_at <= after + 10
    assert await world.worker.cycle() == []  # in its cooldown: not picked by a normal cycle

    before = time.time()
    results = await world.worker.cycle(force=True)
    after = time.time()

    assert [r.error for r in results] == ["timed out"]
    entry = await world.entry()
    assert (entry.failures, entry.in_flight) == (2, False)
    assert before + 20 <= entry.next_attempt_at <= after + 20
    assert not world.daily.exists()
    restarted = world.new_worker()  # the failure count is durable: it is in the ledger
    assert (await world.entry(worker=restarted)).failures == 2


async def test_a_flush_left_in_flight_by_a_dead_process_is_cleared_on_start_and_flushed_once(
    make_world: Callable[..., World],
) -> None:
    world = make_world(idle_seconds=0)
    await world.turn("my sister is called Maya")
    # a process died mid-flush: its claim is still in the ledger
    dead = await asyncio.create_subprocess_exec("true")
    await dead.wait()
    world.force(in_flight=1, claim_id="gone", claim_pid=dead.pid, claimed_at=time.time())
    live = world.new_worker()
    assert (await world.entry(worker=live)).in_flight is False  # cleared when a worker opens
    world.force(in_flight=1, claim_id="gone", claim_pid=dead.pid, claimed_at=time.time())
    assert (await world.entry()).in_flight is True  # a worker already open only sees it ...

    results = await world.worker.cycle()  # ... until its next cycle clears it

    assert [r.written for r in results] == [(SISTER,)]
    assert await world.worker.cycle(force=True) == []
    assert len(world.extractions()) == 1
    assert world.facts() == [SISTER]


async def test_a_claim_of_a_live_process_is_respected_until_it_outlives_its_bound(
    make_world: Callable[..., World],
) -> None:
    world = make_world(idle_seconds=0, extractor={"max_extraction_seconds": 1})
    await world.turn("my sister is called Maya")
    # another live process (here: this one, under a claim id no worker of ours holds)
    world.force(in_flight=1, claim_id="cli", claim_pid=os.getpid(), claimed_at=time.time())

    assert await world.worker.cycle(force=True) == []  # left to its owner
    assert world.extractions() == []

    world.force(claimed_at=time.time() - 1000)  # the owner hung far past the bound
    results = await world.worker.cycle(force=True)

    assert [r.written for r in results] == [(SISTER,)]
    assert len(world.extractions()) == 1


async def test_a_new_prompt_boosts_the_agents_other_dirty_session_so_only_it_is_flushed(
    make_world: Callable[..., World],
) -> None:
    world = make_world(idle_seconds=1000, max_dirty_age_seconds=1000)
    await world.turn("my sister is called Maya", "s1")
    await world.turn("my brother is called Tom", "s2")
    assert await world.worker.cycle() == []  # both still active: nothing is due

    await world.worker.prompted("general", "s1")

    assert ((await world.entry("s1")).boosted, (await world.entry("s2")).boosted) == (False, True)
    results = await world.worker.cycle()
    assert [r.entry.session_id for r in results] == ["s2"]
    assert world.facts() == [BROTHER]
    assert ((await world.entry("s1")).dirty, (await world.entry("s2")).dirty) == (True, False)
    assert (await world.entry("s2")).boosted is False
    assert len(world.extractions()) == 1


async def test_with_auto_flush_disabled_nothing_is_marked(
    make_world: Callable[..., World],
) -> None:
    world = make_world(enabled=False, idle_seconds=0)
    await world.turn("my sister is called Maya", "s1")
    await world.turn("my brother is called Tom", "s2")
    await world.worker.prompted("general", "s1")

    assert await world.worker.entries() == []
    assert await world.worker.cycle(force=True) == []
    assert world.extractions() == []
    assert not world.daily.exists()


async def wait_for_extraction(world: World, timeout: float = 5.0) -> None:
    await wait_until(world.extractions, "an extraction request arrived", timeout, interval=0.02)


async def test_a_turn_finishing_during_a_flush_is_flushed_later(
    make_world: Callable[..., World],
) -> None:
    release = (
        threading.Event()
    )  # the first extraction waits for it: the race is set up, not hoped for
    first = {"held": True}

    def held_first_extraction(request: dict[str, Any]) -> ReplyLike:
        if is_extraction(request) and first.pop("held", False):
            release.wait(30)  # (the scripted server's thread, not the event loop)
        return family_facts(request)

    world = make_world(held_first_extraction, idle_seconds=0)
    await world.turn("my sister is called Maya")
    flushing = asyncio.create_task(world.worker.cycle())
    await wait_for_extraction(world)

    await world.turn("my brother is called Tom")
    assert not flushing.done()  # the turn above finished while the first flush was running
    release.set()
    await flushing

    assert (await world.entry()).dirty  # two messages past the cursor are still to be flushed
    await world.worker.cycle(force=True)
    assert world.facts() == [SISTER, BROTHER]


def padded(text: str, width: int = 50) -> str:
    return text.ljust(width, ".")


async def test_every_message_of_a_chunk_reaches_the_extractor(
    make_world: Callable[..., World],
) -> None:
    def chat(request: dict[str, Any]) -> ReplyLike:
        return family_facts(request) if is_extraction(request) else padded("Noted")

    world = make_world(chat, idle_seconds=0, extractor={"max_chars_per_flush": 250})
    await world.turn(padded("my sister is called Maya"))
    await world.turn(padded("and the weather is fine"))

    results = await world.worker.cycle()

    # 4 messages of 50 characters plus their "speaker: " prefixes: 3 fit in 250 characters
    assert [r.messages for r in results] == [3]
    said = conversation(world.extractions()[0])
    assert "my sister is called Maya" in said
    assert world.facts() == [SISTER]


# -- answers the parser must read, or refuse to take as flushed -------------------------------


async def test_a_numbered_list_answer_stores_every_fact(make_world: Callable[..., World]) -> None:
    def numbered(request: dict[str, Any]) -> ReplyLike:
        if not is_extraction(request):
            return "Nice!"
        return f"Here are the facts:\n\n1. **{SISTER}**\n2. {BROTHER}\n"

    world = make_world(numbered, idle_seconds=0)
    await world.turn("my sister is Maya and my brother is Tom")

    results = await world.worker.cycle()

    assert [r.written for r in results] == [(SISTER, BROTHER)]
    assert world.facts() == [SISTER, BROTHER]


async def test_a_chatty_refusal_stores_nothing_and_the_session_is_flushed(
    make_world: Callable[..., World],
) -> None:
    def chatty(request: dict[str, Any]) -> ReplyLike:
        return "Nothing worth remembering here." if is_extraction(request) else "Hi!"

    world = make_world(chatty, idle_seconds=0)
    await world.turn("hello")

    results = await world.worker.cycle()

    assert [(r.written, r.messages, r.error) for r in results] == [((), 2, None)]
    assert len(world.extractions()) == 1  # positive control: the refusal was read
    assert not world.daily.exists()
    assert ((await world.entry()).dirty, (await world.entry()).cursor) == (False, 2)


async def test_an_unreadable_answer_keeps_the_cursor_and_the_facts_are_stored_on_retry(
    make_world: Callable[..., World],
) -> None:
    answers = iter(["Here are the facts:", f"- {SISTER}"])

    def unreadable_first(request: dict[str, Any]) -> ReplyLike:
        return next(answers) if is_extraction(request) else "Nice to hear!"

    world = make_world(unreadable_first, idle_seconds=0, retry_cooldown_seconds=60)
    await world.turn("my sister is called Maya")

    results = await world.worker.cycle()

    assert len(world.extractions()) == 1
    assert [r.written for r in results] == [()]
    assert "Here are the facts:" in (results[0].error or "")  # the warning quotes the answer
    entry = await world.entry()
    assert (entry.cursor, entry.dirty, entry.failures) == (0, True, 1)  # not marked flushed
    assert not world.daily.exists()

    results = await world.worker.cycle(force=True)  # the retry reads the same chunk

    assert [r.written for r in results] == [(SISTER,)]
    assert world.facts() == [SISTER]
    entry = await world.entry()
    assert (entry.cursor, entry.dirty, entry.failures) == (2, False, 0)


# -- several claimers, one ledger -------------------------------------------------------------


async def test_two_workers_racing_for_one_dirty_session_extract_it_once(
    make_world: Callable[..., World],
) -> None:
    def slow(request: dict[str, Any]) -> ReplyLike:
        if is_extraction(request):
            return Reply(family_facts(request), delay=1.0)  # both workers are in the race
        return family_facts(request)

    world = make_world(slow, idle_seconds=0)
    await world.turn("my sister is called Maya")
    other = world.new_worker()  # e.g. the CLI's worker, with its own ledger connection

    first, second = await asyncio.gather(world.worker.cycle(force=True), other.cycle(force=True))

    assert sorted([len(first), len(second)]) == [0, 1]  # one of them got the claim
    sister = [r for r in world.extractions() if "sister" in conversation(r)]
    assert len(sister) == 1
    assert world.facts() == [SISTER]

    # positive control: a second turn is extracted by whichever worker runs next
    await world.turn("my brother is called Tom")
    await other.cycle(force=True)
    assert len(world.extractions()) == 2
    assert world.facts() == [SISTER, BROTHER]


async def test_a_busy_runtime_with_a_reply_always_running_still_flushes(
    make_world: Callable[..., World],
) -> None:
    def held(request: dict[str, Any]) -> ReplyLike:
        if not is_extraction(request) and "hold" in last_user_text(request):
            return Reply("finally", delay=30)  # a turn that stays in progress throughout
        return family_facts(request)

    world = make_world(held, idle_seconds=0)
    await world.turn("my sister is called Maya", "s1")
    busy = asyncio.create_task(
        world.runtime.run_turn(TurnRequest("general", "s2", USER, "hold the line"))
    )
    try:
        deadline = time.monotonic() + 10
        while not any("hold" in last_user_text(r) for r in world.model.requests):
            assert time.monotonic() < deadline, "the held turn never reached the model"
            await asyncio.sleep(0.02)

        results = await world.worker.cycle()

        assert not busy.done()  # the reply was still running the whole time
        assert [r.written for r in results] == [(SISTER,)]
        assert world.facts() == [SISTER]
    finally:
        busy.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await busy


async def test_a_turn_cancelled_just_before_the_runtime_closes_is_still_saved(
    make_world: Callable[..., World],
) -> None:
    """Agno saves a cancelled turn in a task of its own. Closing the runtime waits for that save,
    so what the person said reaches the session store and the flush, instead of meeting closed
    connections (a shutdown during a reply)."""

    def held(request: dict[str, Any]) -> ReplyLike:
        if "hold" in last_user_text(request):
            return Reply("finally", delay=30)
        return family_facts(request)

    world = make_world(held, idle_seconds=0)
    await world.worker.aclose()
    busy = asyncio.create_task(
        world.runtime.run_turn(TurnRequest("general", "s1", USER, "hold the line, my cat is Io"))
    )
    await wait_until(
        lambda: any("hold" in last_user_text(r) for r in world.model.requests),
        "the held turn reached the model",
        timeout=10,
    )
    busy.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await busy
    await world.runtime.close()

    sessions = world.data_dir / "sessions" / "general.db"
    with contextlib.closing(sqlite3.connect(sessions)) as db:
        runs = [row[0] for row in db.execute("SELECT run_data FROM agent_sessions_runs")]
    assert sum("my cat is Io" in str(run) for run in runs) == 1


async def test_an_old_state_file_is_moved_into_the_ledger_once_and_nothing_is_lost(
    make_world: Callable[..., World],
) -> None:
    world = make_world(idle_seconds=0)
    await world.worker.aclose()
    await world.runtime.run_turn(TurnRequest("general", "s1", USER, "my sister is called Maya"))
    await world.runtime.run_turn(TurnRequest("general", "s1", USER, "my brother is called Tom"))
    # an earlier version had flushed the first exchange and left the session dirty, in flight
    legacy = world.data_dir / "memory_flush_state.json"
    old = FlushEntry("general", "s1", dirty=True, dirty_revision=2, cursor=2, in_flight=True)
    legacy.write_text(json.dumps({"entries": [asdict(old)], "curation_passes": {}}))

    upgraded = world.new_worker()
    entry = await world.entry(worker=upgraded)

    assert (entry.cursor, entry.dirty, entry.in_flight) == (2, True, False)
    assert not legacy.exists()
    assert legacy.with_name("memory_flush_state.json.migrated").exists()
    results = await upgraded.cycle()
    assert [r.written for r in results] == [(BROTHER,)]  # only what was not flushed before
    assert "sister" not in conversation(world.extractions()[0])
    assert world.facts() == [BROTHER]


async def test_a_forget_me_waits_for_the_flush_in_progress_and_the_next_flush_waits_for_it(
    make_world: Callable[..., World],
) -> None:
    """Forget-me (the bot's erasure gate) never runs beside a flush: it starts once the flush
    in progress has written its facts, so it erases them too, and the flush of the next
    session waits until it is done (mindroom.people.erasure)."""
    release = threading.Event()

    def held(request: dict[str, Any]) -> ReplyLike:
        if is_extraction(request):
            release.wait(30)  # the first extraction thinks until the test lets it answer
        return family_facts(request)

    world = make_world(handler=held, idle_seconds=0)
    await world.turn("my sister is called Maya", session="s1")
    await world.turn("my brother is called Tom", session="s2")
    seen_by_erasure: list[list[str]] = []

    async def erase() -> None:
        async with world.worker.gate.erasing():
            seen_by_erasure.append(await asyncio.to_thread(world.facts))

    flushing = asyncio.create_task(world.worker.cycle())  # one session after the other
    await wait_until(lambda: world.extractions(), "the first extraction was asked")
    erasure = asyncio.create_task(erase())
    await wait_until(lambda: world.worker.gate.erasure_waiting, "the erasure waits")
    assert seen_by_erasure == []  # the control: it waits for the flush in progress
    release.set()
    results = await asyncio.wait_for(flushing, 60)
    await erasure

    assert len(results) == 2
    first_written = list(results[0].written)
    # after the first flush wrote its fact, before the second flush wrote the other
    assert seen_by_erasure == [first_written]
    assert sorted(world.facts()) == sorted([SISTER, BROTHER])
