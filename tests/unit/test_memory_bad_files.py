"""One bad file in a memory folder (not UTF-8, a symlink) costs that file, not the memory."""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.errors import MemoryStoreError
from mindroom.memory.files.store import FileMemory
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.recall import RecallSettings, build_recall

NOW = dt.datetime(2024, 5, 3, 10, 30)
TODAY = "memory/2024-05-03.md"
LATIN1 = "- Café au lait every morning\n".encode("latin-1")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[FileMemory]:
    root = tmp_path / "workspace"
    (root / "memory").mkdir(parents=True)
    mem = FileMemory(MemoryScope("agent_bad", root, tmp_path / "state"))
    yield mem
    mem.close()


def recall(memory: FileMemory, query: str = "tea") -> str:
    settings = RecallSettings(max_entrypoint_lines=50, max_recent_lines=30, hits=3)
    return build_recall(memory, query, settings, now=NOW)


def with_bad_files(memory: FileMemory, tmp_path: Path) -> None:
    root = memory.scope.root
    (root / "MEMORY.md").write_text("- Alice drinks green tea\n", encoding="utf-8")
    (root / TODAY).write_bytes(LATIN1)  # today's daily file, saved as Latin-1
    (root / "topics.md").write_bytes(b"- Bob \xff\xfe likes tea\n")
    outside = tmp_path / "elsewhere.md"
    outside.write_text("- a file outside the memory folder\n", encoding="utf-8")
    (root / "memory" / "2024-05-02.md").symlink_to(outside)  # yesterday: a link out
    (root / "memory" / "loop.md").symlink_to(root / "memory" / "loop.md")


def test_recall_keeps_memory_md_when_other_files_are_not_utf8_or_symlinked(
    memory: FileMemory, tmp_path: Path
) -> None:
    with_bad_files(memory, tmp_path)

    block = recall(memory)

    assert "Alice drinks green tea" in block  # MEMORY.md is recalled
    assert "outside the memory folder" not in block  # a link out is not memory


def test_recall_keeps_the_daily_files_when_memory_md_is_a_link_out(
    memory: FileMemory, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere.md"
    outside.write_text("- a secret outside the memory folder\n", encoding="utf-8")
    (memory.scope.root / "MEMORY.md").symlink_to(outside)
    (memory.scope.root / TODAY).write_text("- Standup moved to 9:30\n", encoding="utf-8")

    block = recall(memory, "standup")

    assert "Standup moved to 9:30" in block
    assert "secret" not in block


def test_a_bad_file_is_logged_once_not_on_every_turn(
    memory: FileMemory, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with_bad_files(memory, tmp_path)
    caplog.set_level(logging.WARNING)

    for _ in range(3):
        recall(memory)
        memory.list_sync()

    skipped = [r.getMessage() for r in caplog.records if "skipping" in r.getMessage()]
    assert len([m for m in skipped if TODAY in m]) == 1
    assert len([m for m in skipped if "topics.md" in m]) == 1


@pytest.mark.asyncio
async def test_list_memories_lists_the_readable_files_and_names_no_absolute_path(
    memory: FileMemory, tmp_path: Path
) -> None:
    with_bad_files(memory, tmp_path)
    tools = MemoryTools(memory)

    listed = await tools.list_memories()
    read = await tools.memory_get(TODAY)

    assert "Alice drinks green tea" in listed
    assert not listed.startswith("error:")
    assert read.startswith("error:")  # the bad file itself: a clear error
    assert "not UTF-8" in read
    assert TODAY in read
    assert str(tmp_path) not in read
    assert str(tmp_path) not in listed


@pytest.mark.timeout(60)
def test_a_fifo_named_like_a_memory_file_is_refused_not_waited_on(memory: FileMemory) -> None:
    os.mkfifo(memory.scope.root / "memory" / "2024-05-01.md")
    (memory.scope.root / "MEMORY.md").write_text("- Alice drinks green tea\n", encoding="utf-8")

    with pytest.raises(MemoryStoreError, match="not a regular file"):
        memory.add_sync("x", actor="t", path="memory/2024-05-01.md")
    with pytest.raises(MemoryStoreError, match="2024-05-01.md"):
        memory.read_file_sync("memory/2024-05-01.md")
    assert "Alice drinks green tea" in recall(memory)
