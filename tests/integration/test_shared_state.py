"""The ledger's contract on both of its databases: SQLite, the default, and a real
PostgreSQL. Two :class:`Ledger` objects on one database are two processes sharing it: every
claim must have exactly one winner however the two interleave."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from agno.db.base import SessionType
from agno.session import AgentSession

from mindroom.adapters.agno.session_stores import SessionStores, store_schema
from mindroom.adapters.agno.turn_types import TurnUsage
from mindroom.app.reload import start_only_changes
from mindroom.cli.main import main
from mindroom.config.load import parse_config
from mindroom.errors import ConfigError
from mindroom.memory.flush.state import FlushClaim, FlushEntry
from mindroom.sessions.book import SessionRecord
from mindroom.store.database import DatabaseError
from mindroom.store.ledger import Ledger
from mindroom.store.ledger_schema import MIGRATIONS
from tests.support.dashboard import signed_in, start_dashboard
from tests.support.harness import BotHarness, Human, config_text, relation, unique
from tests.support.network import free_port
from tests.support.postgres import PostgresServer
from tests.support.scripted_model import ScriptedModel, all_text, last_user_text

pytestmark = pytest.mark.asyncio


@pytest_asyncio.fixture
async def two(ledger_target: Path | str) -> AsyncIterator[tuple[Ledger, Ledger]]:
    """Two processes' ledgers on one database."""
    first = await Ledger.open(ledger_target)
    second = await Ledger.open(ledger_target)
    assert first._db.dialect == ("sqlite" if isinstance(ledger_target, Path) else "postgresql")
    yield first, second
    await first.close()
    await second.close()


async def test_two_processes_claim_each_message_exactly_once(two: tuple[Ledger, Ledger]) -> None:
    events = [f"$event{i}" for i in range(40)]

    async def claims(ledger: Ledger) -> set[str]:
        won = await asyncio.gather(*(ledger.claim(e, "!room", (), {"n": e}) for e in events))
        return {e for e, ok in zip(events, won, strict=True) if ok}

    first, second = await asyncio.gather(claims(two[0]), claims(two[1]))

    assert first | second == set(events)  # every message is answered...
    assert not first & second  # ...by one process only
    assert await two[1].is_handled(events[0])
    pending = await two[0].pending(newer_than=0)
    assert sorted(p.event_id for p in pending) == sorted(events)


async def test_only_one_process_takes_a_dirty_session_and_a_turn_meanwhile_keeps_it_dirty(
    two: tuple[Ledger, Ledger],
) -> None:
    entry = FlushEntry(agent="general", session_id="s1", requester="@alice:localhost")
    await two[0].flush.mark_dirty(entry, 100.0)
    claims = [FlushClaim(f"claim{i}", 1000 + i, "boot", 101.0) for i in range(2)]
    pairs = zip(two, claims, strict=True)
    taken = await asyncio.gather(*(ledger.flush.claim(entry.key, c) for ledger, c in pairs))
    winners = [(t, c) for t, c in zip(taken, claims, strict=True) if t is not None]
    assert len(winners) == 1
    claimed, claim = winners[0]
    assert claimed is not None
    assert claimed.in_flight

    await two[1].flush.mark_dirty(entry, 105.0, boost=True)  # a turn ends during the extraction
    done = await two[0].flush.finish(claimed, claim.claim_id, 7, more=False, updated_at=104.0)
    assert done is not None
    assert done.dirty  # the new turn still waits
    assert done.boosted
    assert done.cursor == 7
    assert done.first_dirty_at == 100.0  # kept from the first mark: the session stayed dirty
    assert done.dirty_revision == 2

    again = await two[1].flush.claim(entry.key, claims[1])
    assert again is not None
    finished = await two[1].flush.finish(again, "claim1", 9, more=False, updated_at=106.0)
    assert finished is not None
    assert not finished.dirty  # nothing new since: clean
    assert not finished.boosted
    lost = await two[0].flush.finish(again, "claim1", 9, more=False, updated_at=106.0)
    assert lost is None  # a released claim cannot be finished twice


async def test_curation_passes_are_shared_and_stop_at_the_limit(two: tuple[Ledger, Ledger]) -> None:
    taken = await asyncio.gather(
        *(two[i % 2].curation.take_pass("scope", "2026-11-25", 3) for i in range(8))
    )
    assert sum(taken) == 3
    assert await two[0].curation.take_pass("scope", "2026-11-26", 3)  # a new day starts over
    assert not await two[0].curation.take_pass("other", "2026-11-26", 0)


async def test_reply_parts_positions_and_sessions_round_trip(two: tuple[Ledger, Ledger]) -> None:
    a, b = two
    assert await a.claim("$t", "!room", ("general",), {})
    await a.begin_reply_part("$t", "general", 0)
    await b.begin_reply_part("$t", "general", 0)  # a resumed run: the row stays
    await b.record_reply_part("$t", "general", 0, "$posted")
    assert await a.reply_parts("$t", "general") == {0: "$posted"}
    await a.finish("$t")
    assert await b.forget_finished_reply_parts() == 1

    await a.save_sync_token("@mindroom_general:localhost", "s1")
    await b.save_sync_token("@mindroom_general:localhost", "s2")
    assert await a.sync_token("@mindroom_general:localhost") == "s2"
    assert await a.new_session("!room", None) == 1
    assert await b.new_session("!room", None) == 2
    both = await asyncio.gather(a.new_session("!room", "$t"), b.new_session("!room", "$t"))
    assert sorted(both) == [1, 2]  # two !new at once: two generations, none lost
    await a.compactions.save("base", 1, "carried")
    await b.compactions.save("base", 2, "carried again")
    assert await a.compactions.get("base") == (2, "carried again")

    fresh = SessionRecord("k", "general", "", "!room", "", "thread", "base", "base")
    started = await a.sessions.begin(fresh, 1000.0, lambda record: None)
    assert started.session_id == "base"
    await a.sessions.record_turn("k", "base", TurnUsage(10, 5, "m"), 2000.0)
    await b.sessions.record_turn("k", "base", TurnUsage(1, 1, ""), 1500.0)  # older: kept later
    rotated = await b.sessions.rotate("k", 3000.0, "stale")  # the row is put again (replaced)
    record = await a.sessions.get("k")
    assert rotated is not None
    assert record is not None
    assert record.session_id == "base~s1"
    assert record.turns == 0
    assert record.previous == "base"
    assert await a.sessions.find("base~s1") == record


async def test_times_keep_their_precision_and_the_schema_is_applied_once(
    ledger_target: Path | str,
) -> None:
    first = await Ledger.open(ledger_target)
    before = time.time()
    await first.claim("$now", "!room", (), {})
    await first.close()
    again = await Ledger.open(ledger_target)  # a second start: nothing to migrate
    try:
        pending = await again.pending(newer_than=before - 0.001)
        async with again._db.query("SELECT version FROM schema_migrations") as rows:
            versions = [row[0] for row in await rows.fetchall()]
    finally:
        await again.close()
    assert [p.event_id for p in pending] == ["$now"]  # a float4 would round this away
    assert versions == [m.version for m in MIGRATIONS]  # each once


async def on_postgresql(
    bot: BotHarness, human: Human, model: ScriptedModel, postgres: PostgresServer, said: str
) -> tuple[str, str, str]:
    """A bot whose ``storage.database`` is a new PostgreSQL database, with ``general`` in a
    room ``human`` joined and said ``said`` to (answered): the URL, the room, the message."""
    url = postgres.database()
    room = unique("pg")
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    config = config_text(model.base_url, {"general": {"rooms": [room]}}, storage={"database": url})
    room_id = await bot.start_in_room(config, room, human)
    asked = await human.send(room_id, f"@general {said}")
    await human.wait_for_reply(room_id, asked)
    return url, room_id, asked


@pytest.mark.synapse
async def test_a_bot_on_postgresql_keeps_its_state_there_and_answers_once_across_a_restart(
    bot: BotHarness,
    human: Human,
    model: ScriptedModel,
    postgres: PostgresServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url, room_id, asked = await on_postgresql(bot, human, model, postgres, "first")
    assert bot.bot is not None
    dash = await start_dashboard(bot)
    try:
        answers = await asyncio.to_thread(dash._answers, {})  # the status page's, from PostgreSQL
        async with signed_in(dash) as admin:  # its maintenance runs come from there too
            memory_page = await admin.get("/memory")
    finally:
        await dash.stop()
    assert main(["maintenance", "status", "--config", str(bot.storage / "config.yaml")]) == 0
    status = capsys.readouterr().out
    await bot.stop()

    missed = await human.send(room_id, "@general while you were away")
    await bot.start()  # catches up from the sync position kept in PostgreSQL
    await human.wait_for_reply(room_id, missed)
    sqlite_ledger = (bot.storage / "mindroom_data" / "ledger.db").exists()
    await bot.settle(human, room_id)  # (its idle check reads the SQLite file: made only now)
    await bot.stop()

    ledger = await Ledger.open(url)
    try:
        handled = [await ledger.is_handled(e) for e in (asked, missed)]
        sessions = await ledger.sessions.listing("general")
        position = await ledger.sync_token(f"@mindroom_general:{bot.homeserver.server_name}")
    finally:
        await ledger.close()
    assert handled == [True, True]
    assert sessions  # the session book is there too
    assert position  # and the sync positions
    assert not sqlite_ledger  # nothing went to SQLite
    assert [a["sender"] for a in answers] == [human.user_id]  # the status page read PostgreSQL
    assert memory_page.status == 200
    assert "database: storage.database (PostgreSQL)" in status  # the schedule, and no URL
    assert url not in status
    assert not (bot.storage / "mindroom_data" / "maintenance.db").exists()
    away = [r for r in model.requests if "while you were away" in last_user_text(r)]
    assert len(away) == 1  # answered once
    replies = [e for e in human.events if relation(e).get("event_id") == missed]
    assert len(replies) == 1


async def test_storage_database_is_checked_and_applies_at_the_next_start() -> None:
    base = json.loads(config_text("http://127.0.0.1:1/v1", {"general": {}}))
    with pytest.raises(ConfigError, match="storage.database"):
        parse_config(json.dumps({**base, "storage": {"database": "mysql://x/y"}}), "config.yaml")
    old = parse_config(json.dumps(base), "config.yaml")
    new = parse_config(
        json.dumps({**base, "storage": {"database": "postgresql://h/db"}}), "config.yaml"
    )
    assert start_only_changes(old, new) == ["storage.database"]
    assert start_only_changes(old, old) == []  # the control: no change, no warning


@pytest.mark.synapse
async def test_a_conversation_kept_in_postgresql_goes_on_after_a_restart(
    bot: BotHarness, human: Human, model: ScriptedModel, postgres: PostgresServer
) -> None:
    url, room_id, root = await on_postgresql(bot, human, model, postgres, "my name is Ada")
    await bot.stop()

    await bot.start()
    asked = await human.send(room_id, "what is my name?", thread_root=root)
    await human.wait_for_reply(room_id, asked)
    await bot.stop()

    assert "my name is Ada" in all_text(model.requests[-1])  # the history, read back
    assert not list((bot.storage / "mindroom_data").rglob("sessions/*.db"))  # no SQLite store
    ledger = await Ledger.open(url)
    try:
        async with ledger._db.query(
            "SELECT count(*) FROM information_schema.tables"
            " WHERE table_schema LIKE 'mindroom_%' AND table_name = 'agent_sessions'"
        ) as rows:
            [(tables,)] = await rows.fetchall()
    finally:
        await ledger.close()
    assert tables == 1  # general's store, a schema of its own


async def test_two_peoples_stores_are_apart_in_postgresql(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    stores = SessionStores(4, postgres.database(), tmp_path)
    alice_path = tmp_path / "private_instances" / "alice_1" / "mind" / "sessions.db"
    bob_path = tmp_path / "private_instances" / "bob_2" / "mind" / "sessions.db"
    alice = stores.get(alice_path, per_person=True, session_table="agent_sessions")
    bob = stores.get(bob_path, per_person=True, session_table="agent_sessions")
    note = {"note": "Alice's"}
    session = AgentSession(
        session_id="s1",
        agent_id="mind",
        user_id="@alice:localhost",
        session_data=note,
        created_at=1,
        updated_at=1,
    )
    try:
        await alice.upsert_session(session)
        mine = await alice.get_session("s1", SessionType.AGENT)
        theirs = await bob.get_session("s1", SessionType.AGENT)
    finally:
        await stores.close()
    assert store_schema(tmp_path, alice_path) != store_schema(tmp_path, bob_path)
    assert isinstance(mine, AgentSession)  # the control: the session is there, for Alice
    assert mine.session_data == {"note": "Alice's"}
    assert theirs is None  # and not in Bob's store, asked by the same id


async def test_a_failed_or_cancelled_statement_leaves_the_connection_usable(
    two: tuple[Ledger, Ledger],
) -> None:
    ledger = two[0]
    with pytest.raises(Exception, match="nope"):  # an error inside the database
        await ledger._db.query("SELECT * FROM nope")
    assert await ledger.claim("$after-error", "!room", (), {})
    read = asyncio.ensure_future(ledger.pending(newer_than=0))
    await asyncio.sleep(0)  # let it start, then cut it off
    read.cancel()
    await asyncio.gather(read, return_exceptions=True)
    assert await ledger.claim("$after-cancel", "!room", (), {})
    # a statement failing in one task while another writes: the write is whole
    failing = ledger._db.query("SELECT * FROM nope")
    claimed, failed = await asyncio.gather(
        ledger.claim("$beside", "!room", (), {}), failing, return_exceptions=True
    )
    assert claimed is True
    assert isinstance(failed, Exception)
    assert {p.event_id for p in await two[1].pending(newer_than=0)} == {
        "$after-error",
        "$after-cancel",
        "$beside",
    }
    with pytest.raises(ValueError, match="placeholders"):
        await ledger._db.query("SELECT ?", ())


async def test_a_bad_database_url_is_told_without_its_password() -> None:
    with pytest.raises(DatabaseError) as bad:
        await Ledger.open("mysql://mindroom:s3cret@db/mindroom")
    with pytest.raises(DatabaseError) as unreachable:
        await Ledger.open(f"postgresql://mindroom:s3cret@127.0.0.1:{free_port()}/mindroom")
    assert "s3cret" not in str(bad.value)
    assert "s3cret" not in str(unreachable.value)
    assert "check its host" in str(unreachable.value)
