"""Fixtures: one Synapse for the whole session, one scripted model server, per-test bots."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from mindroom.adapters.embeddings import Embedder
from mindroom.adapters.embeddings.select import shared_embedder
from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from mindroom.memory.files.store import FileMemory
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.index import MemoryIndex
from tests.support.dashboard import browser, dashboard  # noqa: F401 (fixtures)
from tests.support.harness import BotHarness, BotProcess, CredentialCache, Human
from tests.support.postgres import PostgresServer, binaries
from tests.support.reaper import pytest_configure  # noqa: F401 (hook: no process outlives the run)
from tests.support.scripted_model import ScriptedModel

os.environ["AGNO_TELEMETRY"] = "false"
# The tests must never reach a real model or homeserver by accident.
for _var in (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "MATRIX_HOMESERVER",
    "MATRIX_REGISTRATION_SHARED_SECRET",
    "MINDROOM_MODEL",
):
    os.environ.pop(_var, None)


# Tests measured at more than about 20 s on the loaded 2-core CI machine, by file. They are
# marked here, not in their files, so the list is one place to keep current; test_ci.py checks
# every name still exists. `pytest -m "not slow"` skips them while working; CI runs everything.
SLOW = {
    "test_exactly_once.py": {"test_kill_9_between_receipt_and_reply_answers_once_after_restart"},
    "test_catch_up.py": {
        "test_messages_sent_while_down_are_answered_once",
        "test_messages_older_than_the_catch_up_window_are_skipped_with_a_log_line",
    },
    "test_catch_up_backlog.py": {"test_a_backlog_larger_than_one_sync_is_answered_in_full"},
    "test_flush_restart.py": {
        "test_killed_during_extraction_the_session_is_flushed_once_after_restart"
    },
    "test_local.py": {"test_local_default_runs_and_the_terminal_chat_gets_an_answer"},
}


# The fixtures that start a server (the homeserver, the scripted model's HTTP server, PostgreSQL;
# ``ledger_target`` asks for PostgreSQL when its turn comes). A test whose fixtures need one of
# them, directly or through another (``bot``, ``human``, ``model``, ``dashboard`` ...), is an
# integration test; tests/unit holds none of those.
SERVER_FIXTURES = frozenset({"synapse", "model_server", "postgres", "ledger_target"})
# The fixture that loads a real neural model (the bundled embedder, once a process): its tests are
# integration tests too, and tests/unit loads no model (tests/unit/conftest.py).
MODEL_FIXTURES = frozenset({"local_embedder"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark ``slow`` from :data:`SLOW`, ``integration`` (and ``synapse``) from the fixtures a
    test uses and the folder it is in; a test in tests/unit that needs a server or a model
    stops the run."""
    misplaced = []
    for item in items:
        name = getattr(item, "originalname", item.name)
        if name in SLOW.get(item.path.name, ()):
            item.add_marker(pytest.mark.slow)
        servers = (SERVER_FIXTURES | MODEL_FIXTURES).intersection(getattr(item, "fixturenames", ()))
        if "synapse" in servers:
            item.add_marker(pytest.mark.synapse)
        if servers or item.path.parent.name == "integration":
            item.add_marker(pytest.mark.integration)
        if servers and item.path.parent.name == "unit":
            misplaced.append(f"  {item.nodeid}: {', '.join(sorted(servers))}")
    if misplaced:
        raise pytest.UsageError(
            "tests in tests/unit that need a server or a model (move them to tests/integration):\n"
            + "\n".join(misplaced)
        )


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedHomeserver]:
    """A real Synapse on loopback (free port, SQLite), shared by every test of the session.

    It runs on its own event loop: tests each get a fresh loop, the homeserver outlives them.
    """
    homeserver = EmbeddedHomeserver(tmp_path_factory.mktemp("synapse"), port=0)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(homeserver.start())
    try:
        yield homeserver
    finally:
        loop.run_until_complete(homeserver.stop())
        loop.close()


def _load_local_embedder() -> Embedder | None:
    embedder = shared_embedder(None, Path.cwd())
    if embedder is not None:
        embedder.embed(["load the model"])
    return embedder


_local_embedder = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="embedder-load")
_local_embedder_loaded: concurrent.futures.Future[Embedder | None] | None = None


def _start_loading_the_local_embedder() -> concurrent.futures.Future[Embedder | None]:
    global _local_embedder_loaded
    if _local_embedder_loaded is None:
        _local_embedder_loaded = _local_embedder.submit(_load_local_embedder)
    return _local_embedder_loaded


@pytest.hookimpl(tryfirst=True, wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """A test that uses :func:`local_embedder` starts once the model has loaded: the load (a
    minute or more on a loaded machine, with every worker importing torch) is not charged to
    the first test's timeout, whose timer pytest-timeout starts inside this wrapper. Waiting is
    bounded: after 10 minutes the test runs, and its timeout speaks.

    The load starts here, when the first such test is due, never earlier beside other tests:
    a thread importing torch while a test runs changes ``sys.modules`` under whatever iterates
    it (the warnings machinery does, between tests: "dictionary changed size during
    iteration")."""
    if "local_embedder" in getattr(item, "fixturenames", ()):
        concurrent.futures.wait([_start_loading_the_local_embedder()], timeout=600)
    return (yield)


@pytest.fixture
def local_embedder() -> Embedder:
    """The bundled all-MiniLM-L6-v2, loaded once per process (importing torch and loading take
    ~7 s of CPU). The same process-wide instance the product uses for an unconfigured
    ``memory.embedder``.

    It loads in a thread of its own: a test whose timeout ends the wait fails alone, and can
    neither leave torch half-imported nor the failure cached for the tests after it.
    """
    embedder = _start_loading_the_local_embedder().result()
    if embedder is None:
        pytest.fail("mindroom[embeddings] is not installed; the README's test command installs it")
    return embedder


@pytest.fixture(scope="session")
def model_server() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


@pytest.fixture
def model(model_server: ScriptedModel) -> Iterator[ScriptedModel]:
    """The scripted model, emptied for this test."""
    model_server.clear()
    yield model_server
    model_server.clear()


@pytest.fixture(scope="session")
def credential_cache(tmp_path_factory: pytest.TempPathFactory) -> CredentialCache:
    return CredentialCache(tmp_path_factory.mktemp("creds") / "credentials.json")


@pytest_asyncio.fixture
async def bot(
    synapse: EmbeddedHomeserver, tmp_path: Path, credential_cache: CredentialCache
) -> AsyncIterator[BotHarness]:
    harness = BotHarness(synapse, tmp_path / "storage", credential_cache)
    yield harness
    await harness.stop()


@pytest.fixture
def bot_process(
    synapse: EmbeddedHomeserver, tmp_path: Path, credential_cache: CredentialCache
) -> Iterator[BotProcess]:
    process = BotProcess(synapse, tmp_path / "storage", credential_cache)
    yield process
    if process.proc is not None and process.proc.poll() is None:
        process.proc.kill()
        process.proc.wait()


@pytest_asyncio.fixture
async def human(synapse: EmbeddedHomeserver) -> AsyncIterator[Human]:
    person = await Human.create(synapse)
    yield person
    await person.close()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A memory scope's workspace folder (empty)."""
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def index(tmp_path: Path, root: Path) -> Iterator[MemoryIndex]:
    """The keyword index of ``root``, its database outside the workspace."""
    idx = MemoryIndex(tmp_path / "state" / "index.db", root)
    yield idx
    idx.close()


@pytest.fixture
def file_memory(tmp_path: Path, root: Path) -> Iterator[FileMemory]:
    """The file memory of an agent scope on ``root``, its state outside the workspace."""
    memory = FileMemory(MemoryScope("agent_test", root, tmp_path / "state"))
    yield memory
    memory.close()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL server for the session (skipped without the binaries, except in CI)."""
    if binaries() is None:
        if os.environ.get("CI"):
            pytest.fail("no PostgreSQL binaries: .ci/run installs Debian's postgresql package")
        pytest.skip("no PostgreSQL binaries (apt-get install postgresql)")
    folder = Path(tempfile.mkdtemp(prefix="mindroom-pg-"))  # /tmp: the postgres user reaches it
    server = PostgresServer(folder).start()
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_target(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Each of the ledger's databases in turn: a SQLite file, then a new PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "ledger.db"
    server: PostgresServer = request.getfixturevalue("postgres")
    return server.database()
