"""A room whose join rule and history visibility were never seen is never the wider answer:
what is learned there is kept for its people alone, and it shows only what anyone may read."""

from __future__ import annotations

from pathlib import Path

from mindroom.memory.policy.audience import PUBLIC, AudienceBook, allowed_words, word_for
from mindroom.memory.policy.gate import RoomAudience

PEOPLE = frozenset({"@alice:hs", "@bob:hs"})


def test_a_room_of_unseen_rules_writes_closed_and_reads_open(tmp_path: Path) -> None:
    book = AudienceBook(tmp_path)
    unseen = RoomAudience.shared(PEOPLE, room_id="!new:hs", rules_known=False)
    seen_open = RoomAudience.shared(PEOPLE, room_id="!lobby:hs")

    assert word_for(seen_open, book) == PUBLIC  # the control: a room seen to be open
    word = word_for(unseen, book)
    assert word != PUBLIC
    told = book.resolve(word)
    assert told is not None
    assert not told.open
    assert told.readers == PEOPLE
    assert allowed_words(unseen, "strict", book) == {PUBLIC, ""}  # nothing closed shown there
    closed = RoomAudience.shared(PEOPLE, closed=True, room_id="!new:hs")
    assert word in (allowed_words(closed, "strict", book) or set())  # shown once it is known
