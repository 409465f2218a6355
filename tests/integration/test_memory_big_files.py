"""A big memory file is indexed in the background, and a search does not wait for it:
it searches what is indexed and says the index is catching up. Correctness,
not timings (bench/big_memory_file.py measures those): what is at the end of a big file is
found once indexing finished, and an edit made while it was indexed is not lost.

Real files, real SQLite, the real index; a 4 MB daily file (about 27,000 entries).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.memory.files.store import FileMemory
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.index import MemoryIndex
from tests.support.big_memory import daily_entries

BIG = 4_000_000
DAILY = "memory/2026-11-01.md"


def write_big(root: Path, last: str) -> Path:
    path = root / DAILY
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(daily_entries(BIG) + f"- {last} <!-- m-ffffffff -->\n")
    return path


def caught_up(index: MemoryIndex, timeout: float = 120.0) -> None:
    """Wait (a condition: the background sync reports it is done) until the index follows
    the files."""
    deadline = time.monotonic() + timeout
    while not index.sync_within(0.5):
        assert time.monotonic() < deadline, "the index never caught up"


def texts(index: MemoryIndex, query: str) -> list[str]:
    return [hit.entry.text for hit in index.search(query, 5, synced=True)]


def test_a_search_during_indexing_answers_and_the_end_of_a_big_file_is_found_after(
    index: MemoryIndex, root: Path
) -> None:
    write_big(root, "Zoltan keeps the spare key under the blue flowerpot")

    first = index.sync_within(0)  # the caller does not wait: the work goes on in a thread
    during = texts(index, "flowerpot")
    caught_up(index)
    after = texts(index, "flowerpot")

    assert first is False  # the first call did not wait ...
    assert index.catching_up is False  # ... and the last one found the index caught up
    assert during == []  # not indexed yet: the search answered with what there was
    assert after == ["Zoltan keeps the spare key under the blue flowerpot"]
    assert index.count() == len(daily_entries(BIG).splitlines()) + 1  # every entry, once


def test_an_edit_made_while_a_big_file_is_indexed_is_not_lost(
    index: MemoryIndex, root: Path
) -> None:
    path = write_big(root, "Yolanda parks in bay 17")

    assert index.sync_within(0) is False  # indexing has started and is not done
    edited = path.read_text().replace("Yolanda parks in bay 17", "Yolanda parks in bay 42")
    path.write_text(edited + "- Xavier moved to Porto <!-- m-eeeeeeee -->\n")
    caught_up(index)

    assert texts(index, "Yolanda") == ["Yolanda parks in bay 42"]  # the edit, not the old text
    assert texts(index, "Porto") == ["Xavier moved to Porto"]  # the line added meanwhile
    assert texts(index, "note 7 about") != []  # the control: the file's other entries are there
    # the same as indexing the files from scratch
    fresh = MemoryIndex(root.parent / "fresh.db", root)
    try:
        fresh.rebuild()
        assert fresh.snapshot() == index.snapshot()
    finally:
        fresh.close()


@pytest.mark.asyncio
async def test_search_memories_answers_during_indexing_says_it_is_catching_up_then_finds_all(
    tmp_path: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_big(root, "Wilhelmina stores the boat keys in the red tin")
    (root / "MEMORY.md").write_text("- Wilhelmina likes sailing on Sundays\n")
    # the big file is still being indexed when the search asks, however fast the machine (a
    # search waits up to SEARCH_WAIT_SECONDS for a big file, and 4 MB can take less)
    released = threading.Event()
    write_file = MemoryIndex._write_file

    def held_big_file(index: MemoryIndex, relative: str, path: Path, stat: os.stat_result) -> None:
        if relative == DAILY:
            released.wait(60)
        write_file(index, relative, path, stat)

    monkeypatch.setattr(MemoryIndex, "_write_file", held_big_file)
    memory = FileMemory(MemoryScope("agent_big", root, tmp_path / "state"))
    tools = MemoryTools(memory)
    try:
        during = await tools.search_memories("Wilhelmina")
        released.set()
        memory.index.sync()  # waits for the background pass, then follows anything left
        after = await tools.search_memories("Wilhelmina")
    finally:
        released.set()
        memory.close()

    assert "still catching up" in during  # it answered before the big file was indexed
    assert "red tin" not in during
    assert "sailing on Sundays" in during  # what was indexed (the small file) was searched
    assert "catching up" not in after  # the control: the same search, once the index is done
    assert "red tin" in after
