"""What a person may choose as an entry's audience (``memory set --audience``, the dashboard):
:func:`mindroom.memory.policy.audience.chosen`."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindroom.memory.policy.audience import AudienceBook, Told, chosen

ROOM = Told(False, frozenset({"@a:x", "@b:x"}), "encrypted", "!r:x", "Kitchen")


@pytest.fixture
def book(tmp_path: Path) -> AudienceBook:
    return AudienceBook(tmp_path)


def test_public_a_direct_chat_a_recorded_room_and_default_are_accepted(book) -> None:
    key = book.record(ROOM)
    assert chosen("public", book) == "public"
    assert chosen(" dm:@a:x ", book) == "dm:@a:x"
    assert chosen(key, book) == key
    assert chosen("default", book) is None  # no word: the scope's default


@pytest.mark.parametrize(
    "value", ["room:00000000", "room:zz", "everyone", "dm:a", "dm:@a", "Public", "", "dm:@a:x y"]
)
def test_anything_else_is_refused_naming_the_recorded_rooms(book, value: str) -> None:
    key = book.record(ROOM)
    with pytest.raises(ValueError, match="give public, dm:@person:server, default") as refused:
        chosen(value, book)
    assert key in str(refused.value)
    assert "learned in an encrypted room (Kitchen; readers then: @a:x, @b:x)" in str(refused.value)


def test_with_no_room_recorded_the_refusal_says_so(book) -> None:
    with pytest.raises(ValueError, match="none recorded yet"):
        chosen("room:12345678", book)
