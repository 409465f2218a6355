"""Theory-of-mind insights: a background pass that notes how a person relates.

After the flush has extracted a conversation, and at most once every ``min_hours`` (24) per
person and memory, one budgeted model call (temperature 0, at most ``max_tokens`` tokens) reads
the latest entries (up to 5), the newest lasting facts (up to 3) and the end of the
conversation (up to 1,000 characters) and answers JSON::

    {"insights": [{"summary": "Alice opens up more when mistakes are admitted.",
                   "tags": ["trust"], "importance": 2}]}

Each summary (at most 3) goes through the writing validator (third person, 1-2 sentences,
280 characters); the ones that pass are written to ``insights.md`` as entries of type
``insight`` in category ``relationship_dynamic`` (importance 2 unless the model said
otherwise), through the agent's view (its allowlist applies). Nothing is written when the
answer holds none. Recall shows insights only when relevant, at half their score and at most
the category's ``rag_length`` (2). The pass runs inside the flush worker, never in a reply.
The time of each person's last pass is kept in ``consolidation.db`` (control state).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from mindroom.config.memory_schema import InsightsConfig
from mindroom.config.schema import Config
from mindroom.memory.backend import keeps_files
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.store import FileMemory
from mindroom.memory.files.writing import validate
from mindroom.memory.policy.consent import ConsentPending, WriteConsent
from mindroom.memory.policy.view import AgentView
from mindroom.store.migrations import open_store, transaction
from mindroom.store.schemas import CONSOLIDATION

logger = logging.getLogger(__name__)

INSIGHTS_FILE = "insights.md"
CATEGORY = "relationship_dynamic"
INSIGHT_WEIGHT = 0.5  # recall ranks an insight at this share of its score
PROMPT = (
    "You read notes an assistant keeps about a person and the end of a conversation with "
    "them. Write 1 to 3 insights about how the person thinks, feels or relates (trust, "
    "emotions, how their preferences evolve), each a third-person sentence about the person "
    "by name, with no pronouns for the assistant, at most 280 characters. Answer only JSON: "
    '{"insights": [{"summary": "...", "tags": ["..."], "importance": 2}]}, or '
    '{"insights": []} when nothing is clear.'
)

Ask = Callable[[str, str], Awaitable[str]]  # (instructions, prompt) -> the model's answer


@dataclass(frozen=True)
class InsightSettings:
    """``memory.insights``."""

    enabled: bool = False
    min_hours: float = 24
    max_tokens: int = 220

    @classmethod
    def of(cls, config: InsightsConfig) -> InsightSettings:
        return cls(config.enabled, config.min_hours, config.max_tokens)


def _last_runs(memory: FileMemory) -> Any:
    return open_store(memory.scope.state_dir / "consolidation.db", CONSOLIDATION)


def due(memory: FileMemory, person: str, settings: InsightSettings, now: float) -> bool:
    """Whether ``person``'s insights in ``memory`` may be looked for now."""
    db = _last_runs(memory)
    try:
        row = db.execute("SELECT at FROM insight_runs WHERE person = ?", (person,)).fetchone()
    finally:
        db.close()
    return row is None or now - float(row["at"]) >= settings.min_hours * 3600


def _mark(memory: FileMemory, person: str, now: float) -> None:
    db = _last_runs(memory)
    try:
        with transaction(db):
            db.execute("INSERT OR REPLACE INTO insight_runs VALUES (?, ?)", (person, now))
    finally:
        db.close()


def prompt_for(view: AgentView, person: str, snippet: str) -> str:
    """The pass's prompt: latest entries, newest lasting facts, the conversation's end (only
    entries the agent's view may read: the read gate, as in every turn)."""
    entries = view.list_sync(200)
    latest = [e.text for e in entries if e.path.startswith("memory/")][:5]
    lasting = [e.text for e in entries if e.fields.type_in(e.path) == "semantic"][-3:]
    return "\n".join(
        [
            f"Person: {person}",
            "",
            "Latest notes:",
            *(f"- {t}" for t in latest or ["(none)"]),
            "",
            "Lasting facts:",
            *(f"- {t}" for t in lasting or ["(none)"]),
            "",
            "End of the conversation:",
            snippet[-1000:],
            "",
            "Insights as JSON:",
        ]
    )


def parse_insights(answer: str) -> list[tuple[str, int]]:
    """``(summary, importance)`` of the answer's insights (at most 3); [] when unreadable."""
    match = re.search(r"\{.*\}", answer, re.S)
    if match is None:
        return []
    try:
        data = json.loads(match.group(0))
    except ValueError:
        return []
    found = []
    for item in (data.get("insights") or [])[:3] if isinstance(data, dict) else []:
        if isinstance(item, dict) and isinstance(item.get("summary"), str):
            importance = item.get("importance", 2)
            level = importance if isinstance(importance, int) and 1 <= importance <= 5 else 2
            found.append((item["summary"], level))
    return found


async def look_for_insights(
    view: AgentView,
    person: str,
    snippet: Sequence[str],
    ask: Ask,
    settings: InsightSettings,
    *,
    now: float | None = None,
) -> list[str]:
    """One pass for ``person`` (see the module docstring); the texts written."""
    import asyncio

    memory = view.memory
    if not settings.enabled or not keeps_files(memory) or not view.access.may(CATEGORY):
        return []
    now = now or time.time()
    if not await asyncio.to_thread(due, memory, person, settings, now):
        return []
    await asyncio.to_thread(_mark, memory, person, now)  # once a day even when it fails
    prompt = await asyncio.to_thread(prompt_for, view, person, "\n".join(snippet))
    answer = await ask(PROMPT, prompt)
    written = []
    for summary, importance in parse_insights(answer):
        verdict = validate(summary)
        if not verdict.accepted:
            logger.info("insight for %s not written (%s)", person, "; ".join(verdict.reasons))
            continue
        fields = EntryFields(category=CATEGORY, importance=importance, type="insight")
        try:
            added = await asyncio.to_thread(
                partial(view.append_unique_sync, consent=WriteConsent.model(person)),
                verdict.text,
                actor="insights",
                path=INSIGHTS_FILE,
                fields=fields,
            )
        except ConsentPending as held:  # a model's insight is nobody's consent
            logger.info("insight for %s waits for consent: %s", person, held)
            continue
        if added is not None:
            written.append(added.text)
    return written


async def after_flush(
    config: Config, view: AgentView, person: str | None, lines: Sequence[str], model_key: str
) -> list[str]:
    """The flush's insight pass for ``person`` after extracting ``lines`` (nothing when off,
    not due, or no one person); a failure is logged, never raised into the flush."""
    import asyncio

    from mindroom.memory.jobs.consolidate.ask import model_ask

    settings = InsightSettings.of(config.memory.insights)
    if not settings.enabled or person is None:
        return []
    try:
        blocking = model_ask(config, model_key, 60, temperature=0.0, max_tokens=settings.max_tokens)

        async def ask(system: str, user: str) -> str:
            return await asyncio.to_thread(blocking, system, user)

        return await look_for_insights(view, person, lines, ask, settings)
    except Exception as exc:  # insights are extra: the flush is done either way
        logger.warning("insights for %s in %s failed: %s", person, view.scope_id, exc)
        return []
