"""Per-person resources of a private companion are bounded and released.

Every person who talks to a private companion has a session database (an SQLAlchemy engine on
aiosqlite: a thread and three descriptors per connection) and a memory index (an SQLite
connection: three descriptors). These tests count the process's real descriptors and threads
while many distinct people talk to a private agent through the real runtime, registry, Agno and
SQLite; only the model is the scripted server.
"""

from __future__ import annotations

import asyncio
import errno
import os
import resource
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest
from mindroom.app.resources import exhaustion_message, private_instance_limit
from mindroom.config import parse_config
from mindroom.memory.policy.consent import WriteConsent
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import config_text
from tests.support.scripted_model import ScriptedModel, all_text
from tests.support.waiting import wait_until

SEEDED = WriteConsent.confirmed()  # test data stands for facts stored with consent

FDS_PER_PERSON = 9  # session db, keyword index, vectors: each a database, -wal and -shm
BOT_FD_LIMIT = 160  # where, before the descriptors were bounded, the 22nd person got an error


def open_fds() -> list[str]:
    """Where every open descriptor of this process points."""
    targets = []
    for name in os.listdir("/proc/self/fd"):
        try:
            targets.append(os.readlink(f"/proc/self/fd/{name}"))
        except FileNotFoundError:  # the descriptor listdir itself used
            continue
    return targets


def fill_descriptors() -> list[int]:
    """Open /dev/null until the process's limit refuses one more (EMFILE); the descriptors."""
    fillers: list[int] = []
    refused = None
    while refused is None:
        try:
            fillers.append(os.open(os.devnull, os.O_RDONLY))
        except OSError as exc:
            refused = exc
    if refused.errno != errno.EMFILE:
        for fd in fillers:
            os.close(fd)
        raise refused
    return fillers


def person(i: int) -> str:
    return f"@person{i}:localhost"


class Runtime:
    """A runtime and registry over ``tmp_path`` for a private companion ``mind``."""

    def __init__(self, model: ScriptedModel, tmp_path: Path, cap: int | None) -> None:
        memory: dict[str, object] = {"auto_flush": {"enabled": False}}
        if cap is not None:
            memory["max_open_private_instances"] = cap
        text = config_text(
            model.base_url,
            {"mind": {"rooms": ["r"], "private": {"per": "user"}}},
            memory=memory,
        )
        self.config = parse_config(text, "config.yaml")
        self.storage = tmp_path
        self.registry = MemoryRegistry(self.config, tmp_path)
        self.runtime = AgentRuntime(self.config, tmp_path / "mindroom_data", self.registry)

    async def turn(self, requester: str, text: str = "hello") -> str:
        result = await self.runtime.run_turn(
            TurnRequest("mind", f"mind:!room:{requester}", requester, text)
        )
        assert result.ok, result.error
        return result.text

    def files_of(self, requester: str) -> list[str]:
        """Open descriptors on ``requester``'s private instance."""
        instance = self.registry.private_instance("mind", requester)
        assert instance is not None
        folder = str(instance.instance_dir) + os.sep
        return [t for t in open_fds() if t.startswith(folder)]

    async def close(self) -> None:
        await self.runtime.close()
        self.registry.close()


@pytest_asyncio.fixture
async def make_runtime(
    model: ScriptedModel, tmp_path: Path
) -> AsyncIterator[Callable[[int | None], Runtime]]:
    made: list[Runtime] = []

    def make(cap: int | None) -> Runtime:
        made.append(Runtime(model, tmp_path, cap))
        return made[-1]

    yield make
    for runtime in made:
        await runtime.close()


@pytest.mark.timeout(600)  # 64 real turns; slow on a loaded machine, and that is no failure
@pytest.mark.asyncio
async def test_descriptors_and_threads_stay_bounded_while_64_people_talk_to_a_companion(
    make_runtime: Callable[[int | None], Runtime], model: ScriptedModel
) -> None:
    # four times the cap: an instance that eviction leaves open (9 descriptors and a thread
    # each) would pass either bound long before the last person
    cap, people = 16, 64
    bench = make_runtime(cap)
    model.set_handler(lambda request: "noted")
    await bench.turn("@warmup:localhost")  # model connection, executor threads, shared stores
    base_fds, base_threads = len(open_fds()), threading.active_count()
    fd_bound = base_fds + cap * FDS_PER_PERSON + 12  # + evictions awaiting disposal, sockets
    thread_bound = base_threads + cap + 8  # + executor threads started later

    peak_fds, peak_threads = 0, 0
    for i in range(people):
        await bench.turn(person(i))
        peak_fds = max(peak_fds, len(open_fds()))
        peak_threads = max(peak_threads, threading.active_count())

    # positive control: the people really have their own state on disk, and some are open
    assert len(list((bench.storage / "private_instances").iterdir())) == people + 1
    assert bench.files_of(person(people - 1)), "the latest person's instance should be open"
    assert peak_fds <= fd_bound, f"{peak_fds} descriptors open (baseline {base_fds})"
    assert peak_threads <= thread_bound, f"{peak_threads} threads (baseline {base_threads})"
    # and once evictions are disposed, no more than the cap's worth are open
    await wait_until(
        lambda: len(open_fds()) <= base_fds + cap * FDS_PER_PERSON + 4,
    )


@pytest.mark.asyncio
async def test_a_person_whose_instance_was_closed_keeps_history_and_memory(
    make_runtime: Callable[[int | None], Runtime], model: ScriptedModel
) -> None:
    bench = make_runtime(2)
    alice = "@alice:localhost"
    model.set_handler(lambda request: "noted")
    await bench.turn(alice, "my cat is called Tom")
    memory = bench.registry.for_agent("mind", alice)
    assert memory is not None
    memory.add_sync("Alice's sister lives in Lisbon", actor="test", consent=SEEDED)
    assert bench.files_of(alice)  # positive control: her instance is open now

    for i in range(4):
        await bench.turn(person(i))
    await wait_until(lambda: not bench.files_of(alice))  # closed: nothing of hers is open

    model.clear()
    model.set_handler(lambda request: "Tom, and Lisbon")
    await bench.turn(alice, "what is my cat called and where does my sister live?")
    prompt = all_text(model.requests[-1])
    assert "my cat is called Tom" in prompt  # her session history, read back
    assert "Alice's sister lives in Lisbon" in prompt  # her memory, recalled
    assert "person0" not in prompt
    lines, _ = await bench.runtime.session_chat("mind", f"mind:!room:{alice}", alice, team=False)
    said = [line.text for line in lines]
    assert "my cat is called Tom" in said[0]
    assert "what is my cat called" in said[-2]


@pytest.mark.asyncio
async def test_a_session_store_in_use_by_a_turn_is_closed_only_after_the_turn(
    make_runtime: Callable[[int | None], Runtime], model: ScriptedModel
) -> None:
    bench = make_runtime(2)
    alice = "@alice:localhost"
    release = threading.Event()

    def answer(request: dict) -> str:
        if "slow question" in all_text(request):
            assert release.wait(30)
            return "slow answer"
        return "quick answer"

    model.set_handler(answer)
    slow = asyncio.create_task(bench.turn(alice, "a slow question"))
    try:
        await wait_until(lambda: any("slow question" in all_text(r) for r in model.requests))
        for i in range(4):  # alice is the least recently used now, and over the cap
            await bench.turn(person(i))
    finally:
        release.set()
    assert await slow == "slow answer"
    sessions = [t for t in bench.files_of(alice) if t.endswith("sessions.db")]
    assert sessions  # positive control: her store was still open for the end of her turn

    await bench.turn(person(5))  # more people come: now her store can go
    await wait_until(lambda: not bench.files_of(alice))
    lines, _ = await bench.runtime.session_chat("mind", f"mind:!room:{alice}", alice, team=False)
    assert [line.text for line in lines] == ["a slow question", "slow answer"]


@pytest.mark.asyncio
async def test_running_out_of_descriptors_is_reported_as_such_not_as_a_model_failure(
    make_runtime: Callable[[int | None], Runtime], model: ScriptedModel
) -> None:
    bench = make_runtime(4)
    model.set_handler(lambda request: "fine")
    await bench.turn("@warmup:localhost")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    highest = max(int(name) for name in os.listdir("/proc/self/fd"))
    fillers: list[int] = []
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, hard))
    try:
        fillers.extend(fill_descriptors())
        result = await bench.runtime.run_turn(
            TurnRequest("mind", "s", "@newcomer:localhost", "hello")
        )
    finally:
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert result.error is not None
    assert "ran out of open files" in result.error
    assert "model" not in result.error.split(":")[0]
    # positive control: with descriptors back, the same person is answered
    assert await bench.turn("@newcomer:localhost") == "fine"


def test_the_registry_keeps_only_the_most_recent_people_open_and_reopens_the_others(
    tmp_path: Path,
) -> None:
    config = parse_config(
        "models: {default: {id: x}}\n"
        "agents: {mind: {private: {per: user}}}\n"
        "memory: {max_open_private_instances: 3}\n",
        "config.yaml",
    )
    registry = MemoryRegistry(config, tmp_path)
    try:
        first = registry.for_agent("mind", person(0))
        assert first is not None
        first.add_sync("person0 keeps bees", actor="test")
        for i in range(1, 10):
            memory = registry.for_agent("mind", person(i))
            assert memory is not None
            memory.add_sync(f"person{i} keeps goats", actor="test")
        assert len(registry.open_private()) == 3
        assert not first.index.is_open  # the least recent were closed

        # whoever still holds a closed memory can use it; the person's next turn gets it back
        assert [h.entry.text for h in first.index.search("bees")] == ["person0 keeps bees"]
        again = registry.for_agent("mind", person(0))
        assert again is first  # the one still held: never two open copies of one scope
        assert registry.open_private()[-1] == first.scope_id
        assert len(registry.open_private()) == 3

        scope_id = first.scope_id
        del first, again, memory
        for i in range(1, 4):  # person0 is closed again, and nobody holds it now
            registry.for_agent("mind", person(i))
        assert scope_id not in registry.open_private()
        fresh = registry.for_agent("mind", person(0))
        assert fresh is not None
        assert [h.entry.text for h in fresh.index.search("bees")] == ["person0 keeps bees"]
    finally:
        registry.close()


def test_the_open_instance_cap_is_lowered_to_what_the_descriptor_limit_affords() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    assert private_instance_limit(64) == (
        64 if soft >= 64 * 2 * FDS_PER_PERSON else soft // 2 // FDS_PER_PERSON
    )
    resource.setrlimit(resource.RLIMIT_NOFILE, (BOT_FD_LIMIT, hard))
    try:
        limited = private_instance_limit(64)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert limited == BOT_FD_LIMIT // 2 // FDS_PER_PERSON == 8
    assert private_instance_limit(5) == 5 or soft < 5 * 2 * FDS_PER_PERSON


def test_a_failure_at_the_descriptor_limit_is_reported_as_running_out() -> None:
    assert exhaustion_message("Connection error.") is None  # not at the limit: not ours to say
    assert exhaustion_message(ValueError("bad answer")) is None
    emfile = OSError(errno.EMFILE, "Too many open files")
    try:
        raise RuntimeError("wrapped") from emfile
    except RuntimeError as exc:
        wrapped = exc
    assert "ran out of open files" in (exhaustion_message(wrapped) or "")
    away = exhaustion_message("(sqlite3.OperationalError) unable to open database file")
    assert away is not None
    assert away.startswith("mindroom could not open a database file")

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (len(open_fds()) + 4, hard))
    try:
        at_limit = exhaustion_message("Connection error.")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert at_limit is not None
    assert at_limit.startswith("mindroom ran out of open files")
    assert "Connection error." in at_limit


@pytest.mark.asyncio
async def test_reloading_the_config_reuses_the_learning_database(
    tmp_path: Path, model: ScriptedModel
) -> None:
    text = config_text(
        model.base_url, {"student": {"rooms": ["r"], "learning": True, "learning_mode": "agentic"}}
    )
    config = parse_config(text, "config.yaml")
    runtime = AgentRuntime(config, tmp_path / "mindroom_data", MemoryRegistry(config, tmp_path))
    model.set_handler(lambda request: "fine")
    learning_db = str(tmp_path / "agents" / "student" / "learning" / "student.db")
    try:
        for _ in range(5):
            runtime.set_config(parse_config(text, "config.yaml"))  # a hot reload
            result = await runtime.run_turn(TurnRequest("student", "s", "@u:localhost", "hi"))
            assert result.ok, result.error
        opened = [t for t in open_fds() if t == learning_db]
        assert len(opened) == 1  # one connection, not one per reload
    finally:
        await runtime.close()
