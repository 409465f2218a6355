"""Unit tests for the router model's question and the parsing of its answer."""

from __future__ import annotations

import pytest

from mindroom.adapters.agno.router import parse_choice, router_prompt

CANDIDATES = [
    ("general", "Answers everyday questions"),
    ("coder", "Writes and reviews code"),
    ("mind", ""),
]
NAMES = [name for name, _ in CANDIDATES]


# -- router_prompt --------------------------------------------------------------------------------


def test_prompt_names_every_candidate_with_its_role() -> None:
    prompt = router_prompt(CANDIDATES, [], "hi")
    assert "- general: Answers everyday questions" in prompt
    assert "- coder: Writes and reviews code" in prompt


def test_prompt_marks_a_candidate_without_role() -> None:
    prompt = router_prompt(CANDIDATES, [], "hi")
    assert "- mind: (no role given)" in prompt


def test_prompt_contains_the_recent_messages_in_order_then_the_new_message() -> None:
    recent = ["alice: the build is red", "coder: looking at it", "alice: thanks"]
    prompt = router_prompt(CANDIDATES, recent, "can someone fix the flaky test?")
    positions = [prompt.index(line) for line in recent]
    assert positions == sorted(positions)
    assert prompt.index("can someone fix the flaky test?") > positions[-1]


def test_prompt_says_none_when_there_are_no_recent_messages() -> None:
    assert "(none)" in router_prompt(CANDIDATES, [], "hi")
    assert "(none)" not in router_prompt(CANDIDATES, ["alice: hello"], "hi")


def test_prompt_asks_which_agent_should_answer() -> None:
    assert "Which agent should answer?" in router_prompt(CANDIDATES, [], "hi")


# -- parse_choice: accepted ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        '{"agent": "coder"}',
        '  {"agent": "coder"}\n',
        '{"agent": " coder "}',
        '{"agent": "CODER"}',
        'Sure. {"agent": "coder"} is the best fit.',
        'I would pick:\n```json\n{\n  "agent": "coder"\n}\n```',
        '{"agent": "coder", "why": "it writes code"}',
    ],
)
def test_json_answer_naming_a_candidate_is_accepted(answer: str) -> None:
    assert parse_choice(answer, NAMES) == "coder"


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("coder", "coder"),
        ("CODER", "coder"),
        ("The coder should answer.", "coder"),
        ("Definitely Coder!", "coder"),
        ("mind", "mind"),
        ("I'd send this to general, it is small talk.", "general"),
    ],
)
def test_single_bare_name_in_prose_is_accepted(answer: str, expected: str) -> None:
    assert parse_choice(answer, NAMES) == expected


def test_same_name_repeated_in_prose_is_accepted() -> None:
    assert parse_choice("coder. Yes, coder.", NAMES) == "coder"


def test_json_choice_wins_over_other_names_in_the_prose() -> None:
    answer = 'Not general, not mind: {"agent": "coder"}'
    assert parse_choice(answer, NAMES) == "coder"


def test_broken_json_falls_back_to_a_single_bare_name() -> None:
    assert parse_choice('{"agent": coder}', NAMES) == "coder"


# -- parse_choice: rejected -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        '{"agent": "hacker"}',
        "hacker",
        "The best agent is designer.",
        '{"agent": "router"}',
    ],
)
def test_unknown_name_is_rejected(answer: str) -> None:
    assert parse_choice(answer, NAMES) is None


@pytest.mark.parametrize(
    "answer", ["coder or general", "Either mind or coder could answer.", "general, coder, mind"]
)
def test_two_different_names_in_prose_are_rejected(answer: str) -> None:
    assert parse_choice(answer, NAMES) is None


@pytest.mark.parametrize("answer", ["", "   ", "\n", "{}", "[]", '{"agent": null}'])
def test_empty_or_nameless_answer_is_rejected(answer: str) -> None:
    assert parse_choice(answer, NAMES) is None


def test_name_only_as_part_of_a_longer_word_is_rejected() -> None:
    assert parse_choice("the coders and generalists", NAMES) is None


def test_json_naming_an_agent_that_is_not_a_candidate_is_rejected() -> None:
    assert parse_choice('{"agent": "mind"}', ["general", "coder"]) is None
