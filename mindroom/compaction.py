"""Long threads: when a session nears the model's context budget, compact it.

Before a turn, the session's history is measured (about four characters a token). Past
``memory.compaction.threshold`` of the model's ``context_tokens``, mindroom hands every turn of
the session not yet in memory to the background flush (the old Agno session stays until it is
extracted, so nothing the user said is lost from memory, and the reply does not wait), then
writes a summary of the older messages and continues the thread in a fresh Agno session that
carries the summary and the most recent messages. The thread goes on as if nothing happened.
Models without ``context_tokens`` are never compacted. Sessions are per person for private
agents (see :mod:`mindroom.turns`), so each person's compaction is their own.
"""

from __future__ import annotations

import logging

from mindroom.agents.extraction import SUMMARY_MARK, ChatLine
from mindroom.agents.runner import AgentRuntime
from mindroom.config.schema import Config
from mindroom.flush import FlushWorker
from mindroom.ledger import Ledger

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4


def compacted_id(base_session: str, generation: int) -> str:
    """The Agno session a thread continues in after ``generation`` compactions."""
    return f"{base_session}~c{generation}" if generation else base_session


def needs_compaction(lines: list[ChatLine], incoming: str, budget: int, threshold: float) -> bool:
    """True when the history plus the new message nears the budget (pure)."""
    chars = sum(len(line.text) for line in lines) + len(incoming)
    return chars / CHARS_PER_TOKEN > threshold * budget


async def prepare_session(
    *,
    config: Config,
    ledger: Ledger,
    runtime: AgentRuntime,
    flush: FlushWorker,
    agent: str,
    base_session: str,
    requester: str | None,
    incoming: str,
) -> tuple[str, str]:
    """The session the next turn runs in and the text it carries over (compacting if due)."""
    generation, carried = await ledger.compaction(base_session)
    session_id = compacted_id(base_session, generation)
    model_key = config.agent_model(agent)
    budget = config.models[model_key].context_tokens
    if budget is None:
        return session_id, carried
    lines, _ = await runtime.session_chat(agent, session_id, requester, team=False)
    settings = config.memory.compaction
    if len(lines) <= settings.keep_recent_messages or not needs_compaction(
        [ChatLine("system", carried), *lines], incoming, budget, settings.threshold
    ):
        return session_id, carried
    await flush.flush_now(agent, session_id, requester)  # extracted in the background
    keep = settings.keep_recent_messages
    older, recent = lines[: len(lines) - keep], lines[len(lines) - keep :]
    summary = await runtime.summarize(
        model_key, [ChatLine("system", carried), *older] if carried else older
    )
    recent_text = "\n".join(f"{line.role}: {line.text}" for line in recent)
    carried = f"{SUMMARY_MARK}:\n{summary}\n\nThe most recent messages:\n{recent_text}"
    generation += 1
    await ledger.save_compaction(base_session, generation, carried)
    logger.info(
        "compacted a %s thread (%d messages summarized; the flush extracts them)",
        agent,
        len(older),
    )
    return compacted_id(base_session, generation), carried
