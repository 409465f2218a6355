"""The silent extraction turn: a finished stretch of conversation in, durable facts out.

It reads a session through Agno's session API (never raw SQL), and asks the agent's own model
for the facts worth keeping, one per line, in the conversation's language, given what memory
already holds so it does not repeat it. The model answers the no-reply token (``NO_REPLY``) or
nothing when there is nothing to keep. No Matrix access, no tools, no session of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agno.agent import Agent
from agno.db.base import SessionType
from agno.models.base import Model
from agno.run.base import RunStatus

from mindroom.errors import ModelError


@dataclass(frozen=True)
class ChatLine:
    """One message of a session's chat history."""

    role: str
    text: str


INSTRUCTIONS = [
    "You maintain the long-term memory of an assistant. You read part of a conversation and "
    "write down the durable facts worth remembering later: facts about the people (names, "
    "preferences, plans, relationships, decisions) and about the ongoing work.",
    "Write each fact as its own line starting with '- ', short and self-contained, in the "
    "language the user wrote in.",
    "Do not repeat facts listed under 'Already remembered'. Skip small talk and anything "
    "temporary.",
    "If there is nothing worth remembering, answer exactly {token} and nothing else.",
]


async def read_chat(db: object, session_id: str, team: bool) -> tuple[list[ChatLine], float]:
    """The chat history (user and assistant messages) of a session, and its ``updated_at``."""
    kind = SessionType.TEAM if team else SessionType.AGENT
    session = await db.get_session(session_id=session_id, session_type=kind)  # type: ignore[attr-defined]
    if session is None:
        return [], 0.0
    lines = [
        ChatLine(m.role, m.content if isinstance(m.content, str) else str(m.content or ""))
        for m in session.get_chat_history()
        if m.role in ("user", "assistant")
    ]
    return lines, float(session.updated_at or 0)


def bounded_chunk(lines: Sequence[ChatLine], max_messages: int, max_chars: int) -> int:
    """How many of ``lines`` (from the start) one extraction takes: at least one."""
    taken, chars = 0, 0
    for line in lines[:max_messages]:
        size = len(line.role) + 3 + len(line.text)  # as the transcript writes it: "role: text\n"
        if taken and chars + size > max_chars:
            break
        taken += 1
        chars += size
    return taken


def parse_facts(answer: str, no_reply_token: str) -> list[str]:
    """Facts in the model's answer; none for the no-reply token or an empty answer.

    Bulleted lines are facts; an answer of a single plain line is one fact.
    """
    text = answer.strip()
    if not text or text.strip("`'\". ") == no_reply_token:
        return []
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    bullets = [line[2:].strip() for line in lines if line.startswith(("- ", "* ", "• "))]
    if bullets:
        return [b for b in bullets if b and b != no_reply_token]
    return lines if len(lines) == 1 else []


async def extract_facts(
    model: Model,
    lines: Sequence[ChatLine],
    known: Sequence[str],
    *,
    no_reply_token: str,
    max_chars: int,
) -> list[str]:
    """Ask ``model`` for the durable facts in ``lines``."""
    conversation = "\n".join(f"{line.role}: {line.text}" for line in lines)[-max_chars:]
    remembered = "\n".join(f"- {k}" for k in known) or "(nothing yet)"
    prompt = (
        f"Already remembered:\n{remembered}\n\nConversation:\n{conversation}\n\n"
        f"Durable facts to remember (or {no_reply_token}):"
    )
    agent = Agent(
        model=model,
        instructions=[i.format(token=no_reply_token) for i in INSTRUCTIONS],
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


async def summarize_chat(model: Model, lines: Sequence[ChatLine]) -> str:
    """Summarize a conversation so it can continue without its older messages."""
    transcript = "\n".join(f"{line.role}: {line.text}" for line in lines)
    agent = Agent(
        model=model,
        instructions=[
            "Summarize the conversation below so that it can continue without it: who said "
            "what that still matters, open questions, decisions, names and numbers. Be concise; "
            "write in the conversation's language."
        ],
        markdown=False,
        telemetry=False,
    )
    output = await agent.arun(transcript)
    if output.status == RunStatus.error:
        raise ModelError(str(output.content or "summary failed"))
    return str(output.content or "").strip()
