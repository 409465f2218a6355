"""Which past conversations state a deleted fact (:mod:`mindroom.memory.files.tombstones`): the pure
rule, over plain history records and texts."""

from __future__ import annotations

from mindroom.memory.files.history import HistoryRecord
from mindroom.memory.files.tombstones import deleted_facts, distinctive, states, states_deleted_fact

LOCKER = "Alice's locker code is zq7731x9"


def record(op: str, entry_id: str, old: str | None, new: str | None, **meta: str) -> HistoryRecord:
    return HistoryRecord(0.0, "test", op, entry_id, "MEMORY.md", old, new, None, meta or None)


def test_a_paraphrase_holding_the_deleted_code_states_the_fact() -> None:
    fact = distinctive(LOCKER)

    assert states("@alice:localhost: my locker is ZQ7731X9, remember it", fact)
    assert not states("@alice:localhost: the locker room code of conduct is posted", fact)


def test_a_fact_without_codes_is_stated_by_half_of_its_content_words() -> None:
    fact = distinctive("Alice takes insulin for her diabetes")

    assert fact.words == {"take", "insulin", "diabete"}  # Alice is a name: never evidence
    assert states("I take insulin every morning", fact)
    assert states("I inject insulin because of my diabetes", fact)
    assert not states("Alice takes the train to work", fact)  # one common word: chance


def test_a_fact_with_nothing_distinctive_is_stated_only_by_its_exact_text() -> None:
    fact = distinctive("Alice is here")

    assert states("she said: alice is here!", fact)
    assert not states("Alice was here yesterday", fact)


def test_a_restored_fact_is_no_longer_deleted() -> None:
    deleted = [record("add", "m-1", None, LOCKER), record("delete", "m-1", LOCKER, None)]
    restored = [*deleted, record("restore", "m-1", None, LOCKER)]
    hit = "@alice:localhost: my locker is zq7731x9, remember it"

    assert states_deleted_fact(hit, deleted_facts(deleted))
    assert not states_deleted_fact(hit, deleted_facts(restored))


def test_a_restored_hand_written_line_under_a_new_id_is_no_longer_deleted() -> None:
    records = [record("delete", "h-1", LOCKER, None), record("restore", "m-9", None, LOCKER)]

    assert not deleted_facts(records)


def test_forget_abort_and_a_purge_of_an_expired_entry_hide_nothing() -> None:
    records = [
        record("delete", "m-1", LOCKER, None),
        record("abort", "m-1", None, None),  # the delete did not happen
        record("delete", "m-2", "Alice's bike lock is 4417", None),
        record("forget", "m-2", None, None),  # forget-me erased it: nothing left to match
        record("delete", "m-3", "Alice's gym pin is 8812", None, why="purge"),  # expired
    ]

    assert not deleted_facts(records)


def test_the_matrix_id_of_the_person_a_fact_is_about_is_never_evidence() -> None:
    fact = distinctive("@bob2:example.org keeps his spare key under the blue flowerpot")

    assert not fact.codes  # "bob2" would hide everything Bob ever said
    assert not states("@bob2:example.org: good morning, everyone", fact)
    assert states("@bob2:example.org: the spare key is under the flowerpot", fact)
