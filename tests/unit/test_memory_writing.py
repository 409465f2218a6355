"""The writing validator: third person, 1-2 sentences, at most 280 characters, episodic entries
in the past tense; trims what it can, rejects what it cannot, and says which."""

from __future__ import annotations

import pytest

from mindroom.memory.files.writing import MAX_CHARS, validate


def test_a_good_semantic_fact_passes_as_written() -> None:
    verdict = validate("Alice prefers green tea over coffee.")
    assert (verdict.text, verdict.first_pass, verdict.reasons) == (
        "Alice prefers green tea over coffee.",
        True,
        (),
    )


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("   -  ", "empty"),
        ("I prefer green tea.", "first person"),
        ("My sister is called Maya.", "first person"),
        ("We moved to Lyon.", "first person"),
        ("You like green tea.", "second person"),
    ],
)
def test_what_cannot_be_mended_is_rejected_with_the_reason(text: str, reason: str) -> None:
    verdict = validate(text)
    assert not verdict.accepted
    assert not verdict.first_pass
    assert reason in verdict.reasons[0]


def test_the_us_is_a_country_not_a_pronoun() -> None:
    assert validate("Alice moved to the US in 2020.").first_pass


def test_long_texts_are_trimmed_at_a_sentence_and_then_at_a_word() -> None:
    three = "Alice plays chess. Alice plays go. Alice plays bridge."
    verdict = validate(three)
    assert verdict.text == "Alice plays chess. Alice plays go."
    assert verdict.accepted
    assert not verdict.first_pass
    long_one = "Alice collects " + ", ".join(f"stamp number {n}" for n in range(60)) + "."
    cut = validate(long_one)
    assert len(cut.text) <= MAX_CHARS
    assert cut.text.endswith("…")
    assert "longer than 280 characters" in cut.reasons


def test_episodic_entries_must_be_in_the_past_tense() -> None:
    assert validate("Alice visited her sister in Porto.", "episodic").first_pass
    assert validate("Alice went to Porto.", "episodic").first_pass
    rejected = validate("Alice visits her sister in Porto.", "episodic")
    assert not rejected.accepted
    assert "past tense" in rejected.reasons[0]


def test_other_languages_are_checked_for_length_only() -> None:
    assert validate("Alice mag grünen Tee lieber als Kaffee.").first_pass  # mostly ASCII: checked
    japanese = "アリスは緑茶が好きです。"
    assert validate(japanese).first_pass
    assert validate("私は緑茶が好きです。", "episodic").first_pass  # no word list applies
