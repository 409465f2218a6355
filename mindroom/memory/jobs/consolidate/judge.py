"""The model step of consolidation: are two memory entries one fact, a contradiction, or two
different facts?

The pass hands over the pairs its signals could not settle (mid-similarity pairs that may be
paraphrases, and pairs about one subject that may contradict); :class:`PairJudge` asks the
model about them, ``pairs_per_call`` pairs per prompt, and returns a :class:`Verdict` for each
pair it got a clear answer for. It does not write memory: merging, archiving and recording
conflicts are the pass's.

What it guarantees the pass:

* No guesses. An answer is read leniently in form (a code fence, words around the JSON) and
  strictly in content: an unknown pair number, a pair left out, an unknown verdict, two
  different verdicts for one pair, or a "same" without merged text give no verdict for that
  pair; an answer without readable JSON gives none for its batch. Each is logged.
* A hard budget (:class:`Budget`): at most ``per_run`` calls in this run and ``per_day``
  counting the day's earlier runs. A failed call (timeout, HTTP error, a command's non-zero
  exit) counts too. Past the budget the remaining pairs get no verdict and the pass falls back
  (a non-model merge in the merge band, else nothing).
* A model that is down costs little: after :attr:`PairJudge.MAX_CONSECUTIVE_FAILURES` failed
  calls in a row (an error, or an answer with no readable verdict) the judge stops asking for
  the rest of the run, every scope included; one good answer resets the count.
* A pair judged within ``recheck_days`` (its :class:`Fingerprints`) is not asked again; only
  pairs that got a verdict are fingerprinted, so an unanswered pair is asked next time.

The prompt: a system text starting with :data:`SYSTEM_MARKER` (scripted models recognise it by
that line) and a user text of numbered pairs, each headed by the entries' dates when known::

    Pair 1 (A dated 2026-03-01, B dated 2026-06-01)
    A: Alice lives in Berlin
    B: Alice moved to Lisbon

answered ``{"pairs": [{"pair": 1, "verdict": "conflict", "reason": "..."}]}``.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.jobs.consolidate.ask import Ask, command_ask, model_ask
from mindroom.memory.jobs.consolidate.fingerprints import Fingerprints

__all__ = [
    "SYSTEM_MARKER",
    "SYSTEM_PROMPT",
    "Ask",
    "Budget",
    "Pair",
    "PairJudge",
    "Verdict",
    "command_ask",
    "model_ask",
    "read_verdicts",
    "render_pairs",
]

logger = logging.getLogger(__name__)

Kind = Literal["same", "conflict", "different"]
_KINDS: tuple[Kind, ...] = ("same", "conflict", "different")


@dataclass(frozen=True)
class Pair:
    """Two live entries of one scope, their best similarity signal in [0, 1], and why the model
    is asked: ``synthesis`` (maybe one fact) or ``conflict`` (one subject, maybe contradicting).
    """

    a: MemoryEntry
    b: MemoryEntry
    similarity: float
    band: Literal["synthesis", "conflict"]


@dataclass(frozen=True)
class Verdict:
    """The model's clear answer about one pair."""

    pair: Pair
    kind: Kind
    merged: str | None = None  # "same": one entry that keeps every detail of both
    reason: str = ""  # "conflict": what contradicts (and which is newer, when dated)


SYSTEM_MARKER = "You check pairs of memory entries for one assistant."
SYSTEM_PROMPT = f"""{SYSTEM_MARKER}
The entries are what the assistant remembers about the people it talks with and their work.
Each pair shows two entries, A and B, and the date of each when it is known (the day it was
noted, or a date written in it). Give every pair exactly one verdict:

"same": A and B state the same fact, possibly one with more detail. Then also write "merged":
one entry that keeps every detail of both - every name, date, number, place and condition - in
the entries' language. Add nothing that neither entry says, and leave nothing out.

"conflict": A and B make claims about the same subject that cannot both be true at the same
time, for example "Alice lives in Berlin" and "Alice moved to Lisbon". Then also write
"reason": in one short sentence, what contradicts. When their dates show that one replaces the
other (a move, a changed plan or preference), it is still a conflict: say in the reason which
entry is newer, for example "B (2026-06-01) is newer: Alice moved from Berlin to Lisbon".

"different": anything else - different facts, facts about different people or things, or
claims that can both be true ("Alice likes tea" and "Alice likes coffee").

When unsure, answer "different". Answer with JSON only, no other text, one item per pair, with
the pair numbers as given:
{{"pairs": [{{"pair": 1, "verdict": "same", "merged": "..."}}, {{"pair": 2, "verdict": "conflict", "reason": "..."}}, {{"pair": 3, "verdict": "different"}}]}}"""  # noqa: E501


def _one_line(text: str) -> str:
    return " ".join(text.split())


def render_pairs(pairs: Sequence[Pair]) -> str:
    """The user text of one prompt: the numbered pairs (see the module docstring)."""
    blocks = []
    for number, pair in enumerate(pairs, 1):
        sides = (("A", pair.a), ("B", pair.b))
        dates = [f"{side} dated {e.date.isoformat()}" for side, e in sides if e.date is not None]
        head = f"Pair {number}" + (f" ({', '.join(dates)})" if dates else "")
        blocks.append(f"{head}\nA: {_one_line(pair.a.text)}\nB: {_one_line(pair.b.text)}")
    return "\n\n".join(blocks) + f"\n\nAnswer for pairs 1 to {len(pairs)}, as JSON only."


# -- reading the answer ---------------------------------------------------------------------


def _decoded(answer: str, opener: str) -> Iterator[Any]:
    """Every JSON value that starts at an ``opener`` character of ``answer``."""
    decoder = json.JSONDecoder()
    start = answer.find(opener)
    while start != -1:
        try:
            value, _ = decoder.raw_decode(answer, start)
        except ValueError:
            pass
        else:
            yield value
        start = answer.find(opener, start + 1)


def _items(answer: str) -> list[Any] | None:
    """The answer's list of items: ``{"pairs": [...]}`` anywhere in it (or a bare list)."""
    for value in _decoded(answer, "{"):
        if isinstance(value, dict) and "pairs" in value:
            items = value["pairs"]
            return items if isinstance(items, list) else None
    for value in _decoded(answer, "["):
        if isinstance(value, list) and value and all(isinstance(i, dict) for i in value):
            return value
    return None


def _number(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return None


def _verdict(item: object, pairs: Sequence[Pair]) -> tuple[int, Verdict]:
    """One item's pair index and verdict; ValueError (with the problem) when unusable."""
    if not isinstance(item, dict):
        raise ValueError(f"an item is not an object: {item!r}")
    number = _number(item.get("pair"))
    if number is None or not 1 <= number <= len(pairs):
        raise ValueError(f"unknown pair number {item.get('pair')!r}")
    kind = item.get("verdict")
    kind = kind.strip().lower() if isinstance(kind, str) else kind
    if kind not in _KINDS:
        raise ValueError(f"pair {number}: no verdict of same, conflict or different ({kind!r})")
    pair = pairs[number - 1]
    if kind == "same":
        merged = item.get("merged")
        if not isinstance(merged, str) or not merged.strip():
            raise ValueError(f"pair {number}: 'same' without merged text")
        return number, Verdict(pair, "same", merged=merged.strip())
    if kind == "conflict":
        reason = item.get("reason")
        reason = reason.strip() if isinstance(reason, str) else ""
        return number, Verdict(pair, "conflict", reason=reason)
    return number, Verdict(pair, "different")


def read_verdicts(answer: str, pairs: Sequence[Pair]) -> tuple[list[Verdict], list[str]]:
    """The verdicts ``answer`` gives for the numbered ``pairs`` (in pair order), and the
    problems found in it; nothing is guessed (see the module docstring)."""
    items = _items(answer)
    if items is None:
        return [], ['no JSON of the form {"pairs": [...]} in the answer']
    problems: list[str] = []
    found: dict[int, list[Verdict]] = {}
    for item in items:
        try:
            number, verdict = _verdict(item, pairs)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        found.setdefault(number, []).append(verdict)
    verdicts = []
    for number in range(1, len(pairs) + 1):
        given = set(found.get(number, []))
        if len(given) == 1:
            verdicts.append(given.pop())
        elif given:
            problems.append(f"pair {number}: {len(given)} different verdicts")
        else:
            problems.append(f"pair {number}: no verdict")
    return verdicts, problems


# -- the budget and the judge ---------------------------------------------------------------


class Budget:
    """The model calls one run may make: at most ``per_run``, and at most ``per_day`` counting
    ``used_today`` (the day's earlier consolidation runs, from the scheduler)."""

    def __init__(self, per_run: int, per_day: int, used_today: int) -> None:
        self.per_run = per_run
        self.per_day = per_day
        self.used_today = used_today
        self.calls = 0  # made in this run, failed ones included

    @property
    def left(self) -> int:
        """How many more calls are allowed."""
        return max(0, min(self.per_run - self.calls, self.per_day - self.used_today - self.calls))

    def take(self) -> bool:
        """Whether one more call is allowed; if so it is counted."""
        if self.left <= 0:
            return False
        self.calls += 1
        return True


class PairJudge:
    """Asks the model about pairs, within a budget; one per run, shared by all its scopes.

    ``ask(system, user)`` returns the model's text and raises when the call fails (see
    :mod:`mindroom.memory.jobs.consolidate.ask`). Not thread-safe: one scope at a time.
    """

    MAX_CONSECUTIVE_FAILURES = 3

    def __init__(self, ask: Ask, budget: Budget, *, pairs_per_call: int) -> None:
        if pairs_per_call < 1:
            raise ValueError("pairs_per_call must be at least 1")
        self.ask = ask
        self.budget = budget
        self.pairs_per_call = pairs_per_call
        # what the run reports
        self.failed_calls = 0  # the call raised
        self.unreadable = 0  # the answer gave no verdict at all
        self.skipped_recent = 0  # judged within recheck_days: not asked
        self.unasked = 0  # no budget left (or the judge stopped): no verdict
        self._failures_in_a_row = 0

    @property
    def stopped(self) -> bool:
        """Whether the judge gave up on the model for this run (failures in a row)."""
        return self._failures_in_a_row >= self.MAX_CONSECUTIVE_FAILURES

    def judge(
        self, pairs: Sequence[Pair], seen: Fingerprints | None, *, now: dt.datetime | None = None
    ) -> list[Verdict]:
        """The verdicts for ``pairs`` the model answered clearly, in their order.

        Pairs are asked in the given order (put the most useful first: the budget may end
        before the last); a pair given twice is asked once. ``seen`` skips and records pairs;
        ``now`` (aware) is the time fingerprints are checked and written at.
        """
        now = now or dt.datetime.now(dt.UTC)
        todo: list[Pair] = []
        again: list[tuple[float, int, Pair]] = []  # asked before, longer ago than recheck_days
        keys: set[tuple[str, ...]] = set()
        for pair in pairs:
            key = tuple(sorted((pair.a.id, pair.b.id)))
            if key in keys:
                continue
            keys.add(key)
            if seen is not None and seen.seen(pair.a.id, pair.b.id, pair.similarity, now):
                self.skipped_recent += 1
                continue
            last = seen.judged_at(pair.a.id, pair.b.id, pair.similarity) if seen else None
            if last is None:
                todo.append(pair)
            else:
                again.append((last, len(again), pair))
        todo += [pair for *_, pair in sorted(again)]  # never asked first, then the oldest
        verdicts: list[Verdict] = []
        for start in range(0, len(todo), self.pairs_per_call):
            if self.stopped or not self.budget.take():
                self.unasked += len(todo) - start
                logger.info(
                    "consolidation judge: %s after %d model calls; %d pairs left without verdict",
                    "stopped" if self.stopped else "budget used up",
                    self.budget.calls,
                    len(todo) - start,
                )
                break
            batch = self._ask(todo[start : start + self.pairs_per_call])
            for verdict in batch:
                if seen is not None:
                    p = verdict.pair
                    seen.record(p.a.id, p.b.id, p.similarity, now)
            verdicts.extend(batch)
        return verdicts

    def _ask(self, batch: Sequence[Pair]) -> list[Verdict]:
        """One call (already counted against the budget) about ``batch``."""
        try:
            answer = self.ask(SYSTEM_PROMPT, render_pairs(batch))
        except Exception as exc:  # any failure of the model or command: the batch is unjudged
            self.failed_calls += 1
            self._failures_in_a_row += 1
            logger.warning("consolidation judge: the model call failed: %s", exc)
            return []
        verdicts, problems = read_verdicts(answer, batch)
        if problems:
            logger.warning(
                "consolidation judge: %d of %d pairs without verdict: %s; answer: %r",
                len(batch) - len(verdicts),
                len(batch),
                "; ".join(problems),
                answer[:500],
            )
        if verdicts:
            self._failures_in_a_row = 0
        else:
            self.unreadable += 1
            self._failures_in_a_row += 1
        return verdicts
