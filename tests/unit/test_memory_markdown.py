"""The markdown memory format: parsing entries and minimal edits of hand-editable files."""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import re

import pytest

from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.markdown import (
    ENTRY_ID_RE,
    MemoryEntry,
    append_entry,
    hand_id,
    new_entry_id,
    normalize_text,
    parse_entries,
    remove_entry,
    render_entry,
    replace_entry,
)

PATH = "MEMORY.md"

TRICKY_TEXTS = [
    "Alice prefers tea over coffee",
    "🎉 party at 8 🥳 with 👩‍👩‍👧‍👦",
    "記憶は大切です。中文也可以。한국어",
    "שלום עולם and مرحبا بالعالم mixed with LTR",
    "**bold**, _italic_, [a link](https://example.com/a?b=1&c=2) and `code`",
    "# heading on the first line",
    "first line\n# heading on a continuation line",
    "first line\n- a list item on a continuation line\n* another\n1. numbered",
    "first line\n    starts with four spaces\n  two\n\ttab",
    "ends with a marker <!-- m-deadbeef -->",
    "two markers <!-- m-deadbeef --> <!-- m-cafebabe -->",
    "<!-- m-deadbeef --> at the start",
    "marker on a continuation line\n<!-- m-deadbeef -->\nand after <!-- m-0badf00d -->",
    "first\n- continuation ending in a marker <!-- m-deadbeef -->",
    "paragraph one\n\nparagraph two",
    "several\n\n\n\nblank lines\n\nin a row",
    "a blank line\n   \nthat is really spaces",
    "```python\nx = 1\n\ny = 2\n```",
    "---",
    "- starts like a bullet",
    "* * *",
    "1. numbered start",
    "> a quote\n> continued",
    "<!-- an html comment -->",
    "trailing spaces  \nhard break above",
    "tab\tin\tthe middle",
    "| a | b |\n|---|---|\n| 1 | 2 |",
    "    leading spaces are stripped",
    "windows\r\nline endings\r\n",
    "~~~\nfence\n~~~\n-->",
]

RANDOM_FIELDS = [
    EntryFields(),
    EntryFields(category="profile", importance=5, pinned=True),
    EntryFields(type="procedural", created=dt.date(2026, 1, 2), extra=("typo=x",)),
    EntryFields(state="soft_deleted", purge=dt.date(2027, 3, 1)),
]

SIMPLE_HAND_TEXTS = ["buy milk", "Bob's birthday is on May 3", "ünïcödé ✓", "x"]


def ids_and_texts(document: str, path: str = PATH) -> list[tuple[str, str]]:
    return [(e.id, e.text) for e in parse_entries(document, path)]


def lines_of(document: str) -> list[str]:
    """Lines with their endings, split at \\n only (as the module does)."""
    return re.findall(r"[^\n]*\n|[^\n]+$", document)


# -- ids, normalization, rendering ------------------------------------------------------------


def test_new_entry_ids_are_m_and_eight_random_hex() -> None:
    ids = {new_entry_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(ENTRY_ID_RE.fullmatch(i) for i in ids)


def test_entry_id_re_matches_only_mindroom_ids() -> None:
    assert ENTRY_ID_RE.fullmatch("m-0123abcd")
    assert not ENTRY_ID_RE.fullmatch("m-0123ABCD")
    assert not ENTRY_ID_RE.fullmatch("h-0123abcd")
    assert not ENTRY_ID_RE.fullmatch("m-0123abc")
    assert not ENTRY_ID_RE.search("m-0123abcde")
    assert ENTRY_ID_RE.search("see <!-- m-0123abcd -->").group() == "m-0123abcd"


def test_hand_id_is_sha256_of_path_nul_and_stripped_text() -> None:
    digest = hashlib.sha256(b"notes.md\0buy milk").hexdigest()[:8]
    assert hand_id("notes.md", "  buy milk\n") == "h-" + digest
    assert hand_id("other.md", "buy milk") != hand_id("notes.md", "buy milk")


def test_normalize_text_strips_and_unifies_line_endings() -> None:
    assert normalize_text("  a\r\nb\rc\n\n") == "a\nb\nc"
    assert normalize_text("inner  \n  spaces") == "inner  \n  spaces"


@pytest.mark.parametrize("text", ["", "   ", "\n\r\n\t"])
def test_normalize_text_rejects_empty_text(text: str) -> None:
    with pytest.raises(ValueError, match="empty"):
        normalize_text(text)


def test_render_entry_writes_marker_and_two_space_continuations() -> None:
    assert render_entry("m-0000abcd", "one\n\n  three") == [
        "- one <!-- m-0000abcd -->",
        "  ",
        "    three",
    ]


@pytest.mark.parametrize("bad", ["h-0000abcd", "m-XYZ", "m-0000abcd ", ""])
def test_render_entry_rejects_ids_that_are_not_mindroom_ids(bad: str) -> None:
    with pytest.raises(ValueError, match="not a mindroom entry id"):
        render_entry(bad, "text")


def test_memory_entry_knows_whether_it_is_hand_written() -> None:
    assert MemoryEntry("h-00000000", "t", PATH, 1, 1).hand_written
    assert not MemoryEntry("m-00000000", "t", PATH, 1, 1).hand_written


# -- round trips of mindroom entries ----------------------------------------------------------

BASES = {
    "empty": "",
    "hand written": "# Notes\n\n- a bullet\nplain line\n",
    "no final newline": "# Notes\n- a bullet",
    "crlf": "# Notes\r\n- a bullet\r\n",
    "ends in a mindroom entry": "- earlier <!-- m-00000001 -->\n  more\n",
    "ends with blank lines": "- a bullet\n\n\n",
}


@pytest.mark.parametrize("base", BASES.values(), ids=BASES.keys())
@pytest.mark.parametrize("text", TRICKY_TEXTS)
def test_appended_tricky_text_reads_back_exactly_without_touching_the_rest(
    base: str, text: str
) -> None:
    before = parse_entries(base, PATH)
    document = append_entry(base, "m-0123abcd", text)
    assert ids_and_texts(document) == [(e.id, e.text) for e in before] + [
        ("m-0123abcd", normalize_text(text))
    ]
    assert parse_entries(document, PATH)[: len(before)] == before
    assert document.endswith("\n")
    expected_prefix = base if not base or base.endswith("\n") else base + "\n"
    assert document.startswith(expected_prefix)


@pytest.mark.parametrize("text", TRICKY_TEXTS)
def test_replaced_tricky_text_reads_back_exactly_and_other_lines_stay(text: str) -> None:
    document = (
        "# Top\n"
        "- first <!-- m-00000001 -->\n"
        "  two lines\n"
        "- middle <!-- m-00000002 -->\n"
        "hand written line  \n"
        "- last <!-- m-00000003 -->\n"
    )
    new = replace_entry(document, PATH, "m-00000002", text)
    assert new is not None
    old_lines, new_lines = lines_of(document), lines_of(new)
    rendered = [line + "\n" for line in render_entry("m-00000002", text)]
    assert new_lines == old_lines[:3] + rendered + old_lines[4:]
    assert ids_and_texts(new) == [
        ("m-00000001", "first\ntwo lines"),
        ("m-00000002", normalize_text(text)),
        (hand_id(PATH, "hand written line"), "hand written line"),
        ("m-00000003", "last"),
    ]


@pytest.mark.parametrize("text", TRICKY_TEXTS)
def test_tricky_text_replaced_twice_round_trips(text: str) -> None:
    document = append_entry("", "m-0123abcd", "placeholder")
    once = replace_entry(document, PATH, "m-0123abcd", text)
    assert once is not None
    twice = replace_entry(once, PATH, "m-0123abcd", text)
    assert twice == once
    assert ids_and_texts(twice) == [("m-0123abcd", normalize_text(text))]


def test_marker_at_end_of_texts_first_line_does_not_become_the_id() -> None:
    document = append_entry("", "m-11111111", "see <!-- m-deadbeef -->\nmore")
    assert document == "- see <!-- m-deadbeef --> <!-- m-11111111 -->\n  more\n"
    (entry,) = parse_entries(document, PATH)
    assert (entry.id, entry.text) == ("m-11111111", "see <!-- m-deadbeef -->\nmore")


def test_mindroom_entry_line_range_covers_its_continuations_but_not_trailing_blank_ones() -> None:
    document = "intro\n- a <!-- m-00000001 -->\n  b\n  \n  c\n  \n  \nafter\n"
    entries = parse_entries(document, PATH)
    assert [(e.text, e.start_line, e.end_line) for e in entries] == [
        ("intro", 1, 1),
        ("a\nb\n\nc", 2, 5),
        ("after", 8, 8),
    ]


def test_trailing_whitespace_after_the_marker_is_tolerated() -> None:
    assert ids_and_texts("- kept <!-- m-00000001 -->  \t\n") == [("m-00000001", "kept")]


def test_marker_not_at_end_of_line_makes_an_ordinary_hand_written_line() -> None:
    line = "- x <!-- m-00000001 --> trailing words"
    assert ids_and_texts(line) == [(hand_id(PATH, line[2:]), line[2:])]


def test_empty_line_ends_a_mindroom_entry() -> None:
    document = "- a <!-- m-00000001 -->\n\n  b\n"
    assert ids_and_texts(document) == [("m-00000001", "a"), (hand_id(PATH, "b"), "b")]


# -- hand-written lines -----------------------------------------------------------------------


def test_bullets_and_plain_lines_are_one_entry_each_without_their_bullet() -> None:
    document = "- dash\n* star\n+ plus\n1. one\n12) twelve\nplain line\n  indented plain\n"
    entries = parse_entries(document, "notes.md")
    expected = ["dash", "star", "plus", "one", "twelve", "plain line", "indented plain"]
    assert [e.text for e in entries] == expected
    assert [(e.start_line, e.end_line) for e in entries] == [(n, n) for n in range(1, 8)]
    assert all(e.id == hand_id("notes.md", e.text) and e.hand_written for e in entries)


def test_multi_line_bullet_covers_its_indented_lines() -> None:
    document = (
        "- Food\n"
        "  - tea\n"
        "    - green\n"
        "  \n"
        "  still food\n"
        "not food\n"
        "1. numbered\n"
        "   continued\n"
        "\n"
        "  separate\n"
    )
    entries = parse_entries(document, PATH)
    assert [(e.text, e.start_line, e.end_line) for e in entries] == [
        ("Food\n- tea\n  - green\n\nstill food", 1, 5),
        ("not food", 6, 6),
        ("numbered\ncontinued", 7, 8),
        ("separate", 10, 10),
    ]


def test_fenced_code_block_is_one_entry_spanning_the_block() -> None:
    document = "before\n```python\n# not a heading\n\n- not a bullet\n```\n~~~\nx\n~~~\nafter\n"
    entries = parse_entries(document, PATH)
    assert [(e.text, e.start_line, e.end_line) for e in entries] == [
        ("before", 1, 1),
        ("```python\n# not a heading\n\n- not a bullet\n```", 2, 6),
        ("~~~\nx\n~~~", 7, 9),
        ("after", 10, 10),
    ]


def test_headings_rules_and_comments_are_not_memories() -> None:
    document = (
        "# Title\n"
        "## Sub\n"
        "###\n"
        "Setext title\n"
        "===\n"
        "---\n"
        "***\n"
        "- - -\n"
        "<!-- one line comment -->\n"
        "<!-- a comment\n"
        "over lines\n"
        "-->\n"
        "#hashtag is text\n"
    )
    assert [e.text for e in parse_entries(document, PATH)] == ["Setext title", "#hashtag is text"]


def test_front_matter_is_not_memory() -> None:
    document = "---\ntitle: notes\ntags: [a]\n---\n- real\n"
    assert [(e.text, e.start_line) for e in parse_entries(document, PATH)] == [("real", 5)]
    not_front = "intro\n---\ntitle: x\n---\n"
    assert [e.text for e in parse_entries(not_front, PATH)] == ["intro", "title: x"]


def test_hand_written_ids_do_not_change_when_lines_are_added_above() -> None:
    document = "- buy milk\nplain note\n- multi\n  line\n"
    before = {e.text: e.id for e in parse_entries(document, PATH)}
    grown = "# New heading\n\n- a new bullet\n```\ncode\n```\n" + document
    after = {e.text: e.id for e in parse_entries(grown, PATH) if e.text in before}
    assert after == before


def test_crlf_lines_parse_like_lf_lines() -> None:
    document = "- a\r\n- m <!-- m-00000001 -->\r\n  more\r\nplain"
    assert ids_and_texts(document) == ids_and_texts(document.replace("\r\n", "\n"))


def test_byte_order_mark_is_ignored_and_kept() -> None:
    document = "\ufeff- first <!-- m-00000001 -->\nsecond\n"
    assert ids_and_texts(document)[0] == ("m-00000001", "first")
    new = replace_entry(document, PATH, "m-00000001", "changed")
    assert new == "\ufeff- changed <!-- m-00000001 -->\nsecond\n"


def test_unclosed_fence_does_not_swallow_entries_appended_after_it() -> None:
    document = "```\nleft open\n"
    document = append_entry(document, "m-00000001", "safe\n```\nstill safe")
    document += "```\n"  # a person closes the fence at the end later
    assert ("m-00000001", "safe\n```\nstill safe") in ids_and_texts(document)


def test_unclosed_comment_does_not_swallow_entries_appended_after_it() -> None:
    document = append_entry("<!-- left open\n", "m-00000001", "safe -->")
    assert ids_and_texts(document)[-1] == ("m-00000001", "safe -->")


# -- editing ----------------------------------------------------------------------------------

MIXED = (
    "---\r\n"
    "title: x\r\n"
    "---\r\n"
    "# Facts   \n"
    "- alpha  \n"
    "- beta <!-- m-00000001 -->\n"
    "  beta two\n"
    "plain gamma\t\n"
    "* delta\n"
    "  delta two\n"
    "- epsilon <!-- m-00000002 -->\r\n"
    "last line without newline"
)


@pytest.mark.parametrize("index", range(6))
def test_removing_any_entry_leaves_every_other_line_byte_identical(index: int) -> None:
    entries = parse_entries(MIXED, PATH)
    target = entries[index]
    new = remove_entry(MIXED, PATH, target.id)
    assert new is not None
    old_lines = lines_of(MIXED)
    assert lines_of(new) == old_lines[: target.start_line - 1] + old_lines[target.end_line :]
    assert parse_entries(new, PATH) == [
        e
        if e.start_line < target.start_line
        else _shifted(e, target.start_line - target.end_line - 1)
        for e in entries
        if e is not target
    ]


@pytest.mark.parametrize("index", range(6))
@pytest.mark.parametrize("text", ["new text", "new\n\ntext <!-- m-deadbeef -->"])
def test_replacing_any_entry_leaves_every_other_line_byte_identical(index: int, text: str) -> None:
    entries = parse_entries(MIXED, PATH)
    target = entries[index]
    new = replace_entry(MIXED, PATH, target.id, text)
    assert new is not None
    old_lines, new_lines = lines_of(MIXED), lines_of(new)
    head, tail = old_lines[: target.start_line - 1], old_lines[target.end_line :]
    assert new_lines[: len(head)] == head
    assert new_lines[len(new_lines) - len(tail) :] == tail
    after = parse_entries(new, PATH)
    assert len(after) == len(entries)
    changed = after[index]
    assert changed.text == text
    if target.hand_written:
        assert changed.id == hand_id(PATH, text)
    else:
        assert changed.id == target.id
    delta = changed.end_line - target.end_line
    for before, now in zip(entries, after, strict=True):
        if before is not target:
            shift = delta if before.start_line > target.start_line else 0
            assert now == _shifted(before, shift)


def test_new_lines_take_the_line_ending_of_the_lines_they_replace() -> None:
    new = replace_entry(MIXED, PATH, "m-00000002", "one\ntwo")
    assert new is not None
    assert "- one <!-- m-00000002 -->\r\n  two\r\nlast line without newline" in new


def test_replacing_the_last_line_keeps_the_missing_final_newline() -> None:
    new = replace_entry("a\nb", PATH, hand_id(PATH, "b"), "c\nd")
    assert new == "a\n- c\n  d"


def test_replacing_a_hand_written_bullet_keeps_its_marker_and_indentation() -> None:
    document = "- a\n  * b\n\n  * nested alone\n3. three\n"
    new = replace_entry(document, PATH, hand_id(PATH, "nested alone"), "changed\nover two")
    assert new == "- a\n  * b\n\n  * changed\n    over two\n3. three\n"
    new = replace_entry(document, PATH, hand_id(PATH, "three"), "drei")
    assert new == "- a\n  * b\n\n  * nested alone\n3. drei\n"


def test_replacing_a_plain_line_keeps_it_plain_when_it_fits_on_one_line() -> None:
    document = "one\ntwo\nthree\n"
    assert replace_entry(document, PATH, hand_id(PATH, "two"), "zwei") == "one\nzwei\nthree\n"
    multi = replace_entry(document, PATH, hand_id(PATH, "two"), "zwei\n\ndeux")
    assert multi == "one\n- zwei\n  \n  deux\nthree\n"
    assert ids_and_texts(multi)[1] == (hand_id(PATH, "zwei\n\ndeux"), "zwei\n\ndeux")


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("# looks like a heading", "- # looks like a heading"),
        ("- looks like a bullet", "- - looks like a bullet"),
        ("<!-- looks like a comment -->", "- <!-- looks like a comment -->"),
        ("---", "* ---"),
        ("ends like <!-- m-deadbeef -->", "* ends like <!-- m-deadbeef -->"),
        ("```", "- ```"),
    ],
)
def test_replacing_a_bullet_with_markdown_syntax_writes_a_bullet_that_reads_back(
    text: str, written: str
) -> None:
    document = "- one\n- two\n- three\n"
    new = replace_entry(document, PATH, hand_id(PATH, "two"), text)
    assert new == f"- one\n{written}\n- three\n"
    assert ids_and_texts(new)[1] == (hand_id(PATH, text), text)


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("# looks like a heading", "- # looks like a heading"),
        ("1. looks numbered", "- 1. looks numbered"),
        ("<!-- m-deadbeef --> first", "- <!-- m-deadbeef --> first"),
        ("ends like <!-- m-deadbeef -->", "ends like <!-- m-deadbeef -->"),
        ("--", "--"),
    ],
)
def test_replacing_a_plain_line_stays_plain_unless_it_would_read_differently(
    text: str, written: str
) -> None:
    new = replace_entry("one\ntwo\nthree\n", PATH, hand_id(PATH, "two"), text)
    assert new == f"one\n{written}\nthree\n"
    assert ids_and_texts(new)[1] == (hand_id(PATH, text), text)


def test_replacing_a_code_block_with_a_code_block_writes_it_as_is() -> None:
    document = "```\nold\n```\nafter\n"
    code_id = parse_entries(document, PATH)[0].id
    new = replace_entry(document, PATH, code_id, "```sh\nnew\n\nnewer\n```")
    assert new == "```sh\nnew\n\nnewer\n```\nafter\n"


def test_replacing_a_hand_written_multi_line_bullet_rewrites_all_its_lines() -> None:
    document = "- old\n  old two\n  old three\nafter\n"
    new = replace_entry(document, PATH, hand_id(PATH, "old\nold two\nold three"), "new")
    assert new == "- new\nafter\n"


def test_hand_written_text_below_an_unclosed_comment_becomes_a_mindroom_entry_if_it_must() -> None:
    document = "<!-- never closed\nbuy milk\nlater\n"
    old = hand_id(PATH, "buy milk")
    new = replace_entry(document, PATH, old, "milk -->")
    assert new == f"<!-- never closed\n- milk --> <!-- m-{old[2:]} -->\nlater\n"
    assert ids_and_texts(new)[0] == ("m-" + old[2:], "milk -->")


def test_removing_a_hand_written_multi_line_bullet_deletes_all_its_lines() -> None:
    document = "keep\n- gone\n  gone too\n\tgone three\nkeep too\n"
    new = remove_entry(document, PATH, hand_id(PATH, "gone\ngone too\ngone three"))
    assert new == "keep\nkeep too\n"


def test_removing_keeps_a_following_indented_line_from_joining_the_bullet_above() -> None:
    document = "- bullet\nplain between\n   indented alone\n"
    assert [e.text for e in parse_entries(document, PATH)][-1] == "indented alone"
    new = remove_entry(document, PATH, hand_id(PATH, "plain between"))
    assert new == "- bullet\n\n   indented alone\n"
    assert [e.text for e in parse_entries(new, PATH)] == ["bullet", "indented alone"]


def test_replacing_a_plain_line_as_a_bullet_keeps_the_next_indented_line_apart() -> None:
    document = "plain\n  indented alone\n"
    new = replace_entry(document, PATH, hand_id(PATH, "plain"), "now\ntwo lines")
    assert new == "- now\n  two lines\n\n  indented alone\n"
    assert [e.text for e in parse_entries(new, PATH)] == ["now\ntwo lines", "indented alone"]


def test_removing_the_first_line_does_not_turn_rules_into_front_matter() -> None:
    document = "- first <!-- m-00000001 -->\n---\nkept\n---\n"
    new = remove_entry(document, PATH, "m-00000001")
    assert new == "\n---\nkept\n---\n"
    assert [e.text for e in parse_entries(new, PATH)] == ["kept"]


def test_removing_the_only_entry_inside_an_unclosed_fence_removes_it_anyway() -> None:
    document = "```\nfoo\n- x <!-- m-00000001 -->\nbar\n```\n"
    assert [e.text for e in parse_entries(document, PATH)] == ["```", "foo", "x", "bar", "```"]
    new = remove_entry(document, PATH, "m-00000001")
    assert new == "```\nfoo\nbar\n```\n"
    assert [e.text for e in parse_entries(new, PATH)] == ["```\nfoo\nbar\n```"]


def test_copy_pasted_duplicates_edit_the_first_only() -> None:
    document = "- dup <!-- m-00000001 -->\n- dup <!-- m-00000001 -->\nsame\nsame\n"
    assert remove_entry(document, PATH, "m-00000001") == ("- dup <!-- m-00000001 -->\nsame\nsame\n")
    replaced = replace_entry(document, PATH, "m-00000001", "new")
    assert replaced == "- new <!-- m-00000001 -->\n- dup <!-- m-00000001 -->\nsame\nsame\n"
    hand = hand_id(PATH, "same")
    assert remove_entry(document, PATH, hand) == (
        "- dup <!-- m-00000001 -->\n- dup <!-- m-00000001 -->\nsame\n"
    )


def test_unknown_ids_give_none() -> None:
    document = "- a <!-- m-00000001 -->\nplain\n"
    assert replace_entry(document, PATH, "m-99999999", "x") is None
    assert remove_entry(document, PATH, "h-00000000") is None
    assert remove_entry(document, "other.md", hand_id(PATH, "plain")) is None


def test_append_adds_exactly_one_newline_and_never_a_blank_line() -> None:
    assert append_entry("", "m-00000001", "a") == "- a <!-- m-00000001 -->\n"
    assert append_entry("x", "m-00000001", "a") == "x\n- a <!-- m-00000001 -->\n"
    assert append_entry("x\n", "m-00000001", "a") == "x\n- a <!-- m-00000001 -->\n"
    assert append_entry("x\n\n", "m-00000001", "a") == "x\n\n- a <!-- m-00000001 -->\n"
    assert (
        append_entry("x\r\ny", "m-00000001", "a\nb")
        == "x\r\ny\r\n- a <!-- m-00000001 -->\r\n  b\r\n"
    )


def test_append_refuses_an_id_already_in_the_document_and_empty_text() -> None:
    with pytest.raises(ValueError, match="already"):
        append_entry("- a <!-- m-00000001 -->\n", "m-00000001", "b")
    with pytest.raises(ValueError, match="empty"):
        append_entry("", "m-00000001", " \n ")


def test_replace_refuses_empty_text() -> None:
    with pytest.raises(ValueError, match="empty"):
        replace_entry("- a <!-- m-00000001 -->\n", PATH, "m-00000001", "  ")


# -- property test ----------------------------------------------------------------------------

WORDS = ["tea", "Alice", "🎉", "記憶", "שלום", "**bold**", "`x`", "[l](u)", "meeting", "42"]


def _random_id(rng: random.Random) -> str:
    return f"m-{rng.getrandbits(32):08x}"


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5)))


def _piece(rng: random.Random) -> tuple[list[str], list[tuple[str, str]]]:
    """Some lines of a document and the entries they hold (id, text)."""
    kind = rng.choice(
        ["blank", "heading", "bullet", "plain", "multi", "code", "comment", "rule", "mindroom"]
        + ["mindroom"] * 3
    )
    if kind == "blank":
        return [""], []
    if kind == "heading":
        return [rng.choice(["# Notes", "## Sub section", "### " + _sentence(rng)])], []
    if kind == "comment":
        return ["<!-- " + _sentence(rng) + " -->"], []
    if kind == "rule":
        return [rng.choice(["***", "___", "* * *"])], []
    if kind == "bullet":
        text = _sentence(rng)
        return [rng.choice(["- ", "* ", "+ ", "1. "]) + text], [(hand_id(PATH, text), text)]
    if kind == "plain":
        text = _sentence(rng)
        return [text], [(hand_id(PATH, text), text)]
    if kind == "multi":
        parts = [_sentence(rng) for _ in range(rng.randint(2, 4))]
        text = "\n".join(parts)
        return ["- " + parts[0], *("  " + p for p in parts[1:])], [(hand_id(PATH, text), text)]
    if kind == "code":
        lines = ["```", _sentence(rng), "", "- " + _sentence(rng), "```"]
        text = "\n".join(lines)
        return lines, [(hand_id(PATH, text), text)]
    entry_id = _random_id(rng)
    text = rng.choice(TRICKY_TEXTS)
    fields = rng.choice(RANDOM_FIELDS)
    return render_entry(entry_id, text, fields), [(entry_id, normalize_text(text))]


def _document(rng: random.Random) -> tuple[str, list[tuple[str, str]]]:
    lines: list[str] = []
    expected: list[tuple[str, str]] = []
    if rng.random() < 0.2:
        lines += ["---", "title: " + _sentence(rng), "---"]
    for _ in range(rng.randint(0, 12)):
        piece_lines, piece_entries = _piece(rng)
        lines += piece_lines
        expected += piece_entries
    document = "".join(line + rng.choice(["\n"] * 5 + ["\r\n"]) for line in lines)
    if document and rng.random() < 0.2:
        document = document.rstrip("\r\n")
    return document, expected


def _replacement_text(rng: random.Random) -> str:
    return rng.choice(TRICKY_TEXTS + SIMPLE_HAND_TEXTS)


@pytest.mark.parametrize("seed", range(300))
def test_random_documents_survive_random_edits(seed: int) -> None:
    rng = random.Random(seed)
    document, model = _document(rng)
    assert ids_and_texts(document) == model
    for _ in range(rng.randint(1, 6)):
        old_lines = lines_of(document)
        entries = parse_entries(document, PATH)
        operation = rng.choice(["append", "replace", "remove"]) if entries else "append"
        if operation == "append":
            entry_id, text = _random_id(rng), rng.choice(TRICKY_TEXTS)
            new = append_entry(document, entry_id, text)
            model.append((entry_id, normalize_text(text)))
            added = new[len(document) :]
            assert new.startswith(document)
            assert added.startswith(("- ", "\n- ", "\r\n- "))
            assert added.endswith("\n")
            assert "\n\n" not in added.replace("\r", "")  # never a blank line
            document = new
            assert ids_and_texts(document) == model
            continue
        chosen = rng.choice(entries).id
        position = next(i for i, e in enumerate(entries) if e.id == chosen)
        target = entries[position]
        if operation == "remove":
            new = remove_entry(document, PATH, chosen)
            del model[position]
        else:
            text = _replacement_text(rng)
            new = replace_entry(document, PATH, chosen, text)
            assert new is not None
            changed = parse_entries(new, PATH)[position]
            assert changed.text == normalize_text(text)
            if target.hand_written:
                assert changed.id == hand_id(PATH, normalize_text(text))
            else:
                assert changed.id == chosen
            model[position] = (changed.id, changed.text)
        assert new is not None
        new_lines = lines_of(new)
        head, tail = old_lines[: target.start_line - 1], old_lines[target.end_line :]
        assert new_lines[: len(head)] == head
        assert new_lines[len(new_lines) - len(tail) :] == tail
        document = new
        assert ids_and_texts(document) == model


def _shifted(entry: MemoryEntry, delta: int) -> MemoryEntry:
    return MemoryEntry(
        entry.id, entry.text, entry.path, entry.start_line + delta, entry.end_line + delta
    )
