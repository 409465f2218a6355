"""TTL: memory nobody uses expires (soft-deleted), then is purged, and can come back.

A daily maintenance job (type ``lifecycle``, see :mod:`mindroom.memory.jobs.maintenance.runner`)
runs
:func:`expire_and_purge` over every file-backed scope:

* **Expire.** An entry is soft-deleted when it was last used more than ``ttl_days`` ago, its
  importance is below ``importance_below`` and it is not pinned: its marker gets
  ``state=soft_deleted purge=<today + purge_after_days>`` (the history records a ``ttl``
  event). Retrieval never returns it from then on (:mod:`mindroom.memory.policy.filters`), and
  ``mindroom memory restore ID`` makes it live again.
* **Purge.** A soft-deleted entry whose purge day has come is removed from its file; the
  history keeps its text and fields (a ``purge`` event), so even then it can be restored.

"Last used" is the latest of: the last time an agent read it (recall, a tool's search or get,
``memory_query``; kept in the scope's ``consolidation.db`` beside the retrieval counts, so a
read never rewrites a file), the day it was last changed (``updated``), written (``created``)
or, in a daily file, the file's day. An entry with none of these is never expired (there is
no evidence it is old). Left alone on purpose: lines people wrote by hand (they have no marker
to carry the state, and a person's line is not rewritten behind their back) and ``MEMORY.md``,
the curated file every turn reads whole.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from dataclasses import dataclass, field, replace
from typing import Any

from mindroom.config.memory_schema import LifecycleConfig
from mindroom.errors import MemoryStoreError
from mindroom.memory.files.fields import EntryFields, render_fields
from mindroom.memory.files.history import HistoryRecord
from mindroom.memory.files.markdown import MemoryEntry, parse_entries, remove_entry, replace_entry
from mindroom.memory.files.store import FileMemory, skip_unreadable
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords, db_path
from mindroom.memory.jobs.maintenance.runner import JobContext
from mindroom.memory.jobs.maintenance.schedule import zone
from mindroom.memory.ops_events import OpEvent, emit
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.scope import ENTRYPOINT
from mindroom.memory.search.index import memory_files

logger = logging.getLogger(__name__)

ACTOR = "lifecycle"


@dataclass(frozen=True)
class LifecycleSettings:
    """``memory.lifecycle``."""

    ttl_days: int = 60
    importance_below: int = 3
    purge_after_days: int = 30

    @classmethod
    def of(cls, config: LifecycleConfig) -> LifecycleSettings:
        return cls(config.ttl_days, config.importance_below, config.purge_after_days)


@dataclass
class LifecycleReport:
    """What one pass over a scope did."""

    expired: list[str] = field(default_factory=list)
    purged: list[str] = field(default_factory=list)

    def stats(self) -> dict[str, int]:
        return {"expired": len(self.expired), "purged": len(self.purged)}


def last_used(entry: MemoryEntry, read_at: float | None) -> dt.date | None:
    """The latest day ``entry`` was read, changed or written (None: no evidence)."""
    fields = entry.fields
    days = [d for d in (fields.updated, fields.created, entry.date) if d is not None]
    if read_at is not None:
        days.append(dt.datetime.fromtimestamp(read_at).date())
    return max(days, default=None)


def expires(
    entry: MemoryEntry, read_at: float | None, settings: LifecycleSettings, today: dt.date
) -> bool:
    """Whether ``entry`` expires today (see the module docstring)."""
    fields = entry.fields
    if entry.hand_written or entry.path == ENTRYPOINT or fields.pinned or fields.soft_deleted:
        return False
    if fields.importance_or_default >= settings.importance_below:
        return False
    used = last_used(entry, read_at)
    return used is not None and (today - used).days > settings.ttl_days


def expire_and_purge(
    memory: FileMemory, settings: LifecycleSettings, today: dt.date
) -> LifecycleReport:
    """One pass over ``memory`` (blocking): expire what is unused, purge what is due."""
    report = LifecycleReport()
    records = ConsolidationRecords(db_path(memory.scope.state_dir))
    try:
        read_at = records.last_retrieved()
    finally:
        records.close()
    purge_day = today + dt.timedelta(days=settings.purge_after_days)
    for relative, _ in memory_files(memory.scope.root):
        try:
            entries = memory.entries_of(relative)
        except MemoryStoreError as exc:  # an unreadable file is skipped, not fatal
            skip_unreadable(memory.scope, relative, exc)
            continue
        for entry in entries:
            fields = entry.fields
            if fields.soft_deleted and fields.purge is not None and fields.purge <= today:
                if _purge(memory, entry):
                    report.purged.append(entry.id)
                    emit(memory, OpEvent("worker", "delete", memory_id=entry.id))
            elif expires(entry, read_at.get(entry.id), settings, today):
                gone = replace(fields, state="soft_deleted", purge=purge_day)
                if _expire(memory, entry, gone):
                    report.expired.append(entry.id)
                    emit(memory, OpEvent("worker", "ttl", memory_id=entry.id))
    return report


def _expire(memory: FileMemory, entry: MemoryEntry, fields: EntryFields) -> bool:
    def record() -> HistoryRecord:
        return memory.history.append(
            actor=ACTOR,
            op="ttl",
            entry_id=entry.id,
            path=entry.path,
            old=entry.text,
            new=entry.text,
            meta={"fields": render_fields(fields), "old_fields": render_fields(entry.fields)},
        )

    def edit(document: str) -> str | None:
        if not _unchanged(document, entry):
            return None  # edited meanwhile: the next pass looks again
        return replace_entry(document, entry.path, entry.id, entry.text, fields)

    old, new = memory.write(entry.path, edit, record)
    return old != new


def _purge(memory: FileMemory, entry: MemoryEntry) -> bool:
    def record() -> HistoryRecord:
        # "delete" with the fields kept, so `memory restore` finds it like any deletion
        return memory.history.append(
            actor=ACTOR,
            op="delete",
            entry_id=entry.id,
            path=entry.path,
            old=entry.text,
            new=None,
            meta={"fields": render_fields(entry.fields), "why": "purge"},
        )

    def edit(document: str) -> str | None:
        if not _unchanged(document, entry):
            return None
        return remove_entry(document, entry.path, entry.id)

    old, new = memory.write(entry.path, edit, record)
    return old != new


def _unchanged(document: str, entry: MemoryEntry) -> bool:
    current = next((e for e in parse_entries(document, entry.path) if e.id == entry.id), None)
    return current is not None and (current.text, current.fields) == (entry.text, entry.fields)


async def run_lifecycle(ctx: JobContext) -> dict[str, Any]:
    """The ``lifecycle`` maintenance job: every file-backed scope once (mem0 keeps no
    fields); returns the run's stats."""
    from mindroom.memory.jobs.consolidate.run import (
        scope_memories,  # the scopes consolidation walks
    )

    settings = LifecycleSettings.of(ctx.config.memory.lifecycle)
    today = ctx.now.astimezone(zone(ctx.config.memory.maintenance.timezone)).date()
    registry = ctx.registry or MemoryRegistry(ctx.config, ctx.storage)
    totals: dict[str, Any] = {"scopes": 0, "scope_errors": 0, "expired": 0, "purged": 0}
    try:
        memories = await asyncio.to_thread(
            lambda: list(scope_memories(registry, ctx.config, ctx.storage))
        )
        for memory in memories:
            ctx.heartbeat()
            try:
                report = await asyncio.to_thread(expire_and_purge, memory, settings, today)
            except Exception:
                logger.exception("lifecycle of %s failed", memory.scope_id)
                totals["scope_errors"] += 1
                continue
            totals["scopes"] += 1
            for key, value in report.stats().items():
                totals[key] += value
            if report.expired or report.purged:
                logger.info("lifecycle of %s: %s", memory.scope_id, report.stats())
    finally:
        if ctx.registry is None:
            await asyncio.to_thread(registry.close)
    totals["model_calls"] = 0
    return totals
