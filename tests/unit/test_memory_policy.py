"""The read gate's rule, pure (:mod:`mindroom.memory.policy.gate`): an allow-list over an entry's
state, category and type, its store filter agreeing with it, and where private memory may be
used. The paths that use it are tested in ``tests/unit/test_read_gate.py``."""

from __future__ import annotations

from mindroom.config.schema import Config
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.gate import (
    EntryState,
    Reader,
    RoomAudience,
    StoredEntry,
    may_read,
    private_memory_allowed,
)

WORD = "zorblax"


def planner_access() -> CategoryAccess:
    config = Config.model_validate({"memory": {"allowlists": {}}})
    base = CategoryAccess.of(config, None)
    return CategoryAccess("planner", frozenset({"general", "tasks"}), base.default, base.rules)


def test_the_gate_is_an_allow_list_over_state_category_and_type() -> None:
    planner = Reader("planner", frozenset({"general", "tasks"}))
    live = StoredEntry("tasks", "semantic", EntryState.LIVE)
    assert may_read(planner, live)
    assert may_read(planner, StoredEntry(None, "semantic", EntryState.LIVE))  # the default
    assert not may_read(planner, StoredEntry("health", "semantic", EntryState.LIVE))
    assert not may_read(planner, StoredEntry("tasks", "procedural", EntryState.LIVE))
    asked = Reader("planner", frozenset({"tasks"}), deliberate=frozenset({"procedural"}))
    assert may_read(asked, StoredEntry("tasks", "procedural", EntryState.LIVE))
    assert not may_read(planner, StoredEntry("tasks", "someday", EntryState.LIVE))  # unknown
    for state in (EntryState.EXPIRED, EntryState.ARCHIVED, EntryState.DELETED):
        assert not may_read(planner, StoredEntry("tasks", "semantic", state))
    assert may_read(Reader(None, None), StoredEntry("health", "insight", EntryState.LIVE))


def test_private_memory_only_where_the_person_alone_can_read() -> None:
    alice, bob = "@alice:localhost", "@bob:localhost"
    assert private_memory_allowed(alice, RoomAudience.private_to(alice))
    assert not private_memory_allowed(alice, RoomAudience.private_to(bob))
    assert not private_memory_allowed(alice, RoomAudience.shared(frozenset({alice, bob})))
    assert not private_memory_allowed(alice, RoomAudience())  # unknown: deny


def test_the_store_filter_agrees_with_the_gate(file_memory: FileMemory) -> None:
    for n, category in enumerate(["general", "tasks", "health", "procedural", None]):
        file_memory.add_sync(
            f"entry {n} {WORD}", actor="cli", fields=EntryFields(category=category)
        )
    reader = planner_access().reader()
    every = file_memory.list_sync(100)
    by_filter = {e.id for e in file_memory.list_sync(100, reader.filter())}
    by_gate = {e.id for e in every if may_read(reader, StoredEntry.of(e))}
    assert by_filter == by_gate
    assert 0 < len(by_gate) < len(every)
