"""build_recall: the memory block put into every turn's context, gated by relevance."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.config.schema import Config
from mindroom.memory.files.store import FileMemory
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.recall import RecallSettings, build_recall
from mindroom.memory.search.relevance import Gate

NOW = dt.datetime(2024, 5, 3, 10, 30)
TODAY = "memory/2024-05-03.md"
YESTERDAY = "memory/2024-05-02.md"

# a lived-in memory: chatty entries made of common words (each is in three quarters of them),
# and a few specific ones
CHAT_WORDS = ["thanks", "good", "great", "day", "morning", "sounds", "nice", "night"]
CHATTY = [
    ", ".join(CHAT_WORDS[(n + k) % 8] for k in range(6)).capitalize() + "!" for n in range(24)
]
OLDER = {
    "memory/2024-04-20.md": ["Fixed the bike's rear brake", "Bought a violin for Emma"],
    "memory/2024-04-22.md": ["Emma started violin lessons with Mr Kovacs", *CHATTY[:12]],
    "memory/2024-04-25.md": ["Booked flights to Lisbon for June", *CHATTY[12:]],
}


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


def write_lines(memory: FileMemory, relative: str, lines: list[str]) -> None:
    write(memory, relative, "".join(f"- {line}\n" for line in lines))


def lived_in(memory: FileMemory) -> None:
    for relative, lines in OLDER.items():
        write_lines(memory, relative, lines)


SETTINGS = RecallSettings(max_entrypoint_lines=50, max_recent_lines=30, hits=3)


def recall(memory: FileMemory, query: str = "", label: str = "", **changes) -> str:
    settings = dataclasses.replace(SETTINGS, **changes)
    return build_recall(memory, query, settings, now=NOW, label=label)


def entry_lines(block: str) -> list[str]:
    return [line for line in block.splitlines() if line.startswith("- [")]


def test_empty_memory_gives_no_block(memory: FileMemory) -> None:
    assert recall(memory, "anything at all") == ""


def test_chit_chat_made_of_common_words_gets_no_memory(memory: FileMemory) -> None:
    lived_in(memory)
    write_lines(memory, YESTERDAY, ["Thanks for a great evening", "Good chat about the garden"])
    assert "Emma started violin lessons" in recall(memory, "when did Emma start violin?")

    for message in ("thanks!", "good morning", "ok sounds good", "have a great day", "what's up?"):
        assert recall(memory, message) == "", message


def test_yesterdays_file_is_not_injected_whole(memory: FileMemory) -> None:
    lived_in(memory)
    write_lines(
        memory,
        YESTERDAY,
        [
            "Dentist appointment went fine, next one in November",
            "Thanks for the great day",
            "Watered the tomatoes",
            "Called the insurance about the car",
        ],
    )
    block = recall(memory, "how did the dentist appointment go?")

    assert entry_lines(block) == [
        f"- [{YESTERDAY}:1] (2024-05-02) Dentist appointment went fine, next one in November"
    ]
    assert "### Recent (today and yesterday)" in block
    assert "Watered the tomatoes" not in block
    assert "### Yesterday" not in block


def test_recent_entries_are_ranked_and_budgeted_in_lines(memory: FileMemory) -> None:
    lived_in(memory)
    write_lines(memory, YESTERDAY, [f"kiwi jam batch {n}" for n in range(4)] + ["kiwi jam"])
    write_lines(memory, TODAY, ["mango"])

    block = recall(memory, "kiwi jam", max_recent_lines=3)

    lines = entry_lines(block)
    assert len(lines) == 3
    assert lines[0] == f"- [{YESTERDAY}:5] (2024-05-02) kiwi jam"  # the best match first
    assert "mango" not in block
    assert recall(memory, "kiwi jam", max_recent_lines=0) == ""


def test_an_entry_of_several_lines_counts_each_line(memory: FileMemory) -> None:
    lived_in(memory)
    write_lines(memory, YESTERDAY, ["kiwi jam"])
    write(memory, TODAY, "- kiwi jam in two lines <!-- m-0a0b0c0d -->\n  second line\n")

    assert len(entry_lines(recall(memory, "kiwi jam", max_recent_lines=2))) == 1
    assert "kiwi jam in two lines\nsecond line" in recall(memory, "kiwi jam", max_recent_lines=3)


def test_older_entries_are_limited_to_recall_hits(memory: FileMemory) -> None:
    lived_in(memory)
    for n in range(6):
        write_lines(memory, f"memory/2024-03-0{n + 1}.md", [f"kiwi harvest {n}", "filler text"])
    assert len(entry_lines(recall(memory, "kiwi harvest", hits=2))) == 2
    assert "### Related memories" not in recall(memory, "kiwi harvest", hits=0)


def test_entries_show_their_date_so_when_questions_can_be_answered(memory: FileMemory) -> None:
    lived_in(memory)
    write_lines(
        memory, "topics/travel.md", ["Flew to Lisbon on 12 March 2024", "Likes window seats"]
    )

    block = recall(memory, "When did I fix the bike?")
    assert "- [memory/2024-04-20.md:1] (2024-04-20) Fixed the bike's rear brake" in block
    block = recall(memory, "when did I fly to Lisbon?")
    assert "- [topics/travel.md:1] (2024-03-12) Flew to Lisbon on 12 March 2024" in block
    write_lines(memory, "topics/pets.md", ["The cat is called Miso"])
    assert "- [topics/pets.md:1] The cat is called Miso" in recall(memory, "cat's name?")


def test_a_day_named_in_the_message_brings_that_days_entries(memory: FileMemory) -> None:
    lived_in(memory)
    write_lines(memory, YESTERDAY, ["Watered the tomatoes", "Called the insurance"])

    block = recall(memory, "what did I do yesterday?")
    assert [line.split("] ", 1)[1] for line in entry_lines(block)] == [
        "(2024-05-02) Watered the tomatoes",
        "(2024-05-02) Called the insurance",
    ]
    april_20 = recall(memory, "what happened on 20 April?")
    assert "Fixed the bike's rear brake" in april_20
    assert "Bought a violin for Emma" in april_20
    assert "Emma started violin lessons" not in april_20


def test_memory_md_is_shown_as_it_is_and_never_searched_again(memory: FileMemory) -> None:
    lived_in(memory)
    write(memory, "MEMORY.md", "# About Alice\n\n- Alice prefers tea\n")
    write_lines(memory, "topics/drinks.md", ["Alice's tea is oolong"])

    block = recall(memory, "thanks!", label="agent general")
    assert block.startswith("<memory>\n")
    assert block.endswith("\n</memory>")
    assert "Your memory (agent general)" in block
    assert "### Long-term memory: MEMORY.md\n# About Alice\n\n- Alice prefers tea" in block
    assert "oolong" not in block

    block = recall(memory, "which tea does Alice like?")
    assert block.count("Alice prefers tea") == 1
    assert block.index("### Long-term memory") < block.index("- [topics/drinks.md:1]")


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


def test_memory_md_guidance_is_not_recalled_and_the_hint_reads_on_from_the_file_s_line(
    memory: FileMemory,
) -> None:
    guidance = "<!--\nGuidance for the person who edits this file.\n-->\n"
    facts = "".join(f"- fact number {n}\n" for n in range(1, 31))
    write(memory, "MEMORY.md", f"# About Alice\n\n{guidance}\n{facts}")
    assert "Guidance for the person" in memory.scope.entrypoint.read_text()  # the control

    block = recall(memory, max_entrypoint_lines=10)

    assert "Guidance for the person" not in block
    assert "<!--" not in block
    assert "### Long-term memory: MEMORY.md\n# About Alice\n\n- fact number 1\n" in block
    # 2 lines of the file and 8 facts shown; the hint reads from the 9th fact's line in the file
    marker = '[... 22 more lines not shown: read them with memory_get("MEMORY.md", 15, 22)]'
    assert f"- fact number 8\n{marker}" in block
    rest = memory.read_file_sync("MEMORY.md", 15, 22)
    assert rest.splitlines()[1].endswith("- fact number 9")
    assert "more lines after this" not in rest


def test_memory_md_of_exactly_the_cap_has_no_marker(memory: FileMemory) -> None:
    write(memory, "MEMORY.md", "".join(f"- fact {n}\n" for n in range(1, 11)))
    block = recall(memory, max_entrypoint_lines=10)
    assert "- fact 10" in block
    assert "more lines not shown" not in block


def test_the_block_fits_its_budget_relevant_entries_first(memory: FileMemory) -> None:
    write(memory, "MEMORY.md", "".join(f"- a long standing fact number {n}\n" for n in range(200)))
    lived_in(memory)

    block = recall(memory, "when did Emma start violin?", max_chars=1500)

    assert len(block) <= 1500
    assert "Emma started violin lessons with Mr Kovacs" in block
    shown = len(re.findall(r"^- a long standing fact", block, re.MULTILINE))
    assert 0 < shown < 200
    left = 200 - shown
    hint = f'[... {left} more lines not shown: read them with memory_get("MEMORY.md", {shown + 1}'
    assert hint in block
    assert len(recall(memory, "thanks", max_chars=1500)) <= 1500


def test_recall_follows_hand_edits(memory: FileMemory) -> None:
    write(memory, "topics/x.md", "- oolong tea\n- coffee\n- water\n")
    assert "oolong" in recall(memory, "tea")
    write(memory, "topics/x.md", "- jasmine tea now\n- coffee\n- water\n")
    block = recall(memory, "tea")
    assert "jasmine" in block
    assert "oolong" not in block


def test_a_big_memory_md_does_not_hide_related_memories_of_other_files(
    memory: FileMemory,
) -> None:
    lived_in(memory)
    write(memory, "MEMORY.md", "".join(f"- kiwi kiwi {n}\n" for n in range(12)))
    write(memory, "topics/fruit.md", "- the kiwi orchard in a topic file among other words\n")

    block = recall(memory, "kiwi orchard", hits=2)

    assert re.search(r"- \[topics/fruit\.md:1\] the kiwi orchard in a topic", block)


def test_the_gate_and_budgets_come_from_the_config() -> None:
    config = Config.model_validate(
        {
            "models": {"default": {"id": "m"}},
            "agents": {"general": {}},
            "memory": {
                "file": {
                    "max_daily_lines": 7,
                    "recall_hits": 2,
                    "recall_max_chars": 3000,
                    "recall_gate": {"rare_word_entries": 2, "min_similarity": 0.6},
                }
            },
        }
    )
    assert RecallSettings.of(config.memory.file) == RecallSettings(
        max_entrypoint_lines=200,
        max_recent_lines=7,
        hits=2,
        max_chars=3000,
        gate=Gate(rare_word_entries=2, min_similarity=0.6),
    )
    defaults = Config.model_validate({"models": {"default": {"id": "m"}}, "agents": {"a": {}}})
    assert RecallSettings.of(defaults.memory.file) == RecallSettings()
