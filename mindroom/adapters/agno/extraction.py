"""The silent extraction turn: a finished stretch of conversation in, durable facts out.

It reads a session through Agno's session API (never raw SQL), run by run, so every message
keeps the Matrix ID of the person whose turn it was. The transcript names each speaker
(``@alice:example.org: ...``) and the model is asked for the facts worth keeping, one per line,
in the conversation's language, given what memory already holds so it does not repeat it.

The answer is read leniently (numbered lists, any bullet, bold, headings, code fences, plain
lines) and a refusal in any common wording counts as the no-reply token (``NO_REPLY``). An
answer with text but no readable fact raises :class:`UnreadableAnswerError`, so the caller
retries later instead of marking the conversation flushed and losing its facts.
No Matrix access, no tools, no session of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from agno.agent import Agent
from agno.db.base import SessionType
from agno.models.base import Model
from agno.run.base import RunStatus

from mindroom.errors import ModelError
from mindroom.memory.files.writing import SEMANTIC_GUARD
from mindroom.memory.search.session_index import TranscriptMessage
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


async def read_chat(db: object, session_id: str, team: bool) -> tuple[list[ChatLine], float]:
    """The chat history (user and assistant messages) of a session, and its ``updated_at``.

    Walks the session's top-level runs as Agno's ``get_chat_history`` does (member runs of a
    team and messages replayed from history are skipped), keeping each run's ``user_id``.
    """
    kind = SessionType.TEAM if team else SessionType.AGENT
    session = await db.get_session(session_id=session_id, session_type=kind)  # type: ignore[attr-defined]
    if session is None:
        return [], 0.0
    lines = []
    for run in session.runs or []:
        if getattr(run, "parent_run_id", None) is not None:
            continue  # a team member's own run: the leader's run holds the conversation
        user_id = getattr(run, "user_id", None)
        for message in run.messages or []:
            if message.role not in ("user", "assistant") or getattr(message, "from_history", False):
                continue
            content = message.content
            text = content if isinstance(content, str) else str(content or "")
            lines.append(ChatLine(message.role, text, user_id))
    return lines, float(session.updated_at or 0)


async def read_transcript(db: object, session_id: str, team: bool) -> list[TranscriptMessage]:
    """The user and assistant messages of a session with their times (for the session index,
    :mod:`mindroom.memory.search.session_source`), walked as :func:`read_chat` walks them."""
    kind = SessionType.TEAM if team else SessionType.AGENT
    session = await db.get_session(session_id=session_id, session_type=kind)  # type: ignore[attr-defined]
    if session is None:
        return []
    messages = []
    for run in session.runs or []:
        if getattr(run, "parent_run_id", None) is not None:
            continue
        user_id = getattr(run, "user_id", None)
        run_at = float(getattr(run, "created_at", 0) or 0)
        for message in run.messages or []:
            if message.role not in ("user", "assistant") or getattr(message, "from_history", False):
                continue
            content = message.content
            text = content if isinstance(content, str) else str(content or "")
            at = float(getattr(message, "created_at", 0) or run_at)
            messages.append(TranscriptMessage(message.role, text, user_id, at))
    return messages


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


async def extract_facts(
    model: Model,
    lines: Sequence[ChatLine],
    known: Sequence[str],
    *,
    no_reply_token: str,
    max_chars: int,
    categories: Sequence[str] = ("general",),
) -> list[str]:
    """Ask ``model`` for the durable facts in ``lines``, each tagged with one of ``categories``
    (see :mod:`mindroom.memory.files.facts`)."""
    conversation = transcript(lines)[-max_chars:]
    remembered = "\n".join(f"- {k}" for k in known) or "(nothing yet)"
    prompt = (
        f"Already remembered:\n{remembered}\n\nConversation:\n{conversation}\n\n"
        f"Durable facts to remember (or {no_reply_token}):"
    )
    agent = Agent(
        model=model,
        instructions=[
            i.format(token=no_reply_token, categories=", ".join(categories)) for i in INSTRUCTIONS
        ],
        markdown=False,
        telemetry=False,
    )
    output = await agent.arun(prompt)
    if output.status == RunStatus.error:
        raise ModelError(str(output.content or "extraction failed"))
    return parse_facts(str(output.content or ""), no_reply_token)


CURATION_INSTRUCTIONS = [
    "You curate the long-term memory file of an assistant. From the daily notes, pick the facts "
    "that will still matter in months (who people are, lasting preferences, decisions, "
    "commitments) and that the long-term memory does not hold yet.",
    "Write each as its own line starting with '- ', at most {limit} lines, in the notes' "
    "language. If nothing qualifies, answer exactly {token}.",
]


async def curate_facts(
    model: Model,
    daily_notes: Sequence[str],
    long_term: Sequence[str],
    *,
    limit: int,
    no_reply_token: str,
) -> list[str]:
    """Durable facts from ``daily_notes`` worth promoting into the long-term file."""
    prompt = (
        "Long-term memory now:\n"
        + ("\n".join(f"- {t}" for t in long_term) or "(empty)")
        + "\n\nDaily notes:\n"
        + "\n".join(f"- {t}" for t in daily_notes)
        + f"\n\nFacts to promote (or {no_reply_token}):"
    )
    agent = Agent(
        model=model,
        instructions=[i.format(token=no_reply_token, limit=limit) for i in CURATION_INSTRUCTIONS],
        markdown=False,
        telemetry=False,
    )
    output = await agent.arun(prompt)
    if output.status == RunStatus.error:
        raise ModelError(str(output.content or "curation failed"))
    return parse_facts(str(output.content or ""), no_reply_token)[:limit]


SUMMARY_MARK = "Summary of the earlier part of this conversation"
