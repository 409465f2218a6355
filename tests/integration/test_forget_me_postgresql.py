"""Forget-me and export with ``storage.database`` (PostgreSQL): the ledger, the
Agno session and learning stores and the memory search index live in PostgreSQL, and the map
of a person's data covers them there as it covers the SQLite files.

Two people talk through a private companion (a DM) and a shared agent (a room, with a memory
tool write the PostgreSQL search index copies). Then every table of the whole database is
searched, each row as text (every column, whatever its type), and every file of the
database's folder on disk is searched byte by byte after a checkpoint: the export must hold
each of Alice's markers found there, and after forget-me neither search finds any of them
(dead tuples included), while Bob's are all still in the rows (the positive control).

Real Synapse, real PostgreSQL (its own server), real Agno; the scripted model plays the model.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
from pathlib import Path
from typing import Any

import pytest
from agno.session import AgentSession
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from mindroom.adapters.agno.session_stores import SessionStores, store_schema
from mindroom.config.load import parse_config
from mindroom.memory.private import requester_key
from mindroom.memory.registry import MemoryRegistry
from mindroom.people.data import redact_deleted_fact
from tests.integration.test_forget_me import ask, cli, direct
from tests.support.harness import BotHarness, Human, config_text, unique
from tests.support.postgres import PostgresServer
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall, last_user_text

PATHS = ("dm", "private", "thread", "tool")
MARKER = re.compile(r"\b(?:dm|private|thread|tool)q[0-9a-f]{12}7\b")


def markers() -> dict[str, str]:
    """One unique marker per path (ending in a digit, so no stemmer changes it)."""
    return {path: f"{path}q{secrets.token_hex(6)}7" for path in PATHS}


def play(request: dict[str, Any]) -> Reply | str:
    """Agno learning keeps every marker it is shown; a request to remember becomes an
    add_memory call; everything else is echoed (replies copy the person's words, as real
    replies do)."""
    if request["messages"][-1]["role"] == "tool":
        return "Done."
    tools = [t["function"]["name"] for t in request.get("tools") or []]
    last = last_user_text(request)
    if "this conversation" in last and "add_memory" in tools:  # Agno learning's extraction
        said = sorted(set(MARKER.findall(last)))
        if not said:
            return "No updates needed"
        calls = [ToolCall("add_memory", {"memory": f"The user said {m}"}) for m in said]
        return Reply(tool_calls=calls)
    if "please remember" in last and "add_memory" in tools:
        said = MARKER.findall(last)
        return Reply(tool_calls=[ToolCall("add_memory", {"text": f"Remember {said[0]}"})])
    return "echo: " + last


def pg_config(model: ScriptedModel, room: str, url: str) -> str:
    return config_text(
        model.base_url,
        {
            "general": {"rooms": [room], "streaming": False, "learning": True},
            "mind": {
                "rooms": [room],
                "private": {"per": "user"},
                "streaming": False,
                "learning": True,
            },
        },
        memory={
            "auto_flush": {"enabled": False},
            "embedder": "none",
            "maintenance": {"enabled": False},
            "search": {"index": "postgresql"},
        },
        storage={"database": url},
    )


async def plant(bot: BotHarness, person: Human, room_id: str, marks: dict[str, str]) -> None:
    """A DM with the private companion (a remembered fact too), a thread and a remembered
    fact with the shared agent; then a question that recalls both memories, so the search
    index in PostgreSQL copies them."""
    assert bot.bot is not None
    general = bot.bot.agents["general"].user_id
    mind = bot.bot.agents["mind"].user_id
    dm = await direct(person, mind)
    await ask(person, dm, mind, f"in private: {marks['dm']}")
    await ask(person, dm, mind, f"please remember {marks['private']}")
    await ask(person, dm, mind, f"what do you know about {marks['private']}?")
    root = await person.send(room_id, "@general a thread", mention=[general])
    await person.wait_for_reply(room_id, root, timeout=60)
    await ask(person, room_id, general, f"@general more: {marks['thread']}", thread_root=root)
    await ask(person, room_id, general, f"@general please remember {marks['tool']}")
    await ask(person, room_id, general, f"@general what about {marks['tool']}?")


def _engine(url: str) -> Any:
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://"), poolclass=NullPool)


def rows_holding(url: str, marks: dict[str, str]) -> dict[str, list[str]]:
    """For each marker, the tables (``schema.table``) with a row holding it: every table of
    every schema, each row cast to text whole (every column, whatever its type)."""
    found: dict[str, list[str]] = {path: [] for path in marks}
    engine = _engine(url)
    try:
        with engine.connect() as conn:
            names = conn.execute(
                text(
                    "SELECT table_schema, table_name FROM information_schema.tables"
                    " WHERE table_type = 'BASE TABLE' AND table_schema NOT LIKE 'pg\\_%'"
                    " AND table_schema <> 'information_schema'"
                )
            ).fetchall()
            for schema, table in names:
                for path, marker in marks.items():
                    query = (
                        f'SELECT 1 FROM "{schema}"."{table}" AS r'
                        " WHERE strpos(CAST(r AS text), :m) > 0 LIMIT 1"
                    )
                    hit = conn.execute(text(query), {"m": marker}).fetchone()
                    if hit:
                        found[path].append(f"{schema}.{table}")
                        found[path].sort()
    finally:
        engine.dispose()
    return found


def files_holding(url: str, server: PostgresServer, marks: dict[str, str]) -> dict[str, list[str]]:
    """For each marker, the files of the database's folder on disk holding its bytes, after
    a checkpoint wrote every changed page (dead tuples and free space included)."""
    engine = _engine(url)
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("CHECKPOINT"))
            oid = conn.execute(
                text("SELECT oid FROM pg_database WHERE datname = current_database()")
            ).scalar_one()
    finally:
        engine.dispose()
    folder = server.data / "base" / str(oid)
    found: dict[str, list[str]] = {path: [] for path in marks}
    for file in sorted(p for p in folder.iterdir() if p.is_file()):
        data = file.read_bytes()
        for path, marker in marks.items():
            if marker.encode() in data:
                found[path].append(file.name)
    return found


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_forget_me_erases_a_persons_rows_from_every_postgresql_table_and_export_shows_them(
    bot: BotHarness,
    human: Human,
    model: ScriptedModel,
    synapse: Any,
    postgres: PostgresServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    alice, room, url = human, unique("pgforget"), postgres.database()
    bob = await Human.create(synapse)
    alice_marks, bob_marks = markers(), markers()
    model.set_handler(play)
    try:
        room_id = await bot.start_in_room(pg_config(model, room, url), room, alice)
        await bob.join(room_id)
        await plant(bot, alice, room_id, alice_marks)
        await plant(bot, bob, room_id, bob_marks)
    finally:
        await bob.close()
    await bot.stop()
    storage: Path = bot.storage
    before_alice, before_bob = rows_holding(url, alice_marks), rows_holding(url, bob_marks)
    # every path left each person's words in PostgreSQL (else this test proves nothing of it)
    assert all(before_alice.values()), before_alice
    assert all(before_bob.values()), before_bob
    tables = {t for found in before_alice.values() for t in found}
    assert "public.memory_search" in tables  # the search index copied the memories
    assert any(t.endswith(".agent_sessions_runs") for t in tables), tables  # the transcripts
    assert any(t.endswith(".agno_learnings") for t in tables), tables  # what learning kept
    assert "public.handled" in tables  # the ledger
    assert files_holding(url, postgres, alice_marks)["dm"]  # the file search sees bytes

    export = ("export", "--user", alice.user_id, "--format", "json")
    code, exported = cli(storage, *export, capsys=capsys)
    assert code == 0, exported
    missing = [m for m in alice_marks.values() if m not in exported]
    assert not missing, f"in PostgreSQL but not in the export: {missing}"
    assert not [m for m in bob_marks.values() if m in exported]
    stores = json.loads(exported)["stores"]
    in_postgresql = {  # each store's PostgreSQL part, not only the files beside it
        "ledger": json.dumps(stores["ledger"]["data"]),
        "private": json.dumps(stores["private_folder"]["data"]["postgresql"]),
        "shared": json.dumps(stores["shared_sessions"]["data"]),
    }
    assert all(m in in_postgresql["ledger"] for m in alice_marks.values()), in_postgresql
    assert all(alice_marks[p] in in_postgresql["private"] for p in ("dm", "private"))
    assert all(alice_marks[p] in in_postgresql["shared"] for p in ("thread", "tool"))

    foreign = _engine(url)  # another application's table in the same database
    try:
        with foreign.begin() as conn:
            conn.execute(text("CREATE TABLE other_app (user_id TEXT, note TEXT)"))
            conn.execute(text("INSERT INTO other_app VALUES (:u, 'theirs')"), {"u": alice.user_id})
    finally:
        foreign.dispose()

    code, out = cli(storage, "forget", "--user", alice.user_id, "--yes", capsys=capsys)
    assert code == 0, out

    after_alice = rows_holding(url, alice_marks)
    assert not any(after_alice.values()), after_alice
    on_disk = files_holding(url, postgres, alice_marks)
    assert not any(on_disk.values()), on_disk  # no dead tuple or index entry keeps them
    assert rows_holding(url, bob_marks) == before_bob  # Bob's rows are all still there
    assert all(files_holding(url, postgres, bob_marks).values())
    assert not (storage / "private_instances" / requester_key(alice.user_id)).exists()
    assert rows_holding(url, {"id": alice.user_id})["id"] == ["public.other_app"]  # not ours


@pytest.mark.asyncio
async def test_a_fact_deleted_through_me_is_redacted_in_the_persons_postgresql_stores_only(
    postgres: PostgresServer, tmp_path: Path
) -> None:
    url = postgres.database()
    config = parse_config(
        config_text(
            "http://127.0.0.1:1/v1",
            {"mind": {"rooms": [], "private": {"per": "user"}}},
            storage={"database": url},
        ),
        "test",
    )
    registry = MemoryRegistry(config, tmp_path)
    stores = SessionStores(4, url, tmp_path)
    fact = f"Alice lives at rue {secrets.token_hex(6)} 12"
    try:
        for user in ("@alice:localhost", "@bob:localhost"):
            instance = registry.private_instance("mind", user)
            assert instance is not None
            db = stores.get(instance.sessions_db, per_person=True, session_table="agent_sessions")
            session = AgentSession(
                session_id=f"dm-{user}",
                agent_id="mind",
                user_id=user,
                session_data={"said": fact},
                created_at=1,
                updated_at=1,
            )
            await db.upsert_session(session)
        await stores.close()
        before = rows_holding(url, {"fact": fact})["fact"]
        assert len(before) == 2  # both people's stores hold it (the positive control)

        changed = await asyncio.to_thread(
            redact_deleted_fact, config, tmp_path, registry, "@alice:localhost", fact
        )
    finally:
        await stores.close()
        registry.close()
    after = rows_holding(url, {"fact": fact})["fact"]
    assert changed >= 1
    bob = registry.private_instance("mind", "@bob:localhost")
    assert bob is not None
    bob_schema = store_schema(tmp_path, bob.sessions_db)
    assert [t.split(".")[0] for t in after] == [bob_schema]  # Bob's stays, Alice's went
    redacted = rows_holding(url, {"mark": "[deleted by the person]"})["mark"]
    assert len(redacted) == 1
    assert redacted[0] in before
