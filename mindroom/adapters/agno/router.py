"""The router model: pick the agent for a message that names none.

One small, structured question to the router model: given the room's agents with their roles
and the last few messages, which agent should answer? The answer is a JSON object
``{"agent": "<name>"}``; a bare name in the text is accepted too. Anything else is a
:class:`~mindroom.errors.ModelError`, and the caller falls back to a deterministic choice.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence

from agno.agent import Agent
from agno.models.base import Model
from agno.run.base import RunStatus

from mindroom.errors import ModelError
from mindroom.pipeline.routing import fallback_choice

logger = logging.getLogger(__name__)

_INSTRUCTIONS = [
    "You route chat messages to the single best-suited agent.",
    'Reply with JSON only, exactly of the form {"agent": "<name>"}, using one of the listed '
    "agent names. No other text.",
]


def router_prompt(
    candidates: Sequence[tuple[str, str]], recent: Sequence[str], message: str
) -> str:
    """The question put to the router model."""
    agents = "\n".join(f"- {name}: {role or '(no role given)'}" for name, role in candidates)
    history = "\n".join(recent) or "(none)"
    return (
        f"Agents:\n{agents}\n\nRecent messages:\n{history}\n\n"
        f"New message:\n{message}\n\nWhich agent should answer?"
    )


def parse_choice(answer: str, names: Sequence[str]) -> str | None:
    """The agent named in the router model's ``answer``, or None."""
    match = re.search(r"\{.*\}", answer, re.DOTALL)
    if match:
        try:
            chosen = json.loads(match.group(0)).get("agent")
        except (ValueError, AttributeError):
            chosen = None
        if isinstance(chosen, str) and chosen.strip().lower() in names:
            return chosen.strip().lower()
    words = re.findall(r"[a-z0-9_]+", answer.lower())
    found = [name for name in names if name in words]
    return found[0] if len(found) == 1 else None


async def choose_agent(
    model: Model,
    candidates: Sequence[tuple[str, str]],
    recent: Sequence[str],
    message: str,
) -> str:
    """Ask the router model which of ``candidates`` (name, role) answers ``message``."""
    names = [name for name, _ in candidates]
    agent = Agent(model=model, instructions=_INSTRUCTIONS, telemetry=False, markdown=False)
    try:
        output = await agent.arun(router_prompt(candidates, recent, message))
    except Exception as exc:  # the router is an edge too: its failure must not silence a room
        raise ModelError(f"router model failed: {exc}") from exc
    if output.status == RunStatus.error:
        raise ModelError(f"router model failed: {output.content}")
    answer = output.content if isinstance(output.content, str) else ""
    chosen = parse_choice(answer, names)
    if chosen is None:
        raise ModelError(f"router model named no known agent: {answer[:200]!r}")
    return chosen


async def choose_or_fall_back(
    model: Model,
    candidates: Sequence[tuple[str, str]],
    recent: Sequence[str],
    message: str,
    event_id: str,
) -> str:
    """The router model's choice, or the deterministic fallback (logged) when it fails."""
    try:
        chosen = await choose_agent(model, candidates, recent, message)
    except ModelError as exc:
        chosen = fallback_choice([name for name, _ in candidates])
        logger.warning("%s; falling back to %s for %s", exc, chosen, event_id)
        return chosen
    logger.info("router chose %s for %s", chosen, event_id)
    return chosen
