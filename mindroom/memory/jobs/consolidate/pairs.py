"""Which entries a consolidation pass looks at, and which pairs of them fall in a band (steps 1
and 2 of :mod:`.scope_pass`). Blocking reads of the scope's indexes; no writes."""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mindroom.config.maintenance_schema import ConsolidationConfig
from mindroom.errors import EmbedderError
from mindroom.memory.files.dates import daily_date
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.jobs.consolidate.signals import Band, Thresholds, Words, classify

if TYPE_CHECKING:
    from mindroom.memory.files.store import FileMemory

logger = logging.getLogger(__name__)

_NEIGHBOURS = 10  # nearest entries by embedding compared with each candidate
_PARTNERS = 60  # entries sharing the most words compared with each candidate


def live_entries(memory: FileMemory) -> list[MemoryEntry]:
    memory.index.sync()
    return [MemoryEntry(row[1], row[2], row[0], row[3], row[4]) for row in memory.index.snapshot()]


def day_of(entry: MemoryEntry) -> str:
    day = daily_date(entry.path)
    return day.isoformat() if day else ""


def select_candidates(
    memory: FileMemory,
    entries: list[MemoryEntry],
    retrievals: dict[str, int],
    settings: ConsolidationConfig,
    now: dt.datetime,
) -> list[MemoryEntry]:
    """The entries this pass looks at (see the module docstring, step 1)."""
    today = now.astimezone().date()
    settle = today - dt.timedelta(days=settings.min_age_days)
    recent = now.timestamp() - settings.recent_days * 86400
    changed: dict[str, bool] = {}
    chosen = []
    for entry in entries:
        day = daily_date(entry.path)
        if day is not None:
            take = day <= settle
        else:
            if entry.path not in changed:
                try:
                    changed[entry.path] = os.stat(memory.scope.root / entry.path).st_mtime >= recent
                except OSError:
                    changed[entry.path] = False
            take = changed[entry.path]
        if take or retrievals.get(entry.id, 0) >= settings.frequent_retrievals:
            chosen.append(entry)
    return chosen


@dataclass(frozen=True)
class Candidate:
    """A pair found by the signals."""

    a: MemoryEntry
    b: MemoryEntry
    band: Band
    similarity: float


def cosines(
    memory: FileMemory, entries: list[MemoryEntry], candidates: list[MemoryEntry]
) -> dict[str, list[tuple[str, float]]] | None:
    """Each candidate's nearest entries by embedding (None: no semantic index)."""
    try:
        vectors = memory.vectors
        if vectors is None:
            return None
        found = vectors.neighbours([e.id for e in entries], [c.id for c in candidates], _NEIGHBOURS)
    except EmbedderError as exc:
        logger.warning("consolidation of %s: keyword signals only: %s", memory.scope_id, exc)
        return None
    return found or None


def find_pairs(
    entries: list[MemoryEntry],
    candidates: list[MemoryEntry],
    words_of: dict[str, Words],
    neighbours: dict[str, list[tuple[str, float]]] | None,
    limits: Thresholds,
) -> list[Candidate]:
    """Every pair of a candidate and another live entry that falls in a band."""
    by_id = {e.id: e for e in entries}
    postings: dict[str, list[str]] = defaultdict(list)
    for entry in entries:
        for word in words_of[entry.id].content:
            postings[word].append(entry.id)
    seen: set[tuple[str, str]] = set()
    pairs: list[Candidate] = []
    for candidate in candidates:
        shared: Counter[str] = Counter()
        for word in words_of[candidate.id].content:
            shared.update(postings[word])
        cosine = dict(neighbours.get(candidate.id, [])) if neighbours else {}
        partners = [i for i, _ in shared.most_common(_PARTNERS + 1)] + list(cosine)
        for other_id in partners:
            key = tuple(sorted((candidate.id, other_id)))
            if other_id == candidate.id or key in seen:
                continue
            seen.add(key)  # type: ignore[arg-type]
            other = by_id[other_id]
            band, similarity = classify(
                words_of[candidate.id], words_of[other_id], cosine.get(other_id), limits
            )
            if band != "none":
                pairs.append(Candidate(candidate, other, band, similarity))
    return pairs
