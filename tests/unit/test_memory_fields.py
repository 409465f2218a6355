"""An entry's structured fields in its id marker: parsed, rendered, kept through edits."""

from __future__ import annotations

import datetime as dt

import pytest

from mindroom.memory.files.fields import EntryFields, check_fields, parse_fields, render_fields
from mindroom.memory.files.markdown import (
    append_entry,
    parse_entries,
    remove_entry,
    render_entry,
    replace_entry,
)

PATH = "MEMORY.md"


def test_fields_in_the_marker_are_read_and_the_text_stays_clean() -> None:
    doc = "- Alice prefers tea <!-- m-1a2b3c4d category=preferences importance=4 pinned -->\n"
    (entry,) = parse_entries(doc, PATH)
    assert (entry.id, entry.text) == ("m-1a2b3c4d", "Alice prefers tea")
    assert entry.fields == EntryFields(category="preferences", importance=4, pinned=True)


def test_a_marker_without_fields_and_a_hand_written_line_take_every_default() -> None:
    doc = "- Alice prefers tea <!-- m-1a2b3c4d -->\n- Bob likes chess\n"
    written, hand = parse_entries(doc, PATH)
    for entry in (written, hand):
        assert entry.fields == EntryFields()
        assert entry.fields.category_or() == "general"
        assert entry.fields.importance_or_default == 3
        assert entry.fields.type_in(entry.path) == "semantic"
        assert not entry.fields.pinned
        assert not entry.fields.soft_deleted
    assert EntryFields().type_in("memory/2026-11-02.md") == "episodic"


def test_words_a_person_mistyped_are_kept_verbatim_and_otherwise_ignored() -> None:
    fields = parse_fields(" importance=high categry=x pinned importance=2 importance=4")
    assert fields.importance == 2  # the first good value; the rest kept as written
    assert fields.pinned
    assert fields.extra == ("importance=high", "categry=x", "importance=4")
    assert render_fields(fields) == "importance=2 pinned importance=high categry=x importance=4"


def test_rendered_fields_read_back_as_the_same_fields() -> None:
    fields = EntryFields(
        category="profile",
        importance=1,
        pinned=True,
        type="insight",
        state="soft_deleted",
        purge=dt.date(2027, 1, 5),
        created=dt.date(2026, 11, 1),
        updated=dt.date(2026, 11, 20),
    )
    lines = render_entry("m-00000001", "Alice is vegan\nsince 2020", fields)
    assert lines[0] == (
        "- Alice is vegan <!-- m-00000001 category=profile importance=1 pinned type=insight"
        " state=soft_deleted purge=2027-01-05 created=2026-11-01 updated=2026-11-20 -->"
    )
    (entry,) = parse_entries("\n".join(lines) + "\n", PATH)
    assert entry.fields == fields
    assert entry.text == "Alice is vegan\nsince 2020"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (EntryFields(category="Bad Name"), "not a category name"),
        (EntryFields(importance=9), "importance must be 1 to 5"),
        (EntryFields(type="fact"), "type must be one of"),
        (EntryFields(extra=("a-->b",)), "cannot be written"),
    ],
)
def test_fields_a_marker_cannot_hold_are_refused_with_a_clear_error(
    fields: EntryFields, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        check_fields(fields)
    with pytest.raises(ValueError, match=message):
        append_entry("", "m-00000001", "text", fields)


def test_replacing_the_text_keeps_the_fields_and_other_lines_keep_their_bytes() -> None:
    doc = (
        "# Notes\n"
        "- Alice prefers tea <!-- m-1a2b3c4d category=preferences importance=4 -->\n"
        "- Bob likes chess  \r\n"
    )
    new = replace_entry(doc, PATH, "m-1a2b3c4d", "Alice prefers green tea")
    assert new == (
        "# Notes\n"
        "- Alice prefers green tea <!-- m-1a2b3c4d category=preferences importance=4 -->\n"
        "- Bob likes chess  \r\n"
    )
    pinned = replace_entry(
        new, PATH, "m-1a2b3c4d", "Alice prefers green tea", EntryFields(pinned=True)
    )
    assert pinned is not None
    assert parse_entries(pinned, PATH)[0].fields == EntryFields(pinned=True)


def test_giving_a_hand_written_line_fields_makes_it_a_mindroom_entry_in_place() -> None:
    doc = "- Bob likes chess\n- Carol plays go\n"
    hand = parse_entries(doc, PATH)[0]
    new = replace_entry(doc, PATH, hand.id, "Bob likes chess", EntryFields(category="hobbies"))
    assert new is not None
    first, second = parse_entries(new, PATH)
    assert first.id == "m-" + hand.id[2:]
    assert (first.text, first.fields.category, first.start_line) == (
        "Bob likes chess",
        "hobbies",
        1,
    )
    assert new.endswith("- Carol plays go\n")
    assert second.hand_written


def test_a_text_ending_in_a_marker_with_fields_keeps_it_as_text() -> None:
    text = "literal <!-- m-12345678 category=x -->"
    doc = append_entry("", "m-abcdef01", text, EntryFields(category="profile"))
    (entry,) = parse_entries(doc, PATH)
    assert (entry.id, entry.text, entry.fields.category) == ("m-abcdef01", text, "profile")
    assert remove_entry(doc, PATH, "m-abcdef01") == ""
