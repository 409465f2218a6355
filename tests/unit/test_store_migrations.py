"""The storage layer: every store that is not a rebuildable index migrates from its oldest schema.

Each store in the registry (:mod:`mindroom.store.schemas`) is created at version 1 exactly as
the code before versions wrote it (its statements, no ``schema_migrations``), with a row in every
table, then opened with the current code: it must reach the newest version and still hold the
row, read by column name. A file newer than the code is refused; an unversioned file is adopted;
and every module that uses SQLite is declared in the registry, so a new store cannot skip it.
No homeserver: real SQLite files in a temporary folder.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib
import re
import sqlite3
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

import mindroom
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords
from mindroom.memory.mem0.ops import OpLog
from mindroom.store import sqlite_loop
from mindroom.store.database import Database, DatabaseError, sqlite_engine
from mindroom.store.migrations import (
    MIGRATIONS_TABLE,
    Migration,
    SchemaTooNewError,
    StoreSchema,
    open_store,
)
from mindroom.store.schemas import (
    ASYNC_STORES,
    CONSENT,
    CONSOLIDATION,
    DERIVED,
    LAYER,
    LEDGER,
    MEM0_OPS,
    READERS,
    SHARERS,
    STORES,
)
from tests.support.waiting import wait_until

PACKAGE = Path(mindroom.__file__).parent


def _old_file(path: Path, schema: StoreSchema) -> dict[str, dict[str, Any]]:
    """``path`` at ``schema``'s version 1, as the code before versions created it, with one
    row in each table; returns the rows written (table -> column -> value)."""
    written: dict[str, dict[str, Any]] = {}
    with sqlite3.connect(path) as db:
        for statement in schema.migrations[0].statements:
            db.execute(statement)
        tables = [
            row[0]
            for row in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        for table in tables:
            values: dict[str, Any] = {}
            for _cid, name, kind, _notnull, _default, _pk in db.execute(
                f'PRAGMA table_info("{table}")'
            ):
                kind = kind.upper()
                if "INT" in kind:
                    values[name] = 1
                elif "REAL" in kind or "DOUBLE" in kind:
                    values[name] = 1.5
                else:
                    values[name] = f"old {table}.{name}"
            columns = ", ".join(f'"{c}"' for c in values)
            marks = ", ".join("?" * len(values))
            db.execute(
                f'INSERT INTO "{table}" ({columns}) VALUES ({marks})', tuple(values.values())
            )
            written[table] = values
    db.close()
    assert written, f"{schema.name}: version 1 creates no table"
    return written


def _versions(path: Path) -> set[int]:
    with sqlite3.connect(path) as db:
        rows = db.execute(f"SELECT version FROM {MIGRATIONS_TABLE}").fetchall()
    db.close()
    return {row[0] for row in rows}


def _assert_rows_kept(db: sqlite3.Connection, written: dict[str, dict[str, Any]]) -> None:
    db.row_factory = sqlite3.Row
    for table, values in written.items():
        rows = db.execute(f'SELECT * FROM "{table}"').fetchall()
        assert len(rows) == 1, table
        assert {column: rows[0][column] for column in values} == values, table


@pytest.mark.parametrize("schema", STORES, ids=lambda s: s.name)
def test_every_store_migrates_from_its_oldest_schema_and_keeps_its_rows(
    tmp_path: Path, schema: StoreSchema
) -> None:
    path = tmp_path / f"{schema.name}.db"
    written = _old_file(path, schema)

    db = open_store(path, schema)
    try:
        _assert_rows_kept(db, written)
        later = {m.version for m in schema.migrations[1:]}
        assert _versions(path) == {1, *later} == set(range(1, schema.version + 1))
    finally:
        db.close()
    again = open_store(path, schema)  # opening a current file changes nothing
    again.close()
    assert _versions(path) == set(range(1, schema.version + 1))


@pytest.mark.parametrize("schema", ASYNC_STORES, ids=lambda s: s.name)
def test_every_database_store_migrates_from_its_oldest_schema_and_keeps_its_rows(
    tmp_path: Path, schema: StoreSchema
) -> None:
    path = tmp_path / f"{schema.name}.db"
    written = _old_file(path, schema)

    async def open_and_close() -> None:
        database = await Database.open(path, schema.migrations)
        await database.close()

    asyncio.run(open_and_close())

    with sqlite3.connect(path) as db:
        _assert_rows_kept(db, written)
    db.close()
    assert _versions(path) == set(range(1, schema.version + 1))


def test_a_consent_proposal_of_the_first_schema_reads_after_the_column_is_added(
    tmp_path: Path,
) -> None:
    path = tmp_path / "consent.db"
    _old_file(path, CONSENT)
    db = open_store(path, CONSENT)
    try:
        row = db.execute("SELECT * FROM proposals").fetchone()
        assert row["text"] == "old proposals.text"
        assert row["replaces"] is None  # version 2's column, on the old row
    finally:
        db.close()


def test_consent_files_that_already_have_the_column_added_ad_hoc_reach_version_2(
    tmp_path: Path,
) -> None:
    path = tmp_path / "consent.db"
    _old_file(path, CONSENT)
    with sqlite3.connect(path) as old:  # what the code before versions did on every open
        old.execute("ALTER TABLE proposals ADD COLUMN replaces TEXT")
        old.execute("UPDATE proposals SET replaces = 'm-1'")
    old.close()

    open_store(path, CONSENT).close()

    assert _versions(path) == {1, 2}
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT replaces FROM proposals").fetchall() == [("m-1",)]
    db.close()


def test_the_stores_own_classes_read_what_the_oldest_schema_held(tmp_path: Path) -> None:
    records_path = tmp_path / "consolidation.db"
    _old_file(records_path, CONSOLIDATION)
    with sqlite3.connect(records_path) as db:
        db.execute("UPDATE memory_conflicts SET metadata_json = '{\"a\": 1}', status = 'open'")
    db.close()
    records = ConsolidationRecords(records_path)
    try:
        [conflict] = records.conflicts()
        assert conflict.reason == "old memory_conflicts.reason"
        assert conflict.metadata == {"a": 1}
    finally:
        records.close()

    ops_path = tmp_path / "ops.db"
    _old_file(ops_path, MEM0_OPS)
    done = OpLog(ops_path).get("old ops.op_key")
    assert done is not None
    assert (done.op, done.entry_id, done.done) == ("old ops.op", "old ops.entry_id", True)
    assert OpLog(ops_path).ids() == ["old ids.entry_id"]


def test_an_unversioned_file_is_adopted_as_version_1_not_recreated(tmp_path: Path) -> None:
    path = tmp_path / "events.db"
    schema = next(s for s in STORES if s.name == "ops_events")
    written = _old_file(path, schema)
    with sqlite3.connect(path) as db:
        assert (
            db.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (MIGRATIONS_TABLE,)).fetchone()
            is None
        )  # the control: no version record yet

    opened = open_store(path, schema)
    try:
        _assert_rows_kept(opened, written)
    finally:
        opened.close()
    assert _versions(path) == {1}


def test_a_file_newer_than_the_code_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "consent.db"
    open_store(path, CONSENT).close()  # the control: the current version opens
    with sqlite3.connect(path) as db:
        db.execute(f"INSERT INTO {MIGRATIONS_TABLE} VALUES (?, 0)", (CONSENT.version + 1,))
    db.close()

    with pytest.raises(SchemaTooNewError) as refused:
        open_store(path, CONSENT)

    message = str(refused.value)
    assert str(path) in message
    assert f"version {CONSENT.version + 1}" in message
    assert f"up to {CONSENT.version}" in message


def test_a_new_store_file_is_created_at_the_newest_version(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "consent.db"
    db = open_store(path, CONSENT)
    db.close()
    assert _versions(path) == set(range(1, CONSENT.version + 1))


@pytest.mark.parametrize("schema", [*STORES, *ASYNC_STORES], ids=lambda s: s.name)
def test_every_first_version_only_creates_if_not_exists(schema: StoreSchema) -> None:
    """So a file made before versions existed is adopted (its tables are kept as they are)."""
    for statement in schema.migrations[0].statements:
        creates = re.match(r"\s*CREATE\s+(UNIQUE\s+)?(TABLE|INDEX)", statement, re.I)
        if creates:
            assert re.match(r"\s*CREATE\s+(UNIQUE\s+)?\w+\s+IF NOT EXISTS", statement, re.I), (
                f"{schema.name}: {statement[:60]}"
            )


# -- the registry is complete ---------------------------------------------------------------------


def _modules() -> dict[str, ast.Module]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(relative.parts).removesuffix(".__init__")
        found[name] = ast.parse(path.read_text(encoding="utf-8"))
    return found


def _imports_sqlite3(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "sqlite3" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "sqlite3":
            return True
    return False


def _calls(tree: ast.Module, function: str) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            called = node.func
            name = called.attr if isinstance(called, ast.Attribute) else getattr(called, "id", "")
            if name == function:
                return True
    return False


def test_every_module_that_uses_sqlite_is_declared_in_the_store_registry() -> None:
    modules = _modules()
    users = {name for name, tree in modules.items() if _imports_sqlite3(tree)}
    assert "mindroom.memory.policy.consent" in users  # the scan finds what it is there to find
    owners = {s.owner for s in (*STORES, *ASYNC_STORES)} | set(SHARERS)
    declared = owners | set(DERIVED) | set(READERS) | set(LAYER)
    undeclared = sorted(users - declared)
    assert not undeclared, (
        f"modules that use sqlite3 but are not in mindroom/store/schemas.py: {undeclared}; "
        "declare each store there (STORES, with migrations) or, if it is rebuilt from the "
        "files, in DERIVED"
    )
    stale = sorted(m for m in (*DERIVED, *READERS, *LAYER, *owners) if m not in modules)
    assert not stale, f"the registry names modules that do not exist: {stale}"


def test_only_declared_stores_open_through_the_runner_and_only_derived_ones_without_it() -> None:
    modules = _modules()
    owners = {s.owner for s in (*STORES, *ASYNC_STORES)} | set(SHARERS)
    with_runner = {n for n, tree in modules.items() if _calls(tree, "open_store")}
    unversioned = {n for n, tree in modules.items() if _calls(tree, "open_database")}
    assert "mindroom.memory.search.vectors" in unversioned  # positive controls
    assert "mindroom.memory.ops_events" in with_runner
    assert with_runner - set(LAYER) <= owners, sorted(with_runner - set(LAYER) - owners)
    assert unversioned - set(LAYER) <= set(DERIVED), sorted(unversioned - set(LAYER) - set(DERIVED))


@pytest.mark.parametrize("module", sorted(DERIVED))
def test_every_derived_store_says_it_is_derived_and_rebuildable(module: str) -> None:
    doc = (importlib.import_module(module).__doc__ or "").lower()
    assert "derived" in doc
    assert "rebuil" in doc


# -- the ledger's database: reads and writes are said, not sniffed --------------------------------


def test_a_read_alone_holds_no_transaction_and_a_write_holds_one_until_its_commit(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        db = await Database.open(tmp_path / "ledger.db", LEDGER.migrations)
        try:
            await db.query("SELECT count(*) AS n FROM handled")
            assert not db._connection.in_transaction()  # a read alone ends at once
            await db.execute(
                "INSERT INTO sync_tokens (account, token) VALUES (?, ?)", ("@a:localhost", "t1")
            )
            assert db._connection.in_transaction()  # the control: a write waits for commit
            async with db.query(
                "SELECT token FROM sync_tokens WHERE account = ?", ("@a:localhost",)
            ) as rows:
                row = await rows.fetchone()
            assert row.token == "t1"  # a read inside the write sees it, by column name
            assert db._connection.in_transaction()  # and does not end it
            await db.commit()
            assert not db._connection.in_transaction()
        finally:
            await db.close()

    asyncio.run(scenario())


async def seen_waiting(work: asyncio.Future[Any]) -> None:
    """``work`` waits for the lock while the loop runs other tasks: neither refused nor run."""
    for _ in range(50):
        await asyncio.sleep(0)
    assert not work.done()


@contextlib.asynccontextmanager
async def waiting_for_another_writer(
    path: Path,
) -> AsyncIterator[tuple[Database, asyncio.Future[Any], sqlite3.Connection]]:
    """A ledger at ``path``, another connection holding its write lock (as another process's
    writer would), and a write of ``@a:localhost``'s sync token started and seen waiting: the
    loop ran other tasks meanwhile and the write is neither refused ("locked") nor run."""
    db = await Database.open(path, LEDGER.migrations)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        write = asyncio.ensure_future(
            db.execute(
                "INSERT INTO sync_tokens (account, token) VALUES (?, ?)", ("@a:localhost", "t")
            )
        )
        await seen_waiting(write)
        yield db, write, other
    finally:
        other.close()
        await db.close()


def test_a_write_that_finds_sqlite_locked_waits_in_a_thread_and_the_loop_runs_on(
    tmp_path: Path,
) -> None:
    """SQLite statements run on the event loop's thread; one that finds another writer holding
    the lock waits for it in a worker thread (the loop free), then runs."""

    async def scenario() -> None:
        async with waiting_for_another_writer(tmp_path / "ledger.db") as (db, write, other):
            other.execute("COMMIT")
            await write
            await db.commit()
            async with db.query("SELECT token FROM sync_tokens") as rows:
                assert [row.token for row in await rows.fetchall()] == ["t"]
            async with db.query("PRAGMA busy_timeout") as rows:  # the loop's: never waits
                assert (await rows.fetchone())[0] == 0

    asyncio.run(scenario())


@contextlib.asynccontextmanager
async def engine_waiting_for_another_writer(
    path: Path, words: str
) -> AsyncIterator[tuple[AsyncEngine, asyncio.Task[None], sqlite3.Connection]]:
    """An engine of Agno's session stores on ``path`` (table ``said``), another connection
    holding the write lock, and a write of ``words`` started through the engine and seen
    waiting: the loop ran other tasks meanwhile and the write is neither refused nor run."""
    engine = sqlite_engine(path)
    other = sqlite3.connect(path, isolation_level=None)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE said (words TEXT)"))
        other.execute("BEGIN IMMEDIATE")

        async def write() -> None:
            async with engine.begin() as conn:
                await conn.execute(text("INSERT INTO said (words) VALUES (:w)"), {"w": words})

        writing = asyncio.create_task(write())
        await seen_waiting(writing)
        yield engine, writing, other
    finally:
        other.close()
        await engine.dispose()


async def said(engine: AsyncEngine) -> list[str]:
    async with engine.connect() as conn:
        return [row.words for row in (await conn.execute(text("SELECT words FROM said")))]


def test_an_sqlalchemy_engine_on_sqlite_waits_for_a_lock_in_a_thread_too(tmp_path: Path) -> None:
    """The engines of Agno's session stores run on the same connection (in aiosqlite's shape):
    a write that finds the file locked waits off the loop, then runs."""

    async def scenario() -> None:
        path = tmp_path / "sessions.db"
        async with engine_waiting_for_another_writer(path, "hi") as (engine, writing, other):
            other.execute("COMMIT")
            await writing
            assert await said(engine) == ["hi"]

    asyncio.run(scenario())


def test_the_log_is_checkpointed_into_the_file_every_so_many_commits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's own checkpoint (an fsync, on the committing thread) is off on the loop's
    connection; every CHECKPOINT_EVERY commits one runs in a worker thread instead."""
    monkeypatch.setattr(sqlite_loop, "CHECKPOINT_EVERY", 3)
    path = tmp_path / "ledger.db"

    async def scenario() -> None:
        db = await Database.open(path, [])
        try:
            await db.execute("CREATE TABLE said (words BLOB)")
            await db.commit()  # DDL: the sqlite3 module committed it at once
            await db.execute("INSERT INTO said (words) VALUES (?)", (b"w",))
            await db.commit()  # 1
            await db.execute("INSERT INTO said (words) VALUES (?)", (b"x" * 200_000,))
            await db.commit()  # 2
            for _ in range(5):  # reads commit nothing, and count for nothing
                async with db.query("SELECT count(*) FROM said") as rows:
                    await rows.fetchall()
            loop_sqlite = db._connection._sqlite  # type: ignore[union-attr]
            assert loop_sqlite._checkpoint is None  # none started by the reads
            assert path.stat().st_size < 100_000  # the row is in the log alone (the control)
            async with db.query("PRAGMA wal_autocheckpoint") as rows:
                assert (await rows.fetchone())[0] == 0
            await db.execute("INSERT INTO said (words) VALUES (?)", (b"y",))
            await db.commit()  # 3: a checkpoint
            await wait_until(lambda: path.stat().st_size > 200_000, "the checkpoint", timeout=10)
        finally:
            await db.close()

    asyncio.run(scenario())


def test_a_write_waits_for_the_lock_longer_than_one_slice_of_its_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The thread waits for the lock in slices (so that a cancel can end the wait): a lock held
    for many slices is still waited out, and the write runs once it is free."""
    monkeypatch.setattr(sqlite_loop, "WAIT_SLICE_MS", 10)

    async def scenario() -> None:
        async with waiting_for_another_writer(tmp_path / "ledger.db") as (db, write, other):
            # twenty slices and more pass: the write neither ran nor gave up ("locked")
            finished, _ = await asyncio.wait({write}, timeout=0.2)
            assert not finished
            other.execute("COMMIT")
            await write
            await db.commit()
            async with db.query("SELECT token FROM sync_tokens") as rows:
                assert [row.token for row in await rows.fetchall()] == ["t"]

    asyncio.run(scenario())


def test_a_write_cancelled_while_it_waits_for_the_lock_ends_at_once_and_the_next_one_runs(
    tmp_path: Path,
) -> None:
    """A cancel (a shutdown, a timeout) of a write that waits in its thread ends the wait while
    the other writer still holds the lock (a shutdown does not wait out SQLite's 30 s timeout).
    The thread's statement ends before the rollback runs (the connection is never used by two
    threads at once), nothing of it stays, and the database goes on working."""

    async def scenario() -> None:
        async with waiting_for_another_writer(tmp_path / "ledger.db") as (db, write, other):
            write.cancel()
            finished, _ = await asyncio.wait({write}, timeout=10)  # a bound, not a pace
            assert write in finished
            assert write.cancelled()
            assert other.in_transaction  # the lock was held all along
            assert not db._connection.in_transaction()  # rolled back
            other.execute("COMMIT")
            await db.execute(
                "INSERT INTO sync_tokens (account, token) VALUES (?, ?)", ("@b:localhost", "2")
            )
            await db.commit()
            async with db.query("SELECT account FROM sync_tokens") as rows:
                assert [row.account for row in await rows.fetchall()] == ["@b:localhost"]

    asyncio.run(scenario())


def test_a_wait_for_the_lock_leaves_asyncios_thread_pool_free(tmp_path: Path) -> None:
    """A statement waiting for another writer's lock waits in a thread of its own pool, so the
    work asyncio's default pool runs (recall, embedding) goes on meanwhile."""

    async def scenario() -> None:
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
        async with waiting_for_another_writer(tmp_path / "ledger.db") as (db, write, other):
            recall = asyncio.ensure_future(asyncio.to_thread(lambda: "recalled"))
            finished, _ = await asyncio.wait({recall}, timeout=10)  # a bound, not a pace
            assert recall in finished
            assert not write.done()  # the control: the write was waiting all along
            other.execute("COMMIT")
            await write
            await db.commit()

    asyncio.run(scenario())


def test_an_sqlalchemy_write_cancelled_twice_while_it_waits_for_the_lock_ends_cleanly(
    tmp_path: Path,
) -> None:
    """A stop, then the shutdown's cancel of every task: the second cancel still waits for
    the thread's statement to end before SQLAlchemy closes the connection it ran on (a close
    under a running statement crashed the process), and the engine goes on working."""

    async def scenario() -> None:
        path = tmp_path / "sessions.db"
        async with engine_waiting_for_another_writer(path, "cut") as (engine, writing, other):
            writing.cancel()
            await asyncio.sleep(0)
            writing.cancel()
            finished, _ = await asyncio.wait({writing}, timeout=10)  # a bound, not a pace
            assert writing in finished
            assert writing.cancelled()
            assert other.in_transaction  # the lock was held all along
            other.execute("COMMIT")
            async with engine.begin() as conn:
                await conn.execute(text("INSERT INTO said (words) VALUES ('next')"))
            assert await said(engine) == ["next"]

    asyncio.run(scenario())


def test_a_write_holding_a_read_snapshot_waits_for_the_lock_without_spinning(
    tmp_path: Path,
) -> None:
    """SQLite skips its own wait for a connection that holds a read snapshot (it could
    deadlock): the thread then pauses between tries itself, and once the other writer
    commits, the stale snapshot is an error (its transaction has to start again)."""

    async def scenario() -> None:
        path = tmp_path / "ledger.db"
        sqlite = await sqlite_loop.LoopSqlite.open(path)
        other = sqlite3.connect(path, isolation_level=None)
        try:
            sqlite.db.execute("CREATE TABLE said (words TEXT)")
            sqlite.db.commit()
            tries = 0

            def insert() -> None:
                nonlocal tries
                tries += 1
                sqlite.db.execute("INSERT INTO said (words) VALUES ('late')")

            sqlite.db.execute("BEGIN")
            sqlite.db.execute("SELECT count(*) FROM said").fetchall()  # a snapshot held
            other.execute("BEGIN IMMEDIATE")
            waiting = asyncio.ensure_future(sqlite.run(insert))
            finished, _ = await asyncio.wait({waiting}, timeout=0.3)
            assert not finished  # still waiting for the lock...
            assert 1 < tries < 30  # ...tried again now and then, not thousands of times
            other.execute("INSERT INTO said (words) VALUES ('first')")
            other.execute("COMMIT")
            with pytest.raises(sqlite3.OperationalError) as stale:
                await waiting
            assert stale.value.sqlite_errorcode == sqlite3.SQLITE_BUSY_SNAPSHOT
            sqlite.db.rollback()
        finally:
            other.close()
            await sqlite.close()

    asyncio.run(scenario())


def test_a_cancelled_open_ends_while_another_writer_still_holds_the_lock(
    tmp_path: Path,
) -> None:
    """Opening switches the file to WAL, which needs the lock; a cancel (a shutdown) ends the
    retries at once rather than after the 30 s they may take."""
    path = tmp_path / "old.db"
    with contextlib.closing(sqlite3.connect(path)) as made:  # a rollback-journal file
        made.execute("CREATE TABLE said (words TEXT)")
        made.commit()

    async def scenario() -> None:
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            opening = asyncio.ensure_future(sqlite_loop.LoopSqlite.open(path))
            await seen_waiting(opening)  # the control
            opening.cancel()
            finished, _ = await asyncio.wait({opening}, timeout=10)  # a bound, not a pace
            assert opening in finished
            assert opening.cancelled()
            assert other.in_transaction
        finally:
            other.close()

    asyncio.run(scenario())


def test_a_migration_that_fails_midway_leaves_nothing_and_says_which_statement(
    tmp_path: Path,
) -> None:
    """A version's statements and its record commit together (the sqlite3 module would run
    each DDL statement in a transaction of its own): a failure leaves no table of it and no
    record, and the error names the statement; fixed, the version runs whole."""
    path = tmp_path / "store.db"
    broken = Migration(1, ("CREATE TABLE a (x)", "CREATE TABLE b (x) oops"))

    async def scenario() -> None:
        with pytest.raises(DatabaseError, match=r"(?s)sqlite3\.OperationalError.*CREATE TABLE b"):
            await Database.open(path, [broken])
        with contextlib.closing(sqlite3.connect(path)) as db:
            tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        assert "a" not in tables
        assert "schema_migrations" not in tables or not _versions(path)
        fixed = Migration(1, ("CREATE TABLE a (x)", "CREATE TABLE b (x)"))
        await (await Database.open(path, [fixed])).close()
        assert _versions(path) == {1}
        with contextlib.closing(sqlite3.connect(path)) as done:
            tables = {row[0] for row in done.execute("SELECT name FROM sqlite_master")}
        assert {"a", "b"} <= tables

    asyncio.run(scenario())


def test_a_checkpoint_never_makes_a_file_that_was_erased_meanwhile(tmp_path: Path) -> None:
    """The checkpoint runs later, in a thread: a person's store erased before it runs stays
    gone (SQLite would create a missing file it is asked to open)."""
    gone = tmp_path / "erased.db"
    sqlite_loop._checkpoint(gone)
    assert not gone.exists()
    kept = tmp_path / "kept.db"  # the control: an existing file is checkpointed
    with contextlib.closing(sqlite3.connect(kept)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA wal_autocheckpoint = 0")
        db.execute("CREATE TABLE said (words BLOB)")
        db.execute("INSERT INTO said VALUES (?)", (b"x" * 200_000,))
        db.commit()
        assert kept.stat().st_size < 100_000
        sqlite_loop._checkpoint(kept)
        assert kept.stat().st_size > 200_000


def test_an_sqlalchemy_engine_on_sqlite_takes_an_isolation_level_as_on_aiosqlite(
    tmp_path: Path,
) -> None:
    """``isolation_level`` (on the engine or a connection's execution options) reaches the
    connection: under AUTOCOMMIT a write is in the file at once; by default it waits for its
    commit."""

    async def scenario() -> None:
        path = tmp_path / "sessions.db"
        plain = sqlite_engine(path)
        autocommit = sqlite_engine(path, isolation_level="AUTOCOMMIT")
        try:
            async with plain.begin() as conn:
                await conn.execute(text("CREATE TABLE said (words TEXT)"))
            for engine, words in ((plain, "held"), (autocommit, "at once")):
                async with engine.connect() as conn:
                    await conn.execute(text("INSERT INTO said (words) VALUES (:w)"), {"w": words})
                    with contextlib.closing(sqlite3.connect(path)) as other:
                        seen = [row[0] for row in other.execute("SELECT words FROM said")]
                    assert seen == ([] if engine is plain else ["at once"])
            async with plain.connect() as conn:
                chosen = await conn.execution_options(isolation_level="AUTOCOMMIT")
                await chosen.execute(text("INSERT INTO said (words) VALUES ('chosen')"))
            assert await said(plain) == ["at once", "chosen"]
        finally:
            await plain.dispose()
            await autocommit.dispose()

    asyncio.run(scenario())
