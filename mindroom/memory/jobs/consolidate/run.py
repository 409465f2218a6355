"""The ``consolidation`` maintenance job: one pass over every file-backed scope.

Scopes: every shared agent on the file backend, every team whose memory exists (named or ad
hoc), and every private root a person has (each private companion's, and the teams a private
companion joined, keyed by person). Each scope is its own pass (:mod:`.scope_pass`), run in a
worker thread; between scopes the job calls ``ctx.heartbeat()`` so a shutdown or a lost lease
ends it at a clean boundary. A scope that fails is logged and counted; the others go on.

mem0 scopes are left out: mem0 consolidates on every write itself (its add compares a new
fact with the stored ones and updates or deletes instead of duplicating), and its store takes
one process's writes, so a second writer here would be the harm, not the help.

A ``deep`` run asks the judge (the job's ``llm_command``, else the consolidation model, else
``defaults.model``) within the budget; a model that cannot be set up skips the model step of
the run and says so in the stats, it does not fail the job (the non-model merges still run).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mindroom.config.schema import Config
from mindroom.errors import ConfigError
from mindroom.memory.backend import keeps_files
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.consolidate.ask import command_ask, model_ask
from mindroom.memory.jobs.consolidate.fingerprints import Fingerprints
from mindroom.memory.jobs.consolidate.judge import Budget, PairJudge
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords, db_path
from mindroom.memory.jobs.consolidate.scope_pass import ScopePass, ScopeReport
from mindroom.memory.jobs.maintenance.runner import JobContext
from mindroom.memory.ops_events import OpEvent, emit
from mindroom.memory.private import PRIVATE_DIR
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.scope import MemoryScope

logger = logging.getLogger(__name__)

_JUDGE_TIMEOUT_S = 120.0


def team_member_lists(storage: Path, config: Config) -> Iterator[list[str]]:
    """The member lists of every shared team memory that exists on disk."""
    seen: set[tuple[str, ...]] = set()
    for team in config.teams.values():
        seen.add(tuple(sorted(set(team.agents))))
    state = storage / "mindroom_data" / "memory"
    if state.is_dir():
        for folder in sorted(state.iterdir()):
            if folder.name.startswith("team_") and "__" not in folder.name:
                seen.add(tuple(folder.name.removeprefix("team_").split("+")))
    for members in sorted(seen):
        if all(m in config.agents and config.agents[m].private is None for m in members):
            yield list(members)


def private_scopes(
    storage: Path, config: Config, backend: str = "file"
) -> Iterator[tuple[MemoryScope, str | None]]:
    """``(scope, agent)`` of every private memory folder on disk (agent None: a team's) whose
    memory is on ``backend`` (on mem0 the folders exist too, scaffolded, and the scope's state
    folder keeps its ids)."""
    base = storage / PRIVATE_DIR
    if not base.is_dir():
        return
    seen: set[Path] = set()
    for person in sorted(p for p in base.iterdir() if p.is_dir()):
        key = person.name
        for name, agent in config.agents.items():
            private = agent.private
            if private is None or config.agent_memory_backend(name) != backend:
                continue
            instance = person / name if private.per == "user_agent" else person
            root = instance / (private.root or f"{name}_data")
            if root in seen or not root.is_dir():
                continue
            seen.add(root)
            parts = root.parts
            scope_id = "private:" + ":".join(parts[parts.index(key) :])
            yield MemoryScope(scope_id, root, instance / ".state" / "memory", key), name
        teams = person / "teams"
        if teams.is_dir() and config.memory.backend == backend:
            kept = "files" if backend == "file" else ".state"
            for team in sorted(t for t in teams.iterdir() if (t / kept).is_dir()):
                scope = MemoryScope(f"{team.name}__{key}", team / "files", team / ".state", key)
                yield scope, None


def scope_memories(registry: MemoryRegistry, config: Config, storage: Path) -> Iterator[FileMemory]:
    """Every file-backed memory of the storage (see the module docstring)."""
    for name, agent in config.agents.items():
        if agent.private is None and config.agent_memory_backend(name) == "file":
            memory = registry.for_agent(name)
            if keeps_files(memory):
                yield memory
    if config.memory.backend == "file":
        for members in team_member_lists(storage, config):
            memory = registry.for_team(members)
            if keeps_files(memory):
                yield memory
    for scope, owner in private_scopes(storage, config):
        yield registry.open_private_scope(scope, owner)


def _judge(ctx: JobContext) -> tuple[PairJudge | None, str | None]:
    """The run's judge (None in light runs, or when no model can be set up: and why)."""
    if ctx.mode != "deep":
        return None, None
    settings = ctx.config.memory.maintenance.consolidation
    try:
        if ctx.job.llm_command:
            ask = command_ask(ctx.job.llm_command, _JUDGE_TIMEOUT_S)
        else:
            ask = model_ask(ctx.config, settings.model, _JUDGE_TIMEOUT_S)
    except ConfigError as exc:
        logger.warning("consolidation: no model for this run, merges without it only: %s", exc)
        return None, str(exc)
    budget = Budget(
        settings.max_model_calls_per_run, settings.max_model_calls_per_day, ctx.model_calls_today
    )
    return PairJudge(ask, budget, pairs_per_call=settings.pairs_per_call), None


def consolidate_memory(
    memory: FileMemory, config: Config, judge: PairJudge | None, now: Any
) -> ScopeReport:
    """One pass over ``memory`` (blocking)."""
    settings = config.memory.maintenance.consolidation
    records = ConsolidationRecords(db_path(memory.scope.state_dir))
    fingerprints = Fingerprints(memory.scope.state_dir / "consolidation.db", settings.recheck_days)
    try:
        report = ScopePass(
            memory, settings, judge=judge, fingerprints=fingerprints, records=records, now=now
        ).run()
    finally:
        records.close()
        fingerprints.close()
    emit(memory, *(OpEvent("worker", "merge", memory_id=kept) for kept, _, _ in report.merged))
    return report


async def run_consolidation(ctx: JobContext) -> dict[str, Any]:
    """The job: every scope once; returns the run's stats (``model_calls`` included)."""
    registry = ctx.registry or MemoryRegistry(ctx.config, ctx.storage)
    judge, no_model = _judge(ctx)
    totals: dict[str, Any] = {"scopes": 0, "scope_errors": 0}
    try:
        memories = await asyncio.to_thread(
            lambda: list(scope_memories(registry, ctx.config, ctx.storage))
        )
        for memory in memories:
            ctx.heartbeat()
            try:
                report = await asyncio.to_thread(
                    consolidate_memory, memory, ctx.config, judge, ctx.now
                )
            except Exception:
                logger.exception("consolidation of %s failed", memory.scope_id)
                totals["scope_errors"] += 1
                continue
            totals["scopes"] += 1
            for key, value in report.stats().items():
                totals[key] = totals.get(key, 0) + value
            if report.merged or report.conflicts or report.promoted or report.suggestions:
                logger.info("consolidation of %s: %s", memory.scope_id, report.stats())
    finally:
        if ctx.registry is None:
            await asyncio.to_thread(registry.close)
    totals["model_calls"] = judge.budget.calls if judge else 0
    if judge is not None:
        totals["model_failures"] = judge.failed_calls
        totals["pairs_not_asked"] = judge.unasked
    if no_model:
        totals["model_skipped"] = no_model
    return totals
