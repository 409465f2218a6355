"""Edits people make to memory files by hand show in the history, and restore covers them.

Real files, the real watcher (watchfiles) and the sync function the bot gives it
(``MemoryRegistry.sync_changed``), and the CLI as a subprocess (``python -m mindroom memory``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mindroom.cli.main import main
from mindroom.config import load_config
from mindroom.dashboard.scopes import deleted
from mindroom.memory.files.archive import archive_entry_sync
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.markdown import hand_id
from mindroom.memory.files.restore import set_fields_sync
from mindroom.memory.files.store import FileMemory, NewEntry
from mindroom.memory.files.watch import watch_memory_files
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.scope import agent_scope
from mindroom.people.erasure import ErasureGate
from tests.support.waiting import wait_until

REPO = Path(__file__).resolve().parents[2]
HAND = "person (hand edit)"
HEALTH = EntryFields(category="health", importance=5, pinned=True)


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    shutil.copy(REPO / "config.yaml", path)
    shutil.copytree(REPO / "mind_template", tmp_path / "mind_template")
    return path


def cli(config: Path, action: str, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mindroom", "memory", action, "--config", str(config)]
    return subprocess.run(
        [*command, "--agent", "general", *args],
        capture_output=True,
        text=True,
        cwd=config.parent,
        env=dict(os.environ),
        timeout=120,
        check=False,
    )


def editor_save(path: Path, text: str) -> None:
    """How most editors save: a new file renamed over the old one."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def without(path: Path, *fragments: str) -> str:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    return "".join(line for line in lines if not any(f in line for f in fragments))


def ops(memory: FileMemory, entry_id: str) -> list[tuple[str, str]]:
    return [(r.actor, r.op) for r in memory.history_of(entry_id)]


@pytest.mark.asyncio
async def test_a_line_deleted_by_hand_is_recorded_by_the_watcher_and_restored_by_the_cli(
    config: Path,
) -> None:
    registry = MemoryRegistry(load_config(config), config.parent)
    memory = registry.for_agent("general")
    assert isinstance(memory, FileMemory)
    kept = memory.add_sync("Alice walks at seven", actor="test")
    gone = memory.add_sync("Alice takes insulin", actor="test", fields=HEALTH)
    path = memory.scope.root / "MEMORY.md"
    with path.open("a", encoding="utf-8") as handle:
        handle.write("- Clara is Alice's sister\n")
    control = memory.scope.root / "topics" / "control.md"
    control.parent.mkdir(parents=True, exist_ok=True)
    control.write_text("- control line 0\n", encoding="utf-8")
    memory.index.sync()  # what the index knew before the person's edit (the bot's first search)
    hand = next(e for e in memory.entries_of("MEMORY.md") if e.hand_written)

    stop = asyncio.Event()
    watcher = asyncio.create_task(
        watch_memory_files([registry.roots_parent()], registry.sync_changed, stop, 50)
    )
    try:
        # positive control: the watcher follows a hand edit of another file (saved again until
        # it is seen, since the watcher starts watching at its own pace)
        saves = iter(range(1, 10_000))

        def control_seen() -> bool:
            editor_save(control, f"- control line {next(saves)}\n")
            return any(r.path == "topics/control.md" for r in memory.history_of())

        await wait_until(control_seen, timeout=30)
        editor_save(path, without(path, "insulin", "Clara"))
        await wait_until(lambda: (HAND, "delete") in ops(memory, hand.id), timeout=30)
        await wait_until(lambda: (HAND, "delete") in ops(memory, gone.id), timeout=30)
    finally:
        stop.set()
        await watcher
    assert ops(memory, gone.id) == [("test", "add"), (HAND, "delete")]
    assert ops(memory, kept.id) == [("test", "add")]  # untouched, and its add recorded once
    registry.close()

    restored = cli(config, "restore", gone.id)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert restored.stdout.startswith(f"restored {gone.id}  MEMORY.md:")
    back = cli(config, "restore", hand.id)
    assert back.returncode == 0, back.stdout + back.stderr
    memory = FileMemory(agent_scope(config.parent, "general"))
    try:
        entry = memory.find(gone.id)
        assert (entry.text, entry.fields.category, entry.fields.importance) == (
            "Alice takes insulin",
            "health",
            5,
        )
        assert entry.fields.pinned
        texts = [e.text for e in memory.entries_of("MEMORY.md")]
        assert "Clara is Alice's sister" in texts
    finally:
        memory.close()


def test_history_names_a_hand_edit_once_and_the_bots_own_write_as_the_bots(
    config: Path,
) -> None:
    registry = MemoryRegistry(load_config(config), config.parent)
    memory = registry.for_agent("general")
    assert isinstance(memory, FileMemory)
    try:
        entry = memory.add_sync("Alice plays chess in Lyon", actor="test", fields=HEALTH)
        memory.index.sync()
        path = memory.scope.root / "MEMORY.md"
        text = path.read_text(encoding="utf-8")
        editor_save(path, text.replace("Lyon", "Paris").replace("importance=5", "importance=2"))

        registry.sync_changed({path})  # what the watcher calls
        registry.sync_changed({path})  # again: nothing new to record
        memory.update_sync(entry.id, "Alice plays chess in Nice", actor="tool")  # the bot's write
        registry.sync_changed({path})
    finally:
        registry.close()

    history = cli(config, "history", entry.id)

    assert history.returncode == 0, history.stderr
    lines = history.stdout.splitlines()
    assert len(lines) == 3, history.stdout
    assert HAND in lines[1]
    assert "update" in lines[1]
    assert "'Alice plays chess in Lyon' -> 'Alice plays chess in Paris'" in lines[1]
    assert "tool" in lines[2]
    assert HAND not in lines[2]
    memory = FileMemory(agent_scope(config.parent, "general"))
    try:
        person = [r for r in memory.history_of(entry.id) if r.actor == HAND]
    finally:
        memory.close()
    meta = person[0].meta or {}
    assert meta["fields"].startswith("category=health importance=2 pinned")
    assert meta["old_fields"].startswith("category=health importance=5 pinned")


def test_an_edit_made_while_mindroom_was_down_is_recorded_once_at_the_next_start(
    config: Path,
) -> None:
    scope = agent_scope(config.parent, "general")
    memory = FileMemory(scope)
    entry = memory.add_sync("Bob's birthday is in May", actor="test")
    memory.index.sync()
    memory.close()
    path = scope.root / "MEMORY.md"
    editor_save(path, without(path, "birthday"))  # while nothing runs

    for _ in range(2):  # two starts: the deletion is recorded by the first only
        memory = FileMemory(scope)
        try:
            memory.index.sync()
            records = ops(memory, entry.id)
        finally:
            memory.close()
        assert records == [("test", "add"), (HAND, "delete")]
    memory = FileMemory(scope)
    try:
        gone = deleted(memory)  # what the dashboard lists to restore
    finally:
        memory.close()
    assert [(g["id"], g["text"]) for g in gone] == [(entry.id, "Bob's birthday is in May")]


def test_memory_delete_removes_through_the_store_and_restore_brings_it_back(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    memory = FileMemory(agent_scope(config.parent, "general"))
    try:
        entry = memory.add_sync("Carol prefers tea", actor="test", fields=HEALTH)
    finally:
        memory.close()

    def run(action: str, *args: str) -> tuple[int, str]:
        code = main(["memory", action, "--config", str(config), "--agent", "general", *args])
        return code, capsys.readouterr().out

    code, out = run("delete", entry.id)
    assert code == 0, out
    assert out.startswith(f"deleted {entry.id}  MEMORY.md:")
    assert run("get", entry.id)[0] == 1
    code, out = run("delete", "m-00000000")
    assert code == 1
    assert "no memory with id 'm-00000000'" in out

    code, out = run("restore", entry.id)
    assert code == 0, out
    memory = FileMemory(agent_scope(config.parent, "general"))
    try:
        back = memory.find(entry.id)
        assert (back.text, back.fields.category, back.fields.pinned) == (
            "Carol prefers tea",
            "health",
            True,
        )
        assert ops(memory, entry.id) == [("test", "add"), ("cli", "delete"), ("cli", "restore")]
    finally:
        memory.close()


def test_mindrooms_own_writes_of_every_kind_are_never_taken_for_hand_edits(
    config: Path,
) -> None:
    memory = FileMemory(agent_scope(config.parent, "general"))
    path = memory.scope.root / "MEMORY.md"
    try:
        first = memory.add_sync("Dana likes figs", actor="tool")
        memory.index.sync()
        with path.open("a", encoding="utf-8") as handle:
            handle.write("- Dana's dog is Rex\n")
        memory.index.sync()  # the person's line: recorded (positive control, below)
        line = next(e for e in memory.entries_of("MEMORY.md") if e.hand_written)
        steps = [
            lambda: memory.append_unique_sync("Dana runs", actor="flush", path="MEMORY.md"),
            lambda: memory.update_sync(first.id, "Dana loves figs", actor="tool"),
            lambda: memory.update_sync(line.id, "Dana's dog is Rex, a collie", actor="tool"),
            lambda: set_fields_sync(
                memory,
                hand_id("MEMORY.md", "Dana's dog is Rex, a collie"),
                EntryFields(category="pets"),
                actor="cli",
            ),
            lambda: archive_entry_sync(
                memory,
                memory.find(first.id),
                into=None,
                why="test",
                actor="consolidation",
                today=dt.date(2026, 11, 27),
            ),
            lambda: memory.restore_sync(first.id, actor="cli"),
            lambda: memory.add_many_sync(
                "memory/2026-11-27.md",
                [NewEntry("Dana flew to Oslo", entry_id="h-00000000"), NewEntry("a second")],
                actor="import",
            ),
            lambda: memory.delete_sync(first.id, actor="tool"),
            lambda: memory.restore_sync(first.id, actor="cli"),
        ]
        for step in steps:
            step()
            memory.index.sync()
        records = memory.history_of()
        editor_save(path, without(path, "Dana runs"))
        memory.index.sync()
        after = memory.history_of()
    finally:
        memory.close()

    by_hand = [(r.op, r.id) for r in records if r.actor == HAND]
    assert by_hand == [("add", line.id)]  # the person's own line, and nothing of mindroom's
    assert [(r.actor, r.op) for r in after[len(records) :]] == [(HAND, "delete")]


def test_a_crash_while_a_file_is_reindexed_records_no_hand_edit_and_loses_no_later_one(
    config: Path,
) -> None:
    """A re-index drops a file's rows and its signature in one step before it reads the file
    again; killed right there, the next run finds the file unknown to the index and takes none
    of its entries for a person's edit (a half-written baseline would read as every entry
    added or removed by hand), and indexes it again. A hand deletion after that is still
    recorded (the control)."""
    memory = FileMemory(agent_scope(config.parent, "general"))
    try:
        kept = memory.add_sync("Alice plays chess on Mondays", actor="tool")
        doomed = memory.add_sync("Alice plays go on Fridays", actor="tool")
        memory.index.sync()
        memory.index._drop("MEMORY.md")  # the crash point: dropped, not yet indexed again
    finally:
        memory.close()

    memory = FileMemory(agent_scope(config.parent, "general"))
    try:
        memory.index.sync()  # the restart's first read
        assert [r for r in memory.history_of(kept.id) if r.actor == HAND] == []
        assert memory.index.count() == 2  # indexed again, not left out under an old signature
        path = memory.scope.root / "MEMORY.md"
        text = path.read_text(encoding="utf-8")
        editor_save(path, "".join(x for x in text.splitlines(True) if doomed.id not in x))
        memory.index.sync()
        recorded = [r for r in memory.history_of(doomed.id) if r.actor == HAND]
    finally:
        memory.close()
    assert [(r.op, r.old) for r in recorded] == [("delete", "Alice plays go on Fridays")]


@pytest.mark.asyncio
async def test_a_re_index_after_a_hand_edit_waits_while_a_forget_me_runs(tmp_path: Path) -> None:
    """The watcher's re-index reads open memories and writes their index: with the bot's
    erasure gate it never runs beside a forget-me (mindroom.people.erasure)."""
    gate = ErasureGate()
    seen: list[set[Path]] = []
    root = tmp_path / "agents" / "general" / "workspace"
    root.mkdir(parents=True)
    stop = asyncio.Event()
    watcher = asyncio.create_task(
        watch_memory_files([tmp_path / "agents"], seen.append, stop, 50, gate=gate)
    )
    try:
        saves = iter(range(1, 10_000))

        def control_seen() -> bool:  # the watcher starts watching at its own pace
            editor_save(root / "MEMORY.md", f"- control line {next(saves)}\n")
            return bool(seen)

        await wait_until(control_seen, timeout=30)
        before = len(seen)
        async with gate.erasing():
            editor_save(root / "notes.md", "- an edit during the erasure\n")
            await wait_until(lambda: gate.held_back == 1, "the re-index waits", timeout=30)
            assert len(seen) == before
        await wait_until(lambda: any(root / "notes.md" in s for s in seen[before:]), timeout=30)
    finally:
        stop.set()
        await watcher
