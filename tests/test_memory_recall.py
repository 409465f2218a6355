"""build_recall: the memory block put into every turn's context."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.memory.recall import build_recall
from mindroom.memory.scope import MemoryScope
from mindroom.memory.store import FileMemory

NOW = dt.datetime(2024, 5, 3, 10, 30)
TODAY = "memory/2024-05-03.md"
YESTERDAY = "memory/2024-05-02.md"


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[FileMemory]:
    root = tmp_path / "workspace"
    root.mkdir()
    mem = FileMemory(MemoryScope("agent_test", root, tmp_path / "state"))
    yield mem
    mem.close()


def write(memory: FileMemory, relative: str, text: str) -> None:
    path = memory.scope.root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def recall(memory: FileMemory, query: str = "", **kwargs) -> str:
    options = {"max_entrypoint_lines": 50, "max_daily_lines": 30, "hits": 3, "now": NOW}
    return build_recall(memory, query, **{**options, **kwargs})


def test_empty_memory_gives_no_block(memory: FileMemory) -> None:
    assert recall(memory, "anything at all") == ""


def test_blank_files_and_no_search_hits_give_no_block(memory: FileMemory) -> None:
    write(memory, "MEMORY.md", "\n\n   \n")
    write(memory, TODAY, "\n")
    write(memory, "topics/x.md", "- kiwi\n")
    assert recall(memory, "mango") == ""


def test_block_is_delimited_and_names_memory_md_today_and_yesterday(memory: FileMemory) -> None:
    write(memory, "MEMORY.md", "- Alice prefers tea\n")
    write(memory, TODAY, "- met Bob for lunch\n")
    write(memory, YESTERDAY, "- fixed the bike\n")
    write(memory, "memory/2024-05-01.md", "- two days ago\n")

    block = recall(memory, "", label="agent general")

    assert block.startswith("<memory>\n")
    assert block.endswith("\n</memory>")
    assert "Your memory (agent general)" in block
    long_term = block.index("### Long-term memory: MEMORY.md\n- Alice prefers tea")
    today = block.index(f"### Today: {TODAY}\n- met Bob for lunch")
    yesterday = block.index(f"### Yesterday: {YESTERDAY}\n- fixed the bike")
    assert long_term < today < yesterday
    assert "two days ago" not in block


def test_yesterday_of_new_year_is_the_last_day_of_the_old_year(memory: FileMemory) -> None:
    write(memory, "memory/2023-12-31.md", "- new year's eve party\n")
    block = recall(memory, now=dt.datetime(2024, 1, 1, 0, 5))
    assert "### Yesterday: memory/2023-12-31.md\n- new year's eve party" in block


def test_missing_sections_are_left_out(memory: FileMemory) -> None:
    write(memory, TODAY, "- only today\n")
    block = recall(memory)
    assert "### Today" in block
    assert "### Long-term memory" not in block
    assert "### Yesterday" not in block


def test_long_memory_md_is_capped_with_a_marker_and_a_correct_memory_get_hint(
    memory: FileMemory,
) -> None:
    write(memory, "MEMORY.md", "".join(f"- fact number {n}\n" for n in range(1, 31)))

    block = recall(memory, max_entrypoint_lines=10)

    assert "- fact number 10\n" in block
    assert "fact number 11" not in block
    marker = '[... 20 more lines not shown: read them with memory_get("MEMORY.md", 11, 20)]'
    assert f"- fact number 10\n{marker}" in block
    rest = memory.read_file_sync("MEMORY.md", 11, 20)
    assert rest.splitlines()[0] == "MEMORY.md (lines 11-30 of 30):"
    assert rest.splitlines()[1].endswith("- fact number 11")
    assert "more lines after this" not in rest  # the hint reads exactly what was left out


def test_memory_md_of_exactly_the_cap_has_no_marker(memory: FileMemory) -> None:
    write(memory, "MEMORY.md", "".join(f"- fact {n}\n" for n in range(1, 11)))
    block = recall(memory, max_entrypoint_lines=10)
    assert "- fact 10" in block
    assert "more lines not shown" not in block


def test_daily_files_are_capped_likewise(memory: FileMemory) -> None:
    write(memory, TODAY, "".join(f"- today {n}\n" for n in range(1, 8)))
    write(memory, YESTERDAY, "".join(f"- yesterday {n}\n" for n in range(1, 5)))

    block = recall(memory, max_daily_lines=3)

    assert "- today 3\n" in block
    assert "today 4" not in block
    assert f'[... 4 more lines not shown: read them with memory_get("{TODAY}", 4, 4)]' in block
    assert "- yesterday 3\n" in block
    assert "yesterday 4" not in block
    assert f'memory_get("{YESTERDAY}", 4, 1)' in block


def test_search_hits_come_only_from_other_files_and_are_limited(memory: FileMemory) -> None:
    write(memory, "MEMORY.md", "- kiwi in the long-term file\n")
    write(memory, TODAY, "- kiwi today\n")
    write(memory, YESTERDAY, "- kiwi yesterday\n")
    write(memory, "memory/2024-04-01.md", "- kiwi last month\n- unrelated\n")
    write(memory, "topics/fruit.md", "- mango\n- kiwi in a topic\n")
    write(memory, "topics/more.md", "- kiwi in another topic\n")
    write(memory, "topics/filler.md", "".join(f"- filler line {n}\n" for n in range(20)))

    block = recall(memory, "tell me about kiwi", hits=2)

    section = block.split("### Related memories (search)\n", 1)[1].split("\n\n", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("- [")]
    assert len(lines) == 2
    allowed = {
        "- [memory/2024-04-01.md:1] kiwi last month",
        "- [topics/fruit.md:2] kiwi in a topic",
        "- [topics/more.md:1] kiwi in another topic",
    }
    assert set(lines) <= allowed
    assert block.count("kiwi in the long-term file") == 1  # only in its own section
    assert block.count("kiwi today") == 1
    assert block.count("kiwi yesterday") == 1


def test_no_related_section_without_hits(memory: FileMemory) -> None:
    write(memory, "MEMORY.md", "- kiwi\n")
    write(memory, "topics/x.md", "- mango\n")
    assert "Related memories" not in recall(memory, "kiwi")
    assert "Related memories" not in recall(memory, "mango", hits=0)
    assert "- [topics/x.md:1] mango" in recall(memory, "mango", hits=1)


def test_recall_follows_hand_edits(memory: FileMemory) -> None:
    write(memory, "topics/x.md", "- oolong tea\n")
    assert "oolong" in recall(memory, "tea")
    write(memory, "topics/x.md", "- jasmine tea now\n")
    block = recall(memory, "tea")
    assert "jasmine" in block
    assert "oolong" not in block


def test_a_big_memory_md_does_not_hide_related_memories_of_other_files(
    memory: FileMemory,
) -> None:
    write(memory, "MEMORY.md", "".join(f"- kiwi kiwi {n}\n" for n in range(12)))
    write(memory, "topics/fruit.md", "- the kiwi in a topic file among other words\n")

    block = recall(memory, "kiwi", hits=2)

    assert re.search(r"- \[topics/fruit\.md:1\] the kiwi in a topic", block)
