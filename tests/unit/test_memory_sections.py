"""Where new memories go in a memory file, and what of a file a model reads: guidance for people
(HTML comments that are not part of an entry) never, the entries and their ids always."""

from __future__ import annotations

import datetime as dt
import random
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.memory.files.archive import archive_entry_sync
from mindroom.memory.files.lines import HIDDEN, head_of, masked_lines
from mindroom.memory.files.markdown import (
    NEW_MEMORIES_MARKER,
    append_entry,
    append_new_entry,
    entry_sections,
    normalize_text,
    parse_entries,
    render_entry,
    without_guidance,
)
from mindroom.memory.files.store import FileMemory
from mindroom.memory.scope import MemoryScope
from tests.support.harness import REPO

PATH = "MEMORY.md"
GUIDANCE = "Guidance like this note, inside the markers, is not a memory"
OLD_TEMPLATE = (  # MEMORY.md as the template scaffolded it before it had a section for new ones
    "# About you\n"
    "\n"
    "<!--\n"
    "This is what your companion remembers about you. It is yours: edit, add or delete anything.\n"
    "Guidance like this note, inside the markers, is not a memory.\n"
    "-->\n"
    "\n"
    "## Who you are\n"
    "\n"
    "## What matters to you\n"
    "\n"
    "## How you like to be helped\n"
)


def lines_of(document: str) -> list[str]:
    return re.findall(r"[^\n]*\n|[^\n]+$", document)


def sections(document: str) -> list[tuple[str, str | None]]:
    return [(entry.text, heading) for entry, heading in entry_sections(document, PATH)]


# -- where new memories go ---------------------------------------------------------------------


def test_new_memories_go_to_the_end_of_the_marked_section_not_under_the_last_heading() -> None:
    document = (
        "# About Alice\n"
        "\n"
        "## Noted\n"
        f"{NEW_MEMORIES_MARKER}\n"
        "- Alice likes tea\n"
        "\n"
        "## How Alice likes to be helped\n"
        "- short answers\n"
    )

    once = append_new_entry(document, "m-00000001", "Alice moved to Lyon")
    twice = append_new_entry(once, "m-00000002", "Alice plays\nthe violin")

    assert sections(twice) == [
        ("Alice likes tea", "## Noted"),
        ("Alice moved to Lyon", "## Noted"),
        ("Alice plays\nthe violin", "## Noted"),
        ("short answers", "## How Alice likes to be helped"),
    ]
    # only lines were added, right after the section's last line; the blank line stays
    added = render_entry("m-00000001", "Alice moved to Lyon")
    added += render_entry("m-00000002", "Alice plays\nthe violin")
    old = lines_of(document)
    assert lines_of(twice) == [*old[:5], *(line + "\n" for line in added), *old[5:]]


def test_the_marker_may_be_a_comment_of_several_lines_with_more_words() -> None:
    document = (
        "## Notes\n"
        "\n"
        "<!-- Mindroom: new memories below. What your companion learns is added at the end of\n"
        "this section. -->\n"
        "\n"
        "## Later\n"
    )
    written = append_new_entry(document, "m-00000001", "a fact")
    assert sections(written) == [("a fact", "## Notes")]
    assert written.count("## Notes") == 1


def test_the_marker_under_no_heading_ends_its_section_at_the_next_heading() -> None:
    document = f"{NEW_MEMORIES_MARKER}\n- first\n### Anything\n- other\n"
    written = append_new_entry(document, "m-00000001", "second")
    assert sections(written) == [("first", None), ("second", None), ("other", "### Anything")]


def test_a_sub_heading_inside_the_marked_section_belongs_to_it() -> None:
    document = f"## Notes\n{NEW_MEMORIES_MARKER}\n### Work\n- a\n\n## Other\n- b\n"
    written = append_new_entry(document, "m-00000001", "new")
    assert sections(written) == [("a", "### Work"), ("new", "### Work"), ("b", "## Other")]


def test_a_file_of_an_old_template_gets_a_notes_section_once_and_keeps_its_bytes() -> None:
    once = append_new_entry(OLD_TEMPLATE, "m-00000001", "Alice likes tea")
    twice = append_new_entry(once, "m-00000002", "Alice moved to Lyon")

    assert twice.startswith(OLD_TEMPLATE)
    assert twice[len(OLD_TEMPLATE) :] == (
        f"\n## Notes\n{NEW_MEMORIES_MARKER}\n"
        "- Alice likes tea <!-- m-00000001 -->\n"
        "- Alice moved to Lyon <!-- m-00000002 -->\n"
    )
    assert sections(twice) == [
        ("Alice likes tea", "## Notes"),
        ("Alice moved to Lyon", "## Notes"),
    ]


@pytest.mark.parametrize(
    "document",
    [
        "",
        "- a\n",
        "no final newline",
        "# My notes\n- a\n",  # a title only: the whole file is under it
        "# Me\n\n## Notes\n- a\n",  # a Notes section already ends it
        "---\ntitle: x\n---\n- a\n",
    ],
)
def test_where_the_end_is_a_fine_place_a_new_memory_is_appended_as_before(document: str) -> None:
    assert append_new_entry(document, "m-00000001", "x") == append_entry(
        document, "m-00000001", "x"
    )


def test_a_file_of_top_level_sections_gets_a_top_level_notes_section() -> None:
    written = append_new_entry("# Work\n- a\n# Home\n- b", "m-00000001", "x")
    assert written == "# Work\n- a\n# Home\n- b\n\n# Notes\n" + NEW_MEMORIES_MARKER + "\n" + (
        "- x <!-- m-00000001 -->\n"
    )


def test_a_marker_inside_a_code_block_or_an_entry_is_not_a_marker() -> None:
    document = (
        f"## Code\n```\n{NEW_MEMORIES_MARKER}\n```\n"
        f"- a hand-written line that quotes {NEW_MEMORIES_MARKER}\n"
    )
    written = append_new_entry(document, "m-00000001", "x")
    assert written.startswith(document)
    assert sections(written)[-1] == ("x", "## Notes")


def test_an_insert_keeps_an_indented_heading_after_it_apart() -> None:
    # "  ## Later" would read as a continuation line of an entry written right above it
    document = f"## Notes\n{NEW_MEMORIES_MARKER}\n  ## Later\n- b\n"
    written = append_new_entry(document, "m-00000001", "x\ny")
    assert sections(written) == [("x\ny", "## Notes"), ("b", "## Later")]
    assert written == (
        f"## Notes\n{NEW_MEMORIES_MARKER}\n- x <!-- m-00000001 -->\n  y\n\n  ## Later\n- b\n"
    )


def test_an_insert_takes_the_line_ending_of_the_line_before_it() -> None:
    document = f"## Notes\r\n{NEW_MEMORIES_MARKER}\r\n- a\r\n\r\n## Later\r\n"
    written = append_new_entry(document, "m-00000001", "x")
    assert written == (
        f"## Notes\r\n{NEW_MEMORIES_MARKER}\r\n- a\r\n- x <!-- m-00000001 -->\r\n\r\n## Later\r\n"
    )


def test_append_new_entry_refuses_a_taken_id_and_empty_text() -> None:
    with pytest.raises(ValueError, match="already"):
        append_new_entry("- a <!-- m-00000001 -->\n", "m-00000001", "b")
    with pytest.raises(ValueError, match="empty"):
        append_new_entry(OLD_TEMPLATE, "m-00000001", " \n ")


def test_the_template_has_a_section_for_new_memories() -> None:
    template = (REPO / "mind_template" / "MEMORY.md").read_text(encoding="utf-8")
    written = append_new_entry(template, "m-00000001", "Alice likes tea")
    assert written.startswith(template)  # its section is the last one: nothing is inserted
    assert sections(written) == [("Alice likes tea", "## Notes")]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[FileMemory]:
    root = tmp_path / "workspace"
    root.mkdir()
    opened = FileMemory(MemoryScope("agent_test", root, tmp_path / "state"))
    yield opened
    opened.close()


def test_the_store_adds_and_restores_into_the_section_for_new_memories(
    memory: FileMemory,
) -> None:
    document = f"# Me\n\n## Notes\n{NEW_MEMORIES_MARKER}\n\n## Later\n- b\n"
    memory.scope.entrypoint.write_text(document, encoding="utf-8")

    added = memory.add_sync("a fact", actor="agent")
    memory.append_unique_sync("another fact", actor="flush", path="MEMORY.md")
    expected = [("a fact", "## Notes"), ("another fact", "## Notes"), ("b", "## Later")]
    assert sections(memory.scope.entrypoint.read_text(encoding="utf-8")) == expected

    memory.delete_sync(added.id, actor="agent")
    memory.restore_sync(added.id, actor="person")
    expected = [("another fact", "## Notes"), ("a fact", "## Notes"), ("b", "## Later")]
    assert sections(memory.scope.entrypoint.read_text(encoding="utf-8")) == expected

    # archived (the archive file keeps its own order) and restored: into the section again
    other = memory.find(memory.entries_of("MEMORY.md")[0].id)
    moved = archive_entry_sync(
        memory, other, into=None, why="test", actor="consolidation", today=dt.date(2026, 1, 2)
    )
    assert moved
    memory.restore_sync(other.id, actor="person")
    expected = [("a fact", "## Notes"), ("another fact", "## Notes"), ("b", "## Later")]
    assert sections(memory.scope.entrypoint.read_text(encoding="utf-8")) == expected


PIECES = [
    "",
    "## Section",
    "  ## Indented heading",
    "# Title",
    "<!-- a note -->",
    "<!--\nguidance over\nseveral lines\n-->",
    NEW_MEMORIES_MARKER,
    "- a hand-written line",
    "plain text",
    "- bullet\n    deeper continuation",
    "```\ncode <!-- x -->\n```",
    "- mindroom <!-- m-0000aaaa -->",
    "- multi <!-- m-0000bbbb -->\n  second line",
    "<!-- left open",
    "```",
]


@pytest.mark.parametrize("seed", range(300))
def test_random_documents_keep_every_line_and_entry_when_a_memory_is_added(seed: int) -> None:
    rng = random.Random(seed)
    pieces = [rng.choice(PIECES) for _ in range(rng.randint(0, 10))]
    unique = iter(range(1000))
    pieces = [p.replace("m-0000", f"m-{next(unique):04x}") for p in pieces]
    document = "".join(p + rng.choice(["\n", "\n", "\r\n"]) for p in pieces)
    if document and rng.random() < 0.2:
        document = document.rstrip("\r\n")
    before = [(e.id, e.text) for e in parse_entries(document, PATH)]
    text = rng.choice(["new fact", "two\nlines", "a fact\n  indented"])

    written = append_new_entry(document, "m-ffffffff", text)

    after = [(e.id, e.text) for e in parse_entries(written, PATH)]
    assert ("m-ffffffff", normalize_text(text)) in after
    assert [pair for pair in after if pair[0] != "m-ffffffff"] == before
    old = [line.rstrip("\r\n") for line in lines_of(document)]
    new = [line.rstrip("\r\n") for line in lines_of(written)]
    kept = next((n for n, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), len(old))
    assert new[len(new) - (len(old) - kept) :] == old[kept:]  # only lines were added, together
    # the lines before the new ones keep their bytes (the last one may gain a line ending)
    assert written.startswith("".join(lines_of(document)[:kept]).rstrip("\r\n"))


# -- what a model reads ------------------------------------------------------------------------


def test_guidance_comments_are_taken_out_of_what_a_model_reads_entries_stay() -> None:
    document = (
        "# About you <!-- a heading's own note -->\n"
        "<!--\n"
        "guidance over\n"
        "several lines\n"
        "-->\n"
        "<!-- one line -->\n"
        "- Alice likes tea <!-- m-00000001 category=preferences -->\n"
        "- a person's line <!-- their own aside -->\n"
        "```html\n"
        "<!-- code, not a comment -->\n"
        "```\n"
    )
    assert without_guidance(document) == [
        "# About you",
        None,
        None,
        None,
        None,
        None,
        "- Alice likes tea <!-- m-00000001 category=preferences -->",
        "- a person's line <!-- their own aside -->",
        "```html",
        "<!-- code, not a comment -->",
        "```",
    ]
    # the ids are still read from the same text
    assert [e.id for e in parse_entries(document, PATH)][0] == "m-00000001"


def test_an_unclosed_comment_does_not_hide_the_entries_after_it() -> None:
    document = "<!-- left open\n- kept <!-- m-00000001 -->\nnot a comment -->\n"
    assert without_guidance(document) == [
        None,
        "- kept <!-- m-00000001 -->",
        "not a comment -->",
    ]


def test_a_read_shows_guidance_as_empty_lines_with_the_file_s_line_numbers() -> None:
    document = "# T\n<!--\nsecret guidance\n-->\n- tea <!-- m-00000001 -->\n- coffee\n"
    lines = masked_lines(document, PATH, lambda e: e.text == "coffee")
    assert lines == ["# T", "", "", "", "- tea <!-- m-00000001 -->", HIDDEN]


def test_the_head_of_the_template_has_no_guidance_and_numbers_lines_as_the_file() -> None:
    template = (REPO / "mind_template" / "MEMORY.md").read_text(encoding="utf-8")
    assert GUIDANCE in template  # the control: the file has it
    document = append_new_entry(template, "m-00000001", "Alice likes tea")

    head = head_of(document, PATH, 100)

    shown = "\n".join(line for _, line in head.lines)
    assert "<!--" not in shown.replace("<!-- m-00000001 -->", "")
    assert GUIDANCE not in shown
    assert "mindroom: new memories below" not in shown
    assert "\n\n\n" not in shown  # a removed comment leaves no doubled empty line
    assert "- Alice likes tea <!-- m-00000001 -->" in shown
    numbers = dict((line, n) for n, line in head.lines)
    assert numbers["- Alice likes tea <!-- m-00000001 -->"] == len(lines_of(document))
    assert head.total == len(lines_of(document))
    assert head.readable == len(head.lines)


def test_the_head_leaves_out_hidden_entries_and_stops_at_max_lines() -> None:
    document = "<!-- note -->\n- a\n- b\n- c\n- d\n"
    head = head_of(document, PATH, 2, hide=lambda e: e.text == "b")
    assert head.lines == [(2, "- a"), (4, "- c")]
    assert (head.readable, head.total) == (3, 5)
