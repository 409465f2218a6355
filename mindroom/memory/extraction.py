"""Extraction without the model call: chat lines, the transcript, the instructions, how a
session is cut into chunks, and how the model's answer is read.

The model call itself (an Agno agent) and reading a session from Agno's store live in
:mod:`mindroom.adapters.agno.extraction`; everything here is plain data in, plain data out.

The answer is read leniently (numbered lists, any bullet, bold, headings, code fences, plain
lines) and a refusal in any common wording counts as the no-reply token (``NO_REPLY``). An
answer with text but no readable fact raises :class:`UnreadableAnswerError`, so the caller
retries later instead of marking the conversation flushed and losing its facts.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from mindroom.errors import ModelError
from mindroom.memory.files.writing import SEMANTIC_GUARD
from mindroom.speakers import named_line


@dataclass(frozen=True)
class ChatLine:
    """One message of a session's chat history, and whose turn (Agno run) it belongs to."""

    role: str
    text: str
    user_id: str | None = None  # the Matrix ID the run was made for, when known

    @property
    def speaker(self) -> str:
        """How the transcript names the author: a person's Matrix ID, else the role."""
        if self.role == "user" and self.user_id:
            return self.user_id
        return self.role

    @property
    def line(self) -> str:
        """The transcript's line: ``speaker: text`` (see :func:`mindroom.speakers.named_line`)."""
        if self.role == "user" and self.user_id:
            return named_line(self.text, self.user_id)
        return f"{self.role}: {self.text}"


class UnreadableAnswerError(ModelError):
    """The model answered text in which no fact and no refusal could be read."""


def transcript(lines: Sequence[ChatLine]) -> str:
    """The conversation as the extractor reads it, one ``speaker: text`` line per message."""
    return "\n".join(line.line for line in lines)


INSTRUCTIONS = [
    "You maintain the long-term memory of an assistant. You read part of a conversation and "
    "write down the durable facts worth remembering later: facts about the people (names, "
    "preferences, plans, relationships, decisions) and about the ongoing work.",
    "Each line of the conversation starts with who wrote it: a person's Matrix ID (like "
    "@alice:example.org) or 'assistant'. Attribute every fact to the person who said it.",
    "Write each fact as its own line starting with '- ', short and self-contained, in the "
    "language the user wrote in.",
    "Do not repeat facts listed under 'Already remembered'. Skip small talk and anything "
    "temporary.",
    SEMANTIC_GUARD,
    "Start each fact with its category in brackets, one of: {categories}; add its importance "
    "from 1 (trivia) to 5 (essential) after a comma when it is clearly high or low, e.g. "
    "'- [preferences, 4] Alice prefers green tea'. At most 5 facts.",
    "If there is nothing worth remembering, answer exactly {token} and nothing else.",
]


def bounded_chunk(lines: Sequence[ChatLine], max_messages: int, max_chars: int) -> int:
    """How many of ``lines`` (from the start) one extraction takes: at least one."""
    taken, chars = 0, 0
    for line in lines[:max_messages]:
        size = len(line.line) + 1  # as the transcript writes it
        if taken and chars + size > max_chars:
            break
        taken += 1
        chars += size
    return taken


def next_chunk(
    lines: Sequence[ChatLine],
    cursor: int,
    requester: str | None,
    *,
    max_messages: int,
    max_chars: int,
) -> tuple[list[ChatLine], int]:
    """The next lines to extract after ``cursor``, and the cursor once they are stored.

    With a ``requester`` only the lines of that person's runs are taken (their messages and
    the replies to them): a session several people share never puts one person's words into
    another's memory. Other people's lines are passed over, and the cursor (an index into all
    ``lines``) stops right before the first own line not taken, so nothing is skipped.
    """
    own = [
        (index, line)
        for index, line in enumerate(lines)
        if index >= cursor and (requester is None or line.user_id in (requester, None))
    ]
    count = bounded_chunk([line for _, line in own], max_messages, max_chars)
    chunk = [line for _, line in own[:count]]
    end = own[count][0] if count < len(own) else len(lines)
    return chunk, max(end, cursor)


def extraction_prompt(
    lines: Sequence[ChatLine], known: Sequence[str], *, no_reply_token: str, max_chars: int
) -> str:
    """What the extractor is asked: what memory holds already, then the last ``max_chars`` of
    the transcript of ``lines``."""
    conversation = transcript(lines)[-max_chars:]
    remembered = "\n".join(f"- {k}" for k in known) or "(nothing yet)"
    return (
        f"Already remembered:\n{remembered}\n\nConversation:\n{conversation}\n\n"
        f"Durable facts to remember (or {no_reply_token}):"
    )


def extraction_instructions(no_reply_token: str, categories: Sequence[str]) -> list[str]:
    """:data:`INSTRUCTIONS` for ``categories`` and the no-reply token."""
    return [i.format(token=no_reply_token, categories=", ".join(categories)) for i in INSTRUCTIONS]


# -- reading the answer -----------------------------------------------------------------------

_FENCE = re.compile(r"^\s*(```|~~~)")
_LIST_ITEM = re.compile(r"^\s*(?:[-*•+‣◦–—]|\(?\d{1,3}[.)]|\(\d{1,3}\))\s+(.*)$")
_HEADING = re.compile(r"^\s*#{1,6}\s")
_EMPHASIS = re.compile(r"(\*\*|__)(.+?)\1")
_PREAMBLE = re.compile(
    r"^(here (is|are)|below (is|are)|sure|okay|ok|certainly|of course)\b", re.IGNORECASE
)
# A refusal is short, starts with a negation and speaks about memory, facts or news; a fact
# that merely starts with "Nothing" or "No" ("Nothing scares the user more than spiders", "No one
# in the family eats meat") does not.
_NEGATION = (
    r"(nothing|none|no|not any|there (is|are|was) (nothing|no)|there'?s (nothing|no)|"
    r"i (did not|didn't|do not|don't|could not|couldn't|can't|cannot) (find|see|identify)|"
    r"nichts|keine?n?|es gibt (nichts|keine)|rien|aucune?|il n'y a (rien|pas|aucun)|pas de|"
    r"nada|no hay|ning[uú]na?|nenhuma?|n[aã]o h[aá]|niente|nulla|nessuna?|non c'[eè])"
)
_ABOUT_MEMORY = (
    r"(remember|memor|facts?\b|worth|noteworthy|notable|durable|\bnew\b|relevant|important|"
    r"significant|lasting|to (add|note|save|store|keep|record)|"
    r"merken|erinner|fakt|neue|wert|speicher|"
    r"retenir|fait|nouveau|nouvel|m[ée]mor|noter|"
    r"recordar|hecho|nuev|guardar|lembrar|fato|facto|novo|nova|relevante|importante|"
    r"ricordare|fatt|nuov|salvare|da segnalare)"
)
_REFUSAL = re.compile(rf"^{_NEGATION}\b.{{0,40}}?{_ABOUT_MEMORY}", re.IGNORECASE)
_BARE_REFUSAL = re.compile(
    r"^(none|nothing|n/?a|nichts|rien|nada|niente)"
    r"( (much|else|new|here|at all|to add|of note|this time|for now|so far))*$",
    re.IGNORECASE,
)
_REFUSAL_MAX_WORDS = 12


def _clean(text: str) -> str:
    """A line without markdown emphasis or inline-code ticks, trimmed."""
    text = _EMPHASIS.sub(r"\2", text).strip()
    return text.strip("`").strip()


def _bare(text: str) -> str:
    return text.strip("`'\"*_.!:;, ").strip()


def _is_refusal(text: str, no_reply_token: str) -> bool:
    bare = _bare(text)
    if bare == no_reply_token or _BARE_REFUSAL.match(bare):
        return True
    return len(bare.split()) <= _REFUSAL_MAX_WORDS and bool(_REFUSAL.match(bare))


def parse_facts(answer: str, no_reply_token: str) -> list[str]:
    """The facts in the model's answer; none for the no-reply token, a refusal or no answer.

    List items of any common shape (``-``, ``*``, ``•``, ``+``, ``1.``, ``1)``) are facts; with
    no list at all, each plain line is one. Headings, preambles ("Here are the facts:"), code
    fences and emphasis are dropped. Raises :class:`UnreadableAnswerError` (quoting the answer)
    when the answer holds text but neither a fact nor a refusal.
    """
    items: list[str] = []
    plain: list[str] = []
    refused = False
    for raw in answer.splitlines():
        if not raw.strip() or _FENCE.match(raw) or _HEADING.match(raw):
            continue
        item = _LIST_ITEM.match(raw)
        text = _clean(item.group(1) if item else raw)
        if not text:
            continue
        if _is_refusal(text, no_reply_token):
            refused = True
        elif text.endswith(":") or (not item and _PREAMBLE.match(text)):
            continue  # a heading, a preamble or a sub-heading of a list
        else:
            (items if item else plain).append(text)
    facts = items or ([] if refused else plain)
    if not facts and not refused and answer.strip():
        snippet = " ".join(answer.split())[:160]
        raise UnreadableAnswerError(f"no fact could be read in the model's answer: {snippet!r}")
    return facts


CURATION_INSTRUCTIONS = [
    "You curate the long-term memory file of an assistant. From the daily notes, pick the facts "
    "that will still matter in months (who people are, lasting preferences, decisions, "
    "commitments) and that the long-term memory does not hold yet.",
    "Write each as its own line starting with '- ', at most {limit} lines, in the notes' "
    "language. If nothing qualifies, answer exactly {token}.",
]


SUMMARY_MARK = "Summary of the earlier part of this conversation"


def curation_prompt(
    daily_notes: Sequence[str], long_term: Sequence[str], no_reply_token: str
) -> str:
    """What the curator is asked: the long-term file now, then the daily notes."""
    return (
        "Long-term memory now:\n"
        + ("\n".join(f"- {t}" for t in long_term) or "(empty)")
        + "\n\nDaily notes:\n"
        + "\n".join(f"- {t}" for t in daily_notes)
        + f"\n\nFacts to promote (or {no_reply_token}):"
    )


def curation_instructions(no_reply_token: str, limit: int) -> list[str]:
    """:data:`CURATION_INSTRUCTIONS` for ``limit`` facts and the no-reply token."""
    return [i.format(token=no_reply_token, limit=limit) for i in CURATION_INSTRUCTIONS]
