"""One consolidation pass over one file-backed scope (blocking: run it in a worker thread).

1. Candidates: entries of daily files at least ``min_age_days`` old, entries of other files
   (``MEMORY.md``, topic files) changed within ``recent_days``, and entries recall used at least
   ``frequent_retrievals`` times. Younger daily entries are left to settle.
2. Pairs (:mod:`.pairs`): each candidate against every live entry that shares a content word
   with it, and its nearest neighbours by embedding when the scope has a semantic index; exact
   duplicates by normalised text. :mod:`.signals` puts each pair in a band.
3. Without a model: exact and near-exact duplicates merge (the entry with more detail, else
   the one in ``MEMORY.md``, else the older one, is kept; the other is archived with a
   pointer to it); a negated twin is recorded as a conflict.
4. With a model (deep runs, within the budget): mid-similarity pairs and pairs about one
   subject go to the judge in batches (pairs noted within ``time_window_days`` of each other
   first); "same" adds the model's text as a new entry whose history names both sources, and
   archives both originals with a pointer to it; "conflict" is recorded. Past the budget the
   rest waits for the next run (their fingerprints are not written).
5. Promotion: a daily fact whose corroboration reaches ``promotion_confidence`` is copied to
   ``MEMORY.md`` unless it is there already; the daily note stays, the dated record of the day
   (a daily note and its copy in ``MEMORY.md`` are not duplicates of each other, and the
   flush's curation, which copies the same way, never makes a second copy). Confidence is
   ``1 - 0.5 ** n``, ``n`` the distinct days the fact was noted on (merged duplicates carry
   their days to the entry kept) plus one if recall used it ``frequent_retrievals`` times: a fact
   noted on two days reaches 0.75.

Nothing is deleted: what a merge replaces is archived (:mod:`mindroom.memory.files.archive`), the
kept entry's history records its sources. A line a person wrote is never rewritten or moved:
where a merge would do that, a proposed merge is recorded for the person instead. Every write
compares the text it read: an entry a person changed meanwhile is left as it is now.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from mindroom.config.maintenance_schema import ConsolidationConfig
from mindroom.errors import MemoryStoreError
from mindroom.memory.files.archive import (
    archive_entry_sync,
    reconcile_archive_sync,
    restore_archived_sync,
)
from mindroom.memory.files.dates import daily_date
from mindroom.memory.files.fields import EntryFields, merged_fields
from mindroom.memory.files.history import HistoryRecord
from mindroom.memory.files.markdown import (
    MemoryEntry,
    append_new_entry,
    new_entry_id,
    parse_entries,
)
from mindroom.memory.jobs.consolidate.judge import Pair, PairJudge, Verdict
from mindroom.memory.jobs.consolidate.pairs import (
    Candidate,
    cosines,
    day_of,
    find_pairs,
    live_entries,
    select_candidates,
)
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords
from mindroom.memory.jobs.consolidate.signals import (
    Thresholds,
    more_detailed,
    normal_form,
    words,
)
from mindroom.memory.policy.audience import AudienceBook, narrower
from mindroom.memory.policy.consent import KEPT, ConsentPending, WriteConsent
from mindroom.memory.scope import ENTRYPOINT

if TYPE_CHECKING:
    from mindroom.memory.files.store import FileMemory
    from mindroom.memory.jobs.consolidate.fingerprints import Fingerprints

logger = logging.getLogger(__name__)

ACTOR = "consolidation"


@dataclass
class ScopeReport:
    """What one pass did (counts, and the ids for tests and the bench)."""

    scope: str
    entries: int = 0
    candidates: int = 0
    pairs: int = 0
    merged: list[tuple[str, str, str]] = field(default_factory=list)  # (kept, archived, how)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    suggestions: list[tuple[str, str]] = field(default_factory=list)
    promoted: list[tuple[str, str]] = field(default_factory=list)  # (daily id, its copy's id)
    asked: int = 0  # pairs put to the model
    unjudged: int = 0  # pairs for the model left without a verdict (budget, failures)
    recently_judged: int = 0  # pairs the model judged within recheck_days: not asked again
    skipped_changed: int = 0  # a write found the entry changed by someone else
    # syntheses that were sensitive: filed as consent proposals, the pair left as it was
    held: list[str] = field(default_factory=list)

    def stats(self) -> dict[str, int]:
        return {
            "entries": self.entries,
            "candidates": self.candidates,
            "pairs": self.pairs,
            "merged": len(self.merged),
            "archived": len(self.merged),
            "conflicts": len(self.conflicts),
            "suggestions": len(self.suggestions),
            "promoted": len(self.promoted),
            "asked": self.asked,
            "unjudged": self.unjudged,
            "recently_judged": self.recently_judged,
            "skipped_changed": self.skipped_changed,
        }


class ScopePass:
    """One pass over one scope; see the module docstring."""

    def __init__(
        self,
        memory: FileMemory,
        settings: ConsolidationConfig,
        *,
        judge: PairJudge | None,
        fingerprints: Fingerprints | None,
        records: ConsolidationRecords,
        now: dt.datetime,
    ) -> None:
        self.memory = memory
        self.book = AudienceBook(memory.scope.state_dir)  # where its entries were learned
        self.settings = settings
        self.judge = judge
        self.fingerprints = fingerprints
        self.records = records
        self.now = now
        self.today = now.astimezone().date()
        self.report = ScopeReport(memory.scope_id)
        self.gone: set[str] = set()  # archived (or found changed) in this pass
        self.replaced: dict[str, MemoryEntry] = {}  # archived id -> the entry that took over
        self.limits = Thresholds(
            settings.merge_similarity,
            settings.synthesis_similarity,
            settings.conflict_similarity,
            settings.lexical_merge,
        )

    # -- the pass ------------------------------------------------------------------------

    def run(self) -> ScopeReport:
        self.memory.prepare()
        reconcile_archive_sync(self.memory)
        entries = live_entries(self.memory)
        self.report.entries = len(entries)
        retrievals = self.records.retrievals()
        candidates = select_candidates(self.memory, entries, retrievals, self.settings, self.now)
        self.report.candidates = len(candidates)
        self.words_of = {e.id: words(e.text) for e in entries}
        neighbours = cosines(self.memory, entries, candidates) if candidates else None
        pairs = find_pairs(entries, candidates, self.words_of, neighbours, self.limits)
        pairs += self._exact_pairs(entries, {c.id for c in candidates}, pairs)
        # a daily note and its copy in MEMORY.md are the dated record and the curated fact:
        # never merged (they may still contradict)
        pairs = [p for p in pairs if not (_curated_copy(p.a, p.b) and p.band in ("exact", "merge"))]
        self.report.pairs = len(pairs)
        order = {"exact": 0, "merge": 1, "polarity": 2}
        for pair in sorted(
            (p for p in pairs if p.band in order), key=lambda p: (order[p.band], -p.similarity)
        ):
            if pair.band == "polarity":
                self._conflict(pair.a, pair.b, "one says the opposite of the other (negation)")
            else:
                self._merge_without_model(pair)
        self._ask_model([p for p in pairs if p.band in ("synthesis", "conflict")])
        self._promote(entries, retrievals)
        return self.report

    def _exact_pairs(
        self, entries: list[MemoryEntry], candidate_ids: set[str], found: list[Candidate]
    ) -> list[Candidate]:
        """Exact duplicates the word pairing missed (texts of stop words only, or too common)."""
        known = {tuple(sorted((p.a.id, p.b.id))) for p in found}
        groups: dict[str, list[MemoryEntry]] = defaultdict(list)
        for entry in entries:
            if self.words_of[entry.id].normal:
                groups[self.words_of[entry.id].normal].append(entry)
        extra = []
        for group in groups.values():
            for i, a in enumerate(group):
                for b in group[i + 1 :]:
                    if (a.id in candidate_ids or b.id in candidate_ids) and tuple(
                        sorted((a.id, b.id))
                    ) not in known:
                        extra.append(Candidate(a, b, "exact", 1.0))
        return extra

    # -- merging ---------------------------------------------------------------------------

    def _rank(self, entry: MemoryEntry) -> tuple[int, int, str, int]:
        """Which of two equal entries to keep: MEMORY.md, a person's line, the older one."""
        return (
            entry.path != ENTRYPOINT,
            not entry.hand_written,
            day_of(entry) or "9999",
            entry.start_line,
        )

    def _merge_without_model(self, pair: Candidate) -> None:
        a, b = pair.a, pair.b
        if a.id in self.gone or b.id in self.gone:
            return
        wa, wb = self.words_of[a.id], self.words_of[b.id]
        if pair.band == "merge" and more_detailed(wa, wb):
            keep, drop = a, b
        elif pair.band == "merge" and more_detailed(wb, wa):
            keep, drop = b, a
        else:
            keep, drop = sorted((a, b), key=self._rank)
        how = "exact duplicate" if pair.band == "exact" else "near-exact duplicate"
        self._fold(keep, drop, keep.text, how)

    def _fold(self, keep: MemoryEntry, drop: MemoryEntry, text: str, how: str) -> None:
        """Keep ``keep`` and archive ``drop`` with a pointer to it; with a new ``text`` (the
        model's synthesis) a new entry says it and both are archived. A person's line is never
        rewritten or archived: then the merge is proposed instead."""
        rewrite = text != keep.text
        if drop.hand_written or (rewrite and keep.hand_written):
            proposal = {"text": text, "how": how, **self._seen(keep, drop)}
            if self.records.record("merge", keep.id, drop.id, how, proposal) is not None:
                self.report.suggestions.append((keep.id, drop.id))
            return
        if rewrite:
            try:
                merged = self.memory.as_one_write(lambda: self._synthesize(keep, drop, text, how))
            except ConsentPending as pending:  # a model's words are nobody's consent
                logger.info(
                    "consolidation of %s: merging %s and %s waits for consent: %s",
                    self.memory.scope_id,
                    keep.id,
                    drop.id,
                    pending,
                )
                self.report.held.extend(p.id for p in pending.proposals)
                self.gone.update((keep.id, drop.id))
                return
            if merged is None:
                self.report.skipped_changed += 1
                self.gone.update((keep.id, drop.id))
                return
            self.gone.update((keep.id, drop.id))
            taken_over = MemoryEntry(merged, text, keep.path, 0, 0)
            self.replaced[keep.id] = self.replaced[drop.id] = taken_over
            self.records.add_days(
                merged,
                self.records.days(keep.id)
                | self.records.days(drop.id)
                | {day_of(keep), day_of(drop)},
            )
            self.report.merged.append((merged, keep.id, how))
            self.report.merged.append((merged, drop.id, how))
            return
        if not self._still(keep):
            self.report.skipped_changed += 1
            self.gone.add(keep.id)
            return
        moved = archive_entry_sync(
            self.memory,
            drop,
            into=keep.id,
            why=f"{how}: merged into {keep.id}",
            actor=ACTOR,
            today=self.today,
            reconcile=False,
        )
        self.gone.add(drop.id)
        if not moved:
            self.report.skipped_changed += 1
            return
        self.replaced[drop.id] = keep
        self.memory.history.append(
            actor=ACTOR,
            op="merge",
            entry_id=keep.id,
            path=keep.path,
            old=keep.text,
            new=keep.text,
            meta={"sources": [drop.id], "how": how},
        )
        days = self.records.days(drop.id) | {day_of(drop), day_of(keep)}
        self.records.add_days(keep.id, days)
        self.report.merged.append((keep.id, drop.id, how))

    def _still(self, entry: MemoryEntry) -> bool:
        """Whether ``entry`` is still in memory as read (a person may have changed it)."""
        current = self.memory.lookup(entry.id)
        return current is not None and current.text == entry.text

    def _synthesize(self, keep: MemoryEntry, drop: MemoryEntry, text: str, how: str) -> str | None:
        """A new entry with ``text`` beside ``keep`` (history: a merge of both, its sources),
        then both originals archived with a pointer to it; the new entry's id. None when a
        person changed either meanwhile: then everything is as it was (the new entry taken
        out again, an original already archived brought back; the history tells all)."""
        merged_id = new_entry_id()
        sources = [keep.id, drop.id]

        def record() -> HistoryRecord:
            return self.memory.history.append(
                actor=ACTOR,
                op="merge",
                entry_id=merged_id,
                path=keep.path,
                old=None,
                new=text,
                meta={"sources": sources, "how": how},
            )

        # a merge is shown only where both of its sources could be
        audience = narrower([keep.fields.audience, drop.fields.audience], self.book)

        def add(document: str) -> str | None:
            ids = {e.id for e in parse_entries(document, keep.path)}
            if keep.id not in ids:
                return None
            fields = merged_fields(keep.fields, drop.fields)
            return append_new_entry(document, merged_id, text, replace(fields, audience=audience))

        # the synthesis is a model's text: the store holds it back when it is sensitive
        old, new = self.memory.write(keep.path, add, record, consent=WriteConsent.model())
        if old == new:
            return None
        for done, entry in enumerate((keep, drop)):
            other = drop.id if entry is keep else keep.id
            why = f"{how}: merged with {other} into {merged_id}"
            if archive_entry_sync(
                self.memory,
                entry,
                into=merged_id,
                why=why,
                actor=ACTOR,
                today=self.today,
                reconcile=False,
            ):
                continue
            if done:
                restore_archived_sync(self.memory, keep.id, actor=ACTOR)
            self.memory.delete_sync(merged_id, actor=ACTOR)
            return None
        return merged_id

    @staticmethod
    def _seen(a: MemoryEntry, b: MemoryEntry) -> dict[str, Any]:
        return {
            "a": {"id": a.id, "path": a.path, "text": a.text},
            "b": {"id": b.id, "path": b.path, "text": b.text},
        }

    def _current(self, entry: MemoryEntry) -> MemoryEntry | None:
        """The live entry that stands for ``entry`` now: itself, what it was merged into in
        this pass, or None (a person changed it meanwhile: left for the next pass)."""
        while entry.id in self.replaced:
            entry = self.replaced[entry.id]
        return None if entry.id in self.gone else entry

    def _conflict(self, first: MemoryEntry, second: MemoryEntry, reason: str) -> None:
        """Record a contradiction between the two (or what they were merged into)."""
        a, b = self._current(first), self._current(second)
        if a is None or b is None or a.id == b.id:
            return
        if self.records.record("conflict", a.id, b.id, reason, self._seen(a, b)) is not None:
            self.report.conflicts.append((a.id, b.id))

    # -- the model -------------------------------------------------------------------------

    def _ask_model(self, pairs: list[Candidate]) -> None:
        current: dict[tuple[str, str], Candidate] = {}
        for p in pairs:  # an entry merged away is stood for by what it was merged into
            a, b = self._current(p.a), self._current(p.b)
            if a is None or b is None or a.id == b.id:
                continue
            first, second = sorted((a.id, b.id))
            current.setdefault((first, second), Candidate(a, b, p.band, p.similarity))
        pairs = [p for p in current.values() if not self.records.known(p.a.id, p.b.id)]
        if self.judge is None or not pairs:
            self.report.unjudged += len(pairs)
            return
        order = {"synthesis": 0, "conflict": 1}
        pairs.sort(key=lambda p: (order[p.band], not self._close_in_time(p), -p.similarity))
        asked = [
            Pair(p.a, p.b, p.similarity, "synthesis" if p.band == "synthesis" else "conflict")
            for p in pairs
        ]
        unasked, recent = self.judge.unasked, self.judge.skipped_recent
        verdicts = self.judge.judge(asked, self.fingerprints, now=self.now)
        recent = self.judge.skipped_recent - recent
        self.report.recently_judged += recent
        self.report.asked += len(asked) - (self.judge.unasked - unasked) - recent
        self.report.unjudged += len(asked) - recent - len(verdicts)
        for verdict in verdicts:
            self._apply(verdict)

    def _close_in_time(self, pair: Candidate) -> bool:
        """Whether the two were noted within ``time_window_days`` (undated: no); such pairs
        are likelier one fact told twice, so the model sees them first when the budget is
        short."""
        a, b = daily_date(pair.a.path), daily_date(pair.b.path)
        return (
            a is not None and b is not None and abs((a - b).days) <= self.settings.time_window_days
        )

    def _apply(self, verdict: Verdict) -> None:
        a, b = verdict.pair.a, verdict.pair.b
        if verdict.kind == "conflict":
            self._conflict(a, b, verdict.reason or "the model found a contradiction")
            return
        if a.id in self.gone or b.id in self.gone:
            return  # merged with another in this pass: the next pass compares what took over
        if verdict.kind == "same" and verdict.merged and not _curated_copy(a, b):
            keep, drop = sorted((a, b), key=self._rank)
            text = verdict.merged
            said = normal_form(text)
            for one, other in ((a, b), (b, a)):  # the model kept one wording: keep that entry
                if said == normal_form(one.text):
                    keep, drop, text = one, other, one.text
            self._fold(keep, drop, text, "same fact (model)")

    # -- promotion -------------------------------------------------------------------------

    def confidence(self, entry: MemoryEntry, retrievals: dict[str, int]) -> float:
        """How well a daily fact is corroborated (see the module docstring)."""
        days = self.records.days(entry.id) | {day_of(entry)}
        n = len(days - {""}) + (retrievals.get(entry.id, 0) >= self.settings.frequent_retrievals)
        return 1 - 0.5**n

    def _promote(self, entries: Iterable[MemoryEntry], retrievals: dict[str, int]) -> None:
        """Copy corroborated daily facts into MEMORY.md (the daily note stays, dated)."""
        long_term = {self.words_of[e.id].normal for e in entries if e.path == ENTRYPOINT}
        for entry in entries:
            normal = self.words_of[entry.id].normal
            if (
                entry.id in self.gone
                or normal in long_term
                or daily_date(entry.path) is None
                or self.confidence(entry, retrievals) < self.settings.promotion_confidence
            ):
                continue
            try:
                # a copy of a fact stored before: it adds nothing that needs consent
                added = self.memory.add_sync(
                    entry.text,
                    actor=ACTOR,
                    path=ENTRYPOINT,
                    consent=KEPT,
                    fields=EntryFields(audience=entry.fields.audience),  # where it was learned
                )
            except MemoryStoreError as exc:
                logger.warning(
                    "consolidation of %s: promotion failed: %s", self.memory.scope_id, exc
                )
                return
            long_term.add(normal)
            self.records.add_days(added.id, self.records.days(entry.id) | {day_of(entry)})
            self.report.promoted.append((entry.id, added.id))


def _curated_copy(a: MemoryEntry, b: MemoryEntry) -> bool:
    """Whether one of the two is in MEMORY.md and the other in a daily file."""
    paths = {a.path, b.path}
    return ENTRYPOINT in paths and any(daily_date(p) is not None for p in paths)
