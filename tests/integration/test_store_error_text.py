"""A failed database statement never quotes its values: they are people's words, and errors go
to the log (where no forget-me reaches them).

Seen in a two-process run: an Agno session save that failed logged SQLAlchemy's message, whose
``[parameters: ...]`` held the whole run, the person's words included. Every engine mindroom
makes hides them (``hide_parameters``); the error still names its statement.

Real SQLite and PostgreSQL, real Agno session stores."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path

import pytest
from agno.db.base import SessionType
from agno.models.message import Message
from agno.run.agent import RunOutput
from agno.session import AgentSession
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import create_async_engine

from mindroom.adapters.agno.session_stores import SessionStores
from mindroom.redact import DatabaseDetailFilter
from mindroom.store.database import Database, DatabaseError, database_url
from tests.support.postgres import PostgresServer

pytestmark = [pytest.mark.asyncio]

SECRET = "lockercode-zq7731x9"


async def test_a_failed_statement_names_itself_but_not_its_values(
    ledger_target: Path | str,
) -> None:
    """A unique key on the words: PostgreSQL's detail quotes the key that failed."""
    db = await Database.open(ledger_target, [])
    try:
        await db.execute("CREATE TABLE said (id INTEGER PRIMARY KEY, words TEXT UNIQUE NOT NULL)")
        await db.execute("INSERT INTO said (id, words) VALUES (?, ?)", (1, SECRET))
        await db.commit()
        with pytest.raises(DatabaseError) as failed:
            await db.execute("INSERT INTO said (id, words) VALUES (?, ?)", (2, SECRET))
    finally:
        await db.close()
    message = str(failed.value)
    assert "INSERT INTO said" in message  # what failed is still said
    assert "unique" in message.lower()  # and why
    assert SECRET not in message
    assert failed.value.__cause__ is None  # no driver exception chained to print it


async def test_a_logged_database_failure_keeps_no_words_in_its_traceback(
    postgres: PostgresServer,
) -> None:
    """What a library raises (the driver's exception, its DETAIL) and logs goes through the
    log's filter, which every handler of mindroom's logging has."""
    url = postgres.database()
    engine = create_async_engine(database_url(url))  # as a library's engine: nothing hidden
    try:
        async with engine.connect() as conn:
            await conn.execute(
                text("CREATE TABLE said (id INTEGER PRIMARY KEY, words TEXT UNIQUE)")
            )
            await conn.execute(text("INSERT INTO said VALUES (1, :w)"), {"w": SECRET})
            with pytest.raises(IntegrityError) as raised:
                await conn.execute(text("INSERT INTO said VALUES (2, :w)"), {"w": SECRET})
    finally:
        await engine.dispose()
    exc_info = (raised.type, raised.value, raised.tb)
    record = logging.LogRecord(
        "agno", logging.ERROR, __file__, 1, "Exception upserting: %s", (exc_info[1],), exc_info
    )
    formatter = logging.Formatter("%(message)s")
    assert SECRET in formatter.format(record)  # the control: as it would be logged

    record.exc_text = None
    assert DatabaseDetailFilter().filter(record)
    logged = formatter.format(record)
    assert "duplicate key" in logged  # the failure is still told
    assert SECRET not in logged


async def test_the_control_an_engine_without_the_option_quotes_the_values(tmp_path: Path) -> None:
    """The check above can fail: SQLAlchemy's default message holds the values."""
    engine = create_async_engine(database_url(tmp_path / "plain.db"))
    try:
        async with engine.connect() as conn:
            await conn.execute(text("CREATE TABLE said (id INTEGER PRIMARY KEY, words TEXT)"))
            await conn.execute(text("INSERT INTO said VALUES (1, :w)"), {"w": SECRET})
            with pytest.raises(IntegrityError) as failed:
                await conn.execute(text("INSERT INTO said VALUES (1, :w)"), {"w": SECRET})
    finally:
        await engine.dispose()
    assert SECRET in str(failed.value)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_a_failed_session_save_logs_no_words_of_the_conversation(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest, backend: str
) -> None:
    database = None
    if backend == "postgresql":
        server: PostgresServer = request.getfixturevalue("postgres")
        database = server.database()
    stores = SessionStores(4, database, tmp_path)
    path = tmp_path / "sessions" / "general.db"
    try:
        db = stores.get(path, per_person=False, session_table="agent_sessions")
        session = AgentSession("s1", "general", created_at=int(time.time()))
        await db.upsert_session(session)
        run = RunOutput(
            run_id="r1",
            agent_id="general",
            session_id="s1",
            messages=[Message(role="user", content=f"my locker code is {SECRET}")],
        )
        await db.upsert_run(run, session_id="s1", run_index=0)
        assert await db.get_session("s1", SessionType.AGENT) is not None
        _break_runs_table(path, database)

        caplog.clear()
        with caplog.at_level(logging.INFO):  # (aiosqlite's debug lines are off in mindroom)
            try:
                await db.upsert_run(run, session_id="s1", run_index=0)
            except Exception as exc:  # raised or logged, as the store does: either is text
                logging.getLogger("test").error("save failed: %s", exc)
    finally:
        await stores.close()
    logged = caplog.text
    assert "agent_sessions_runs" in logged  # the control: the failure was told
    assert SECRET not in logged


def _break_runs_table(path: Path, database: str | None) -> None:
    """Make the next run save fail: its table's columns are not what the store writes."""
    if database is None:
        with sqlite3.connect(path) as con:
            con.execute("DROP TABLE agent_sessions_runs")
            con.execute("CREATE TABLE agent_sessions_runs (run_id TEXT PRIMARY KEY)")
        return
    import psycopg

    with psycopg.connect(database) as con:
        schemas = [
            r[0]
            for r in con.execute(
                "SELECT table_schema FROM information_schema.tables"
                " WHERE table_name = 'agent_sessions_runs'"
            )
        ]
        for schema in schemas:
            con.execute(f'DROP TABLE "{schema}".agent_sessions_runs')
            con.execute(f'CREATE TABLE "{schema}".agent_sessions_runs (run_id TEXT PRIMARY KEY)')
