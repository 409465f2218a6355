"""Questions answered by a reaction: which reactions are a yes or a no, who may answer, and the
ledger's record of each question (offered once, answered once, kept across a restart)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from mindroom.adapters.matrix.events import parse_reaction
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.jobs.consolidate.offers import newer_first
from mindroom.memory.jobs.consolidate.resolve import Side
from mindroom.memory.policy.consent import Proposal
from mindroom.memory.policy.consent_chat import offer_text
from mindroom.people.data import Person as Whose
from mindroom.people.data import owned_rows
from mindroom.pipeline.prompts import PROMPT_HANDLERS, may_answer, reaction_answer
from mindroom.store.ledger import Ledger
from mindroom.store.prompts import Prompt

ALICE = "@alice:example.org"
BOB = "@bob:example.org"


@pytest.mark.parametrize(
    ("key", "answer"),
    [
        ("✅", True),
        ("✔️", True),  # with the emoji presentation selector
        ("✔", True),
        ("👍", True),
        ("👍🏽", True),  # a skin tone is still a thumbs up
        ("☑️", True),
        ("❌", False),
        ("✖️", False),
        ("❎", False),
        ("👎", False),
        ("👎🏿", False),
        ("🎉", None),
        ("yes", None),
        ("", None),
        ("✅❌", None),  # both: neither
    ],
)
def test_a_reaction_is_a_yes_a_no_or_nothing(key: str, answer: bool | None) -> None:
    assert reaction_answer(key) is answer


def _prompt(person: str = ALICE) -> Prompt:
    return Prompt("$q", "!dm", "general", person, "consent", "p-1", 0.0)


def test_only_the_person_or_an_admin_answers_a_prompt() -> None:
    prompt = _prompt()
    assert may_answer(prompt, ALICE, [])
    assert not may_answer(prompt, BOB, [])
    assert may_answer(prompt, BOB, [BOB])
    assert may_answer(prompt, BOB, ["@*:example.org"])  # admins are globs too
    assert not may_answer(prompt, BOB, ["@carol:example.org"])


def test_consent_prompts_have_a_handler() -> None:
    assert "consent" in PROMPT_HANDLERS


def test_a_reaction_event_is_parsed_and_other_relations_are_not() -> None:
    source = {
        "type": "m.reaction",
        "event_id": "$r",
        "sender": ALICE,
        "origin_server_ts": 5,
        "content": {"m.relates_to": {"rel_type": "m.annotation", "event_id": "$q", "key": "✅"}},
    }
    reaction = parse_reaction("!dm", source)
    assert reaction is not None
    assert (reaction.room_id, reaction.sender, reaction.reacts_to, reaction.key) == (
        "!dm",
        ALICE,
        "$q",
        "✅",
    )
    replace = {"rel_type": "m.replace", "event_id": "$q", "key": "✅"}
    assert parse_reaction("!dm", {**source, "content": {"m.relates_to": replace}}) is None
    no_key = {"rel_type": "m.annotation", "event_id": "$q"}
    assert parse_reaction("!dm", {**source, "content": {"m.relates_to": no_key}}) is None
    assert parse_reaction("!dm", {**source, "type": "m.room.message"}) is None


def test_the_offer_says_what_would_be_stored_and_how_to_answer() -> None:
    proposal = Proposal(
        "p-1a2b3c4d",
        "sensitive",
        "city",
        "Alice lives in Lyon",
        EntryFields(),
        "MEMORY.md",
        ALICE,
        1,
        0.0,
        0.0,
        "pending",
    )
    text = offer_text(proposal)
    assert "> Alice lives in Lyon" in text
    assert "city" in text
    assert "✅" in text
    assert "❌" in text
    assert "`!memory confirm p-1a2b3c4d`" in text
    assert "`!memory reject p-1a2b3c4d`" in text


@pytest.mark.asyncio
async def test_a_prompt_is_offered_once_and_answered_once_across_a_restart(
    tmp_path: Path,
) -> None:
    ledger = await Ledger.open(tmp_path / "ledger.db")
    try:
        prompts = ledger.prompts
        assert await prompts.offered("consent", "p-1", ALICE) is None
        assert await prompts.add("$q", "!dm", "general", ALICE, "consent", "p-1")
        assert not await prompts.add("$q2", "!dm", "general", ALICE, "consent", "p-1")
        assert await prompts.add("$q3", "!dm2", "general", BOB, "consent", "p-1")  # another person
        offered = await prompts.offered("consent", "p-1", ALICE)
        assert offered is not None
        assert offered.event_id == "$q"
        assert await prompts.get("$q2") is None
    finally:
        await ledger.close()

    ledger = await Ledger.open(tmp_path / "ledger.db")  # a restart
    try:
        prompts = ledger.prompts
        assert await prompts.answer("$q", True, ALICE)
        assert not await prompts.answer("$q", False, BOB)  # answered once
        assert not await prompts.answer("$nothing", True, ALICE)
        answered = await prompts.get("$q")
        assert answered is not None
        assert (answered.answer, answered.answered_by) == ("yes", ALICE)
        assert (answered.room_id, answered.account, answered.kind) == ("!dm", "general", "consent")
    finally:
        await ledger.close()


def _side(entry_id: str, text: str, updated: dt.date | None) -> Side:
    entry = MemoryEntry(entry_id, text, "MEMORY.md", 1, 1, EntryFields(updated=updated))
    return Side(entry_id, text, entry)


def test_the_newer_of_a_conflict_is_the_later_dated_and_else_the_second() -> None:
    lyon = _side("m-1", "Alice lives in Lyon", dt.date(2026, 3, 1))
    porto = _side("m-2", "Alice lives in Porto", dt.date(2026, 1, 1))
    assert newer_first(lyon, porto) == (lyon, porto)
    assert newer_first(porto, lyon) == (lyon, porto)
    undated = _side("h-1", "Alice lives in Lyon", None), _side("h-2", "Alice lives in Rome", None)
    assert newer_first(*undated) == (undated[1], undated[0])


@pytest.mark.asyncio
async def test_a_persons_prompts_are_part_of_their_data(tmp_path: Path) -> None:
    ledger = await Ledger.open(tmp_path / "ledger.db")
    try:
        await ledger.prompts.add("$a", "!dm", "general", ALICE, "consent", "p-1")
        await ledger.prompts.add("$b", "!dm2", "general", BOB, "consent", "p-2")
    finally:
        await ledger.close()

    hers = owned_rows(tmp_path / "ledger.db", Whose(ALICE))

    assert [row["event_id"] for row in hers["prompts"]] == ["$a"]  # found, Bob's left out
