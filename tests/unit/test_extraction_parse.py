"""The extraction answer parser: every common list shape is read, refusals are silent, and an
answer it cannot read is an error (so the flush retries instead of dropping the facts)."""

from __future__ import annotations

import pytest

from mindroom.memory.extraction import (
    ChatLine,
    UnreadableAnswerError,
    curation_instructions,
    curation_prompt,
    extraction_instructions,
    extraction_prompt,
    next_chunk,
    parse_facts,
    transcript,
)

FACTS = ["The user's sister is Maya", "The user lives in Porto"]


@pytest.mark.parametrize(
    "answer",
    [
        "1. The user's sister is Maya\n2. The user lives in Porto",
        "1) The user's sister is Maya\n2) The user lives in Porto",
        "* The user's sister is Maya\n* The user lives in Porto",
        "• The user's sister is Maya\n• The user lives in Porto",
        "- The user's sister is Maya\n- The user lives in Porto",
        "+ The user's sister is Maya\n+ The user lives in Porto",
        "1. **The user's sister is Maya**\n2. __The user lives in Porto__",
        "Facts:\n- The user's sister is Maya\n- The user lives in Porto",
        "Here are the facts:\n\n1. The user's sister is Maya\n2. The user lives in Porto\n",
        "**Durable facts:**\n1. The user's sister is Maya\n2. The user lives in Porto",
        "### Facts\n- The user's sister is Maya\n- The user lives in Porto",
        "```\n- The user's sister is Maya\n- The user lives in Porto\n```",
        "```markdown\n1. The user's sister is Maya\n2. The user lives in Porto\n```",
        "   1.  The user's sister is Maya  \n   2.  The user lives in Porto",
        "The user's sister is Maya\nThe user lives in Porto",
        "Here are the facts worth remembering:\nThe user's sister is Maya\nThe user lives in Porto",
    ],
    ids=[
        "numbered-dot",
        "numbered-paren",
        "star",
        "bullet-dot",
        "dash",
        "plus",
        "bold",
        "heading-line",
        "chatty-preamble",
        "bold-heading",
        "markdown-heading",
        "code-fence",
        "code-fence-with-language",
        "indented",
        "plain-lines",
        "preamble-then-plain-lines",
    ],
)
def test_every_common_list_shape_parses_to_the_facts(answer: str) -> None:
    assert parse_facts(answer, "NO_REPLY") == FACTS


@pytest.mark.parametrize(
    "answer",
    [
        "Nothing worth remembering here.",
        "No new facts.",
        "There is nothing to remember",
        "There's nothing new worth storing.",
        "Nothing new.",
        "None.",
        "No durable facts in this conversation.",
        "I didn't find anything worth remembering.",
        "Hmm, let me think.\nNothing much here.",
        "Nichts Neues.",
        "Keine neuen Fakten.",
        "Rien à retenir.",
        "Aucun fait nouveau.",
        "Nada nuevo que recordar.",
        "No hay nada que recordar.",
        "Nenhum fato novo.",
        "Niente da ricordare.",
        "NO_REPLY",
        "**NO_REPLY**",
        "```\nNO_REPLY\n```",
        "- NO_REPLY",
        "1. No new facts",
    ],
)
def test_a_refusal_in_any_common_wording_is_treated_as_no_reply(answer: str) -> None:
    assert parse_facts(answer, "NO_REPLY") == []


def test_a_fact_that_merely_starts_with_a_negation_is_still_a_fact() -> None:
    answer = (
        "- Nothing scares the user more than spiders\n"
        "- No one in the family eats meat, they keep a vegan household\n"
        "- None of the user's siblings live nearby"
    )

    assert parse_facts(answer, "NO_REPLY") == [
        "Nothing scares the user more than spiders",
        "No one in the family eats meat, they keep a vegan household",
        "None of the user's siblings live nearby",
    ]


def test_a_refusal_line_next_to_facts_drops_only_that_line() -> None:
    answer = "1. The user's sister is Maya\n2. The user lives in Porto\nNothing else worth noting."

    assert parse_facts(answer, "NO_REPLY") == FACTS


def test_sub_headings_inside_a_list_are_not_facts() -> None:
    answer = "1. Family:\n   - The user's sister is Maya\n2. Home:\n   - The user lives in Porto"

    assert parse_facts(answer, "NO_REPLY") == FACTS


@pytest.mark.parametrize(
    "answer", ["Here are the facts:", "Facts:\n\n", "```\n```\n**Facts:**", "### Facts\n"]
)
def test_an_answer_with_text_but_no_readable_fact_is_an_error_quoting_it(answer: str) -> None:
    with pytest.raises(UnreadableAnswerError, match="Facts|facts"):
        parse_facts(answer, "NO_REPLY")


@pytest.mark.parametrize("answer", ["", "  \n "])
def test_an_empty_answer_is_no_reply(answer: str) -> None:
    assert parse_facts(answer, "NO_REPLY") == []


def test_the_transcript_names_each_person_by_their_matrix_id() -> None:
    chat = [
        ChatLine("user", "my sister is Maya", "@alice:localhost"),
        ChatLine("assistant", "Nice!", "@alice:localhost"),
        ChatLine("user", "hello", None),
    ]

    assert transcript(chat) == "@alice:localhost: my sister is Maya\nassistant: Nice!\nuser: hello"


def _chat(*owners: str) -> list[ChatLine]:
    return [
        ChatLine(role, f"{who} {role} {i}", who)
        for i, who in enumerate(owners)
        for role in ("user", "assistant")
    ]


def test_next_chunk_for_a_requester_takes_only_that_persons_runs() -> None:
    chat = _chat("@alice:x", "@bob:x", "@alice:x", "@bob:x")

    chunk, cursor = next_chunk(chat, 0, "@alice:x", max_messages=20, max_chars=10_000)

    assert [line.user_id for line in chunk] == ["@alice:x"] * 4
    assert cursor == len(chat)  # bob's lines are passed over, never extracted for alice


def test_next_chunk_without_a_requester_takes_everyone() -> None:
    chat = _chat("@alice:x", "@bob:x")

    chunk, cursor = next_chunk(chat, 0, None, max_messages=20, max_chars=10_000)

    assert chunk == chat
    assert cursor == 4


def test_next_chunk_stops_the_cursor_before_the_first_line_it_did_not_take() -> None:
    chat = _chat("@alice:x", "@bob:x", "@alice:x")

    chunk, cursor = next_chunk(chat, 0, "@alice:x", max_messages=3, max_chars=10_000)

    assert [line.text for line in chunk] == [
        "@alice:x user 0",
        "@alice:x assistant 0",
        "@alice:x user 2",
    ]
    assert cursor == 5  # alice's last reply (index 5) is next; bob's lines are behind
    rest, end = next_chunk(chat, cursor, "@alice:x", max_messages=3, max_chars=10_000)
    assert [line.text for line in rest] == ["@alice:x assistant 2"]
    assert end == 6


def test_the_extraction_prompt_lists_what_is_known_then_the_end_of_the_conversation() -> None:
    lines = [ChatLine("user", "x" * 50, "@alice:example.org"), ChatLine("user", "I moved to Porto")]
    prompt = extraction_prompt(
        lines, ["The user's sister is Maya"], no_reply_token="NO_REPLY", max_chars=30
    )
    assert prompt == (
        "Already remembered:\n- The user's sister is Maya\n\nConversation:\n"
        f"{transcript(lines)[-30:]}\n\nDurable facts to remember (or NO_REPLY):"
    )
    assert "@alice" not in prompt  # only the last max_chars of the transcript
    empty = extraction_prompt(lines, [], no_reply_token="NO_REPLY", max_chars=1000)
    assert empty.startswith("Already remembered:\n(nothing yet)\n\nConversation:\n@alice")
    told = extraction_instructions("NO_REPLY", ["profile", "goals"])
    assert any("one of: profile, goals;" in line for line in told)
    assert told[-1].endswith("answer exactly NO_REPLY and nothing else.")


def test_the_curation_prompt_shows_the_long_term_file_then_the_daily_notes() -> None:
    assert curation_prompt(["Bob likes jazz"], [], "NO_REPLY") == (
        "Long-term memory now:\n(empty)\n\nDaily notes:\n- Bob likes jazz\n\n"
        "Facts to promote (or NO_REPLY):"
    )
    assert "at most 3 lines" in " ".join(curation_instructions("NO_REPLY", 3))
