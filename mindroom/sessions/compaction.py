"""Long conversations: compact a session's history into a summary plus its recent turns.

A compaction hands every turn of the session not yet in memory to the background flush (the
old Agno session stays until it is extracted, so nothing said is lost from memory, and the
reply does not wait), writes a summary of the older messages (staged in chunks for long
histories, see :mod:`mindroom.adapters.agno.summaries`), lists the session's failed tool calls and
memory file operations beside it, and continues in a fresh Agno session that carries the
summary and the most recent messages verbatim. The conversation goes on as if nothing
happened; the compaction count (``!status``) is the session's generation here.

It happens:

* before a turn, when the history plus the new message passes ``memory.compaction.threshold``
  of the model's ``context_tokens`` (about four characters a token; models without
  ``context_tokens`` are never compacted this way);
* on ``!compact [instructions]``, at once;
* when the model answers a turn with a context-overflow error (see :mod:`mindroom.pipeline.answer`):
  once, then the turn is retried.

Sessions are per person for private agents (see :mod:`mindroom.pipeline.turns`), so each person's
compaction is their own.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from mindroom.adapters.agno.runner import AgentRuntime
from mindroom.config.schema import Config
from mindroom.memory.extraction import SUMMARY_MARK, ChatLine
from mindroom.memory.flush.loop import FlushWorker
from mindroom.store.ledger import Ledger

logger = logging.getLogger(__name__)

Compacted_ = Callable[[str, str, str | None], Awaitable[None]]
"""Told (agent, the session compaction left, requester) after a compaction."""

CHARS_PER_TOKEN = 4
DEFAULT_CHUNK_CHARS = 24_000  # a summary stage's input when the model's context is unknown
RECENT_LINE_CHARS = 4_000  # a recent message carried verbatim is cut to this


def compacted_id(base_session: str, generation: int) -> str:
    """The Agno session a conversation continues in after ``generation`` compactions."""
    return f"{base_session}~c{generation}" if generation else base_session


def needs_compaction(lines: list[ChatLine], incoming: str, budget: int, threshold: float) -> bool:
    """True when the history plus the new message nears the budget (pure)."""
    chars = sum(len(line.text) for line in lines) + len(incoming)
    return chars / CHARS_PER_TOKEN > threshold * budget


def chunk_chars(context_tokens: int | None) -> int:
    """How much transcript one summary stage reads: 40% of the model's context."""
    if context_tokens is None:
        return DEFAULT_CHUNK_CHARS
    return max(1_000, int(context_tokens * CHARS_PER_TOKEN * 0.4))


@dataclass(frozen=True)
class Compacted:
    """The outcome of a compaction: where the conversation continues and with what."""

    session_id: str
    carried: str
    generation: int  # how many compactions the session has had
    summarized: int  # messages replaced by the summary
    kept: int  # recent messages carried verbatim


class Compactor:
    """Compacts the sessions of one bot (see the module docstring)."""

    def __init__(
        self,
        config: Callable[[], Config],
        ledger: Ledger,
        runtime: AgentRuntime,
        flush: FlushWorker,
        compacted: Compacted_ | None = None,
    ) -> None:
        self._config = config  # read at every use: a reload applies at the next compaction
        self._compacted = compacted  # told (agent, left session, requester) after each one
        self.ledger = ledger
        self._runtime = runtime
        self._flush = flush

    @property
    def config(self) -> Config:
        return self._config()

    async def current(self, base_session: str) -> tuple[str, str, int]:
        """The session ``base_session`` continues in now, what it carries, its compactions."""
        generation, carried = await self.ledger.compactions.get(base_session)
        return compacted_id(base_session, generation), carried, generation

    async def prepare(
        self, agent: str, base_session: str, requester: str | None, incoming: str
    ) -> tuple[str, str]:
        """The session the next turn runs in and the text it carries (compacting if due)."""
        session_id, carried, _ = await self.current(base_session)
        budget = self.config.chat_model(self.config.agent_model(agent)).context_tokens
        if budget is None:
            return session_id, carried
        lines, _ = await self._runtime.session_chat(agent, session_id, requester, team=False)
        settings = self.config.memory.compaction
        if len(lines) <= settings.keep_recent_messages or not needs_compaction(
            [ChatLine("system", carried), *lines], incoming, budget, settings.threshold
        ):
            return session_id, carried
        done = await self.compact(agent, base_session, requester, read=lines)
        return (done.session_id, done.carried) if done else (session_id, carried)

    async def compact(
        self,
        agent: str,
        base_session: str,
        requester: str | None,
        *,
        instructions: str = "",
        overflow: bool = False,
        read: list[ChatLine] | None = None,
    ) -> Compacted | None:
        """Compact the session now; None when it holds nothing older than the recent turns.

        ``overflow`` (the model refused the prompt as too long) keeps fewer recent messages:
        at most half of them, so the compacted prompt is smaller whatever the history.
        ``read``: the session's chat, when the caller has just read it.
        """
        session_id, carried, generation = await self.current(base_session)
        if read is None:
            read, _ = await self._runtime.session_chat(agent, session_id, requester, team=False)
        lines = read
        keep = self.config.memory.compaction.keep_recent_messages
        if overflow:
            keep = min(keep, len(lines) // 2)
        if len(lines) <= keep or not lines:
            return None
        await self._flush.flush_now(agent, session_id, requester)  # extracted in the background
        older, recent = lines[: len(lines) - keep], lines[len(lines) - keep :]
        model_key = self.config.agent_model(agent)
        summary = await self._runtime.summarize(
            model_key,
            [ChatLine("system", carried), *older] if carried else older,
            chunk_chars=chunk_chars(self.config.chat_model(model_key).context_tokens),
            instructions=instructions,
        )
        notes = await self._runtime.session_notes(agent, session_id, requester, team=False)
        carried = render_carried(summary, notes.render(), recent)
        generation += 1
        await self.ledger.compactions.save(base_session, generation, carried)
        if self._compacted is not None:
            await self._compacted(agent, session_id, requester)
        logger.info(
            "compacted a session of %s (%d messages summarized, %d kept; the flush extracts them)",
            agent,
            len(older),
            len(recent),
        )
        return Compacted(
            compacted_id(base_session, generation), carried, generation, len(older), len(recent)
        )


def render_carried(summary: str, notes: str, recent: list[ChatLine]) -> str:
    """What a compacted session carries into its next turns (pure)."""
    parts = [f"{SUMMARY_MARK}:\n{summary}"]
    if notes:
        parts.append(notes)
    if recent:
        lines = []
        for line in recent:
            text = line.text
            if len(text) > RECENT_LINE_CHARS:
                text = text[:RECENT_LINE_CHARS] + " [...]"
            lines.append(f"{line.role}: {text}")
        parts.append("The most recent messages:\n" + "\n".join(lines))
    return "\n\n".join(parts)
