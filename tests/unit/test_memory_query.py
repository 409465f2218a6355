"""What a search looks for: words without stop words or fragments, and date expressions."""

from __future__ import annotations

import datetime as dt

import pytest

from mindroom.memory.files.dates import find_dates
from mindroom.memory.search.query import STOP_WORDS, parse_query, words

TODAY = dt.date(2023, 8, 17)  # a Thursday


def labels(message: str) -> list[str]:
    return [d.label for d in find_dates(message, TODAY)[0]]


# -- words --------------------------------------------------------------------------------------


def test_contractions_and_possessives_do_not_search_their_fragments() -> None:
    assert words("what's up?") == []
    assert words("I'm bored, don't worry") == ["bored", "worry"]
    assert words("Caroline's dog") == ["caroline", "dog"]
    assert words("it\u2019s Bob\u2019s bike") == ["bob", "bike"]  # typographic apostrophes


def test_one_letter_latin_tokens_are_fragments_not_words() -> None:
    assert words("a b c x 8 vitamin D") == ["vitamin"]
    assert words("10 km") == ["10", "km"]
    assert words("猫") == ["猫"]  # one character of a script without spaces may be a word


def test_stop_words_are_the_general_english_list_and_never_searched() -> None:
    for word in ("the", "is", "what", "how", "very", "through", "should", "don't", "yourselves"):
        assert word in STOP_WORDS
    for word in ("memory", "tea", "thanks", "good", "may", "name", "system", "fire"):
        assert word not in STOP_WORDS  # content words stay, however common
    assert len(STOP_WORDS) == 179
    assert words("What is the weather in Berlin?") == ["weather", "berlin"]
    assert words("The THE the") == []
    assert parse_query("what is it about?") == []


def test_words_are_lower_case_and_unique_in_order() -> None:
    assert words("Tea, TEA and green tea_leaves") == ["tea", "green", "leaves"]


# -- dates --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("what did I do on 2023-05-08?", ["2023-05-08"]),
        ("what happened on 8 May 2023", ["2023-05-08"]),
        ("the 8th of May, 2023", ["2023-05-08"]),
        ("May 8th, 2023 was fun", ["2023-05-08"]),
        ("what did I do in May 2023?", ["May 2023"]),
        ("what happened on 8 May?", ["8 May"]),
        ("and on Sept 3", ["3 September"]),
        ("what did we do in June?", ["June"]),
        ("anything since 2022?", ["2022"]),
        ("last May", ["May 2023"]),
        ("last September", ["September 2022"]),
    ],
)
def test_absolute_dates_are_read(message: str, expected: list[str]) -> None:
    assert labels(message) == expected


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("what did I do today?", ["2023-08-17"]),
        ("anything this morning", ["2023-08-17"]),
        ("what did I do yesterday?", ["2023-08-16"]),
        ("last night was fun", ["2023-08-16"]),
        ("the day before yesterday", ["2023-08-15"]),
        ("3 days ago", ["2023-08-14"]),
        ("two days ago", ["2023-08-15"]),
        ("this week", ["2023-08-14..2023-08-17"]),
        ("last week", ["2023-08-07..2023-08-13"]),
        ("the past week", ["2023-08-11..2023-08-17"]),
        ("a week ago", ["2023-08-07..2023-08-13"]),
        ("last month", ["July 2023"]),
        ("this month", ["August 2023"]),
        ("last year", ["2022"]),
        ("last Monday", ["2023-08-14"]),
        ("on Thursday", ["2023-08-10"]),  # today is Thursday: the one before
    ],
)
def test_relative_dates_are_resolved_against_today(message: str, expected: list[str]) -> None:
    assert labels(message) == expected


def test_month_names_that_are_not_dates_stay_words() -> None:
    assert labels("May I ask something?") == []
    assert [t.key for t in parse_query("May I ask something?")] == ["may", "ask", "something"]
    assert labels("I saw 32 May bugs") == []  # no such day


def test_the_words_of_a_date_are_not_searched_again_as_words() -> None:
    now = dt.datetime.combine(TODAY, dt.time(12))
    terms = parse_query("What did Caroline do in May 2023?", now)
    assert [t.key for t in terms] == ["May 2023", "caroline"]
    assert terms[0].is_date
    assert not terms[0].exact_date
    day = parse_query("what did I do yesterday?", now)
    assert [(t.key, t.exact_date) for t in day] == [("2023-08-16", True)]


def test_fts_syntax_in_a_message_stays_text() -> None:
    [term] = parse_query('tea" OR "x')
    assert term.key == "tea"
    assert term.expression == '{text} : "tea"'
