"""The delta header: a thread's next recall starts with what changed in memory since its last
turn (at most three bullets, each change once per thread, only what the agent may see)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from mindroom.config.schema import Config
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.consent import WriteConsent
from mindroom.memory.policy.view import AgentView
from mindroom.memory.search import delta as delta_module
from mindroom.memory.search.delta import ThreadRevisions
from mindroom.memory.search.recall import RecallSettings, build_recall

SEEDED = WriteConsent.confirmed()  # test data stands for facts stored with consent

HEAD = "Memory changes since your last turn here"


@pytest.fixture
def memory(file_memory: FileMemory) -> FileMemory:
    return file_memory


def _recall(
    memory: FileMemory, thread: str, *, count: bool = True, access: CategoryAccess | None = None
) -> str:
    return build_recall(
        memory,
        "hello there",
        RecallSettings(),
        now=dt.datetime(2026, 11, 25, 12),
        thread=thread,
        count=count,
        access=access,
    )


def test_changes_since_a_threads_last_turn_head_its_next_recall_once(memory: FileMemory) -> None:
    assert HEAD not in _recall(memory, "t1")  # the first turn sets the revision
    memory.add_sync(
        "Alice's preferred name is Ana",
        actor="flush",
        fields=EntryFields(category="profile", importance=2),
        consent=SEEDED,
    )
    second = _recall(memory, "t1")
    third = _recall(memory, "t1")
    assert f"{HEAD} (revision 0 to 1):" in second
    assert "- +created: [profile] Alice's preferred name is Ana (importance 2)" in second
    assert second.index(HEAD) < second.index("Your memory")  # the first lines of the block
    assert HEAD not in third  # surfaced once


def test_each_thread_sees_each_change_once_and_its_own_writes_are_not_repeated(
    memory: FileMemory,
) -> None:
    _recall(memory, "t1")
    _recall(memory, "t2")
    entry = memory.add_sync("Ship v1 by August", actor="tool", run="t1")
    memory.update_sync(entry.id, "Ship v1 by September", actor="cli")
    one = _recall(memory, "t1")
    two = _recall(memory, "t2")
    assert "↑updated: [general] Ship v1 by September" in one
    assert "+created" not in one  # t1 wrote it itself
    assert "+created: [general] Ship v1 by September" in two  # once, as it is now
    assert "August" not in two


def test_at_most_three_bullets_newest_first(memory: FileMemory) -> None:
    _recall(memory, "t1")
    for n in range(5):
        memory.add_sync(f"fact number {n}", actor="flush")
    block = _recall(memory, "t1")
    bullets = [line for line in block.splitlines() if line.startswith("- +created")]
    assert bullets == [f"- +created: [general] fact number {n}" for n in (4, 3, 2)]
    assert "(revision 0 to 5)" in block


def test_a_preview_does_not_advance_and_hidden_categories_are_not_told(
    memory: FileMemory,
) -> None:
    _recall(memory, "t1")
    memory.add_sync(
        "Alice lives in Lyon",
        actor="flush",
        fields=EntryFields(category="profile"),
        consent=SEEDED,
    )
    memory.add_sync("Alice must file taxes", actor="flush", fields=EntryFields(category="tasks"))
    config = Config.model_validate({"memory": {"allowlists": {}}})
    planner = CategoryAccess.of(config, None)
    limited = CategoryAccess(planner.owner, frozenset({"tasks"}), planner.default, planner.rules)
    preview = _recall(memory, "t1", count=False, access=limited)
    assert "Alice must file taxes" in preview
    assert "Lyon" not in preview
    again = _recall(memory, "t1")  # the preview did not count as seen
    assert "Alice lives in Lyon" in again


def test_two_turns_racing_on_one_thread_surface_a_change_once(
    memory: FileMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    _recall(memory, "t1")
    memory.add_sync("Bob joined the team", actor="flush")
    view = AgentView(memory, CategoryAccess.everything())
    first, second = ThreadRevisions(memory), ThreadRevisions(memory)
    real = delta_module._read_since
    others: list[int] = []
    racing = [True]

    def the_other_turn_goes_first(path: Path, offset: int) -> object:
        found = real(path, offset)
        if racing.pop() if racing else False:  # between this turn's read and its move
            others.append(len(second.take("t1", view).bullets))
        return found

    monkeypatch.setattr(delta_module, "_read_since", the_other_turn_goes_first)
    try:
        mine = first.take("t1", view)
    finally:
        first.close()
        second.close()
    assert others == [1]  # the other turn showed it
    assert mine.bullets == []  # and this one, which lost the race, does not again


def test_a_threads_revisions_stay_open_with_the_memory_and_close_with_it(
    memory: FileMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn's recall reuses the scope's open ``deltas.db`` (no open and close per turn); a
    file deleted since is opened again, and closing the memory closes it."""
    opened: list[Path] = []
    real_open = delta_module.open_store
    monkeypatch.setattr(
        delta_module,
        "open_store",
        lambda path, schema: opened.append(path) or real_open(path, schema),
    )
    _recall(memory, "t1")
    _recall(memory, "t2")
    _recall(memory, "t1")
    assert len(opened) == 1  # one connection for every turn
    kept = delta_module.thread_revisions(memory)
    (memory.scope.state_dir / "deltas.db").unlink()  # control state: may be deleted
    memory.add_sync("Bob joined the team", actor="flush")
    assert HEAD not in _recall(memory, "t1")  # a new file: the thread starts over
    reopened = delta_module.thread_revisions(memory)
    assert reopened is not kept
    memory.close()
    with pytest.raises(Exception, match="closed"):
        reopened.take("t1", AgentView(memory, CategoryAccess.everything()))
