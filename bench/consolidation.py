"""Memory consolidation on a planted memory: duplicates and contradictions found, nothing lost.

Builds one file memory (``--entries``, 1,200 by default) of generated facts about generated
people with a known plant, runs one deep consolidation pass over it
(:func:`mindroom.memory.jobs.consolidate.run.consolidate_memory`; the judge talks real HTTP to the
scripted model) and scores what the pass did against the plant. It prints per-kind figures
(``# `` lines) and ends with::

    duplicates: recall=0.xx precision=0.xx conflicts: recall=0.xx precision=0.xx originals_lost=N

The plant (seeded, ``--seed``):

* distinct facts: people named from random syllables, each with one to eight facts of 23
  attribute kinds and 14 habits, each said in one of several wordings, over large generated
  vocabularies (places, companies, titles, names). Near misses are there as in real memory: one
  person with several facts, many people with the same hobby or job, a relative who shares a
  person's fact ("Kelo's sister lives in Varn"). A single-valued attribute (a job, a home
  town) has one value per person, so the plant knows every contradiction in it;
* duplicates (~13% of the entries): an exact copy on another day (sometimes differing in case,
  punctuation or spacing), a near-exact copy (the sentence plus one detail: "... since 2019")
  and a paraphrase (another wording of the same value, which only the model can tell);
* contradictions (~5%): a changed value ("Kelo lives in Porto" / "Kelo moved to Oslo", two
  cats / three cats) and a negation ("Kelo eats meat" / "Kelo never eats meat"), noted on a
  later day; some contradict a fact in ``MEMORY.md`` (a curated fact gone stale);
* daily files over the ``--days`` days before yesterday (older than ``min_age_days``) and ~4%
  of the facts in ``MEMORY.md``, a third of them lines a person wrote (no id marker). A copy
  of a ``MEMORY.md`` fact is planted in ``MEMORY.md`` too: by design a daily note and its copy
  in ``MEMORY.md`` are not duplicates (the dated record and the curated fact).

The scripted judge is an oracle: it answers from the plant ("same" for two texts of one planted
fact, merged into the longer of the two; "conflict" for a planted contradiction; "different"
otherwise). So the figures measure the pass - which pairs it finds, which band it puts them in,
what the budget lets through, and whether applying verdicts loses anything - not a model's
judgement. Everything is the product's default except the model-call budget of the scored
pass (``--max-calls``, per run and per day, 200: one first pass over a memory this size needs
about 170 calls). What the default budget (20 calls a run) does is shown after it: ``--weeks``
(8) weekly deep runs over a fresh copy of the plant, with the conflict recall reached after
each (the pairs never asked go first, so a short budget catches up run by run).

The plant itself is built by ``bench/consolidation_plant.py``.

Scoring: a planted duplicate is found when it was merged (or, for a line a person wrote,
proposed as a merge) with an entry of its own fact; precision is the share of merges and
proposed merges that join two entries of one fact. A contradiction is found when a conflict
was recorded between entries of its two facts. ``originals_lost`` is read from the files alone:
every line as written at the start (text and id) must still be in a memory or archive file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from consolidation_plant import (  # noqa: E402
    CONFLICT_KINDS,
    CURATED,
    DUPLICATE_KINDS,
    Plant,
    Planted,
    build_plant,
    normal,
    oracle,
    write_plant,
)
from locomo import EMBEDDERS, memory_section, model_entries  # noqa: E402

from mindroom.adapters.embeddings.select import shared_embedder  # noqa: E402
from mindroom.config.schema import Config  # noqa: E402
from mindroom.memory.files.store import FileMemory  # noqa: E402
from mindroom.memory.jobs.consolidate.ask import model_ask  # noqa: E402
from mindroom.memory.jobs.consolidate.judge import Budget, PairJudge  # noqa: E402
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords, db_path  # noqa: E402
from mindroom.memory.jobs.consolidate.run import consolidate_memory  # noqa: E402
from mindroom.memory.jobs.consolidate.scope_pass import ScopeReport  # noqa: E402
from mindroom.memory.scope import MemoryScope  # noqa: E402
from tests.support.scripted_judge import judge_handler  # noqa: E402
from tests.support.scripted_model import ScriptedModel  # noqa: E402

# -- the run -----------------------------------------------------------------------------------


def consolidation_config(base_url: str, embedder: str, max_calls: int | None) -> Config:
    """The product's defaults, the scripted model, and ``max_calls`` model calls (None: the
    default budget)."""
    model = {"provider": "openai", "id": "scripted", "base_url": base_url, "api_key": "test"}
    budget = (
        {"max_model_calls_per_run": max_calls, "max_model_calls_per_day": max_calls}
        if max_calls is not None
        else {}
    )
    return Config.model_validate(
        {
            "models": {"default": model, **model_entries(embedder)},
            "memory": {**memory_section(embedder), "maintenance": {"consolidation": budget}},
        }
    )


@dataclass
class Run:
    """What one pass did, as the report, the records and the model server tell."""

    report: ScopeReport
    conflicts: list[tuple[str, str]]  # recorded conflicts
    proposed: list[tuple[str, str]]  # recorded proposed merges (a person's line)
    said: Counter[str]  # the oracle's verdicts
    calls: int
    requests: int
    seconds: float
    embed_seconds: float | None


def run_pass(plant: Plant, storage: Path, embedder: str, max_calls: int, now: dt.datetime) -> Run:
    """Write the plant under ``storage`` and run one deep pass over it."""
    root, state = storage / "workspace", storage / "state"
    write_plant(plant, root)
    said: Counter[str] = Counter()
    with ScriptedModel() as server:
        server.set_handler(judge_handler(oracle(plant, said)))
        config = consolidation_config(server.base_url, embedder, max_calls)
        memory = FileMemory(
            MemoryScope("agent_bench", root, state),
            shared_embedder(config.memory_embedder, storage),
        )
        try:
            embed_seconds = None
            if memory.vectors is not None:  # the bot embeds in the background, before a pass
                start = time.perf_counter()
                memory.vectors.sync()
                embed_seconds = time.perf_counter() - start
            settings = config.memory.maintenance.consolidation
            judge = PairJudge(
                model_ask(config, None, 120),
                Budget(settings.max_model_calls_per_run, settings.max_model_calls_per_day, 0),
                pairs_per_call=settings.pairs_per_call,
            )
            start = time.perf_counter()
            report = consolidate_memory(memory, config, judge, now)
            seconds = time.perf_counter() - start
        finally:
            memory.close()
        requests = len(server.requests)
    records = ConsolidationRecords(db_path(state))
    try:
        recorded = records.conflicts(include_resolved=True)
    finally:
        records.close()
    pairs = {
        kind: [(c.memory_id, c.conflicting_memory_id) for c in recorded if c.kind == kind]
        for kind in ("conflict", "merge")
    }
    return Run(
        report,
        pairs["conflict"],
        pairs["merge"],
        said,
        judge.budget.calls,
        requests,
        seconds,
        embed_seconds,
    )


# -- scoring -----------------------------------------------------------------------------------

_MINDROOM_LINE = re.compile(r"^- (.*) <!-- (m-[0-9a-f]{8}) -->$")


@dataclass
class Files:
    """What the files say after the pass, read without the code under test."""

    lines: set[str] = field(default_factory=set)
    live: dict[str, str] = field(default_factory=dict)  # mindroom id -> text
    archived: dict[str, str] = field(default_factory=dict)  # mindroom id -> text


def read_files(root: Path) -> Files:
    files = Files()
    for path in sorted(root.rglob("*.md")):
        in_archive = path.relative_to(root).as_posix().startswith("memory/archive/")
        for line in path.read_text(encoding="utf-8").split("\n"):
            line = line.rstrip("\r")
            files.lines.add(line)
            if found := _MINDROOM_LINE.match(line):
                (files.archived if in_archive else files.live)[found[2]] = found[1]
    return files


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole else 1.0


class Score:
    """The pass's merges and conflicts against the plant (entries created by the pass are
    known by their text)."""

    def __init__(self, plant: Plant, files: Files, run: Run) -> None:
        self.plant, self.files, self.run = plant, files, run
        self.fact_of = {e.id: e.fact for e in plant.entries}
        self.text_of = {**files.archived, **files.live} | {
            e.id: e.text for e in plant.entries if e.hand
        }
        self.merges = list(run.report.merged)
        self.merges += [(k, a, "proposed (a person's line)") for k, a in run.proposed]
        self.right = [m for m in self.merges if self.same(m[0], m[1])]
        self.partners: dict[str, set[str]] = {}
        for kept, gone, _ in self.merges:
            self.partners.setdefault(kept, set()).add(gone)
            self.partners.setdefault(gone, set()).add(kept)

    def fact(self, entry_id: str) -> int | None:
        if entry_id in self.fact_of:
            return self.fact_of[entry_id]
        text = self.text_of.get(entry_id)
        return None if text is None else self.plant.by_text.get(normal(text))

    def same(self, a: str, b: str) -> bool:
        """Whether entries ``a`` and ``b`` say one planted fact."""
        fact = self.fact(a)
        return fact is not None and fact == self.fact(b)

    def text(self, entry_id: str) -> str:
        return self.text_of.get(entry_id, f"<{entry_id} not in the files>")

    def found(self, entry: Planted) -> bool:
        return any(self.fact(p) == entry.fact for p in self.partners.get(entry.id, ()))

    def why_wrong(self, a: str, b: str) -> str:
        fa, fb = self.fact(a), self.fact(b)
        if fa is None or fb is None:
            return "a text not in the plant"
        if fa == fb:
            return "one fact twice"
        one, other = self.plant.facts[fa], self.plant.facts[fb]
        if frozenset((fa, fb)) in self.plant.contradictions:
            return "a planted contradiction"
        if one.person.startswith(other.person + "'s ") or other.person.startswith(
            one.person + "'s "
        ):
            return "a person and a relative"
        if one.person == other.person:
            return "one person, another fact"
        if one.attribute.name == other.attribute.name:
            return "another person, same attribute"
        return "unrelated facts"

    def duplicates(self, examples: int) -> tuple[int, int]:
        """Print recall per kind and precision per way of merging; (found, planted)."""
        plant, total, hits = self.plant, 0, 0
        for kind in (*DUPLICATE_KINDS, "exact+near-exact"):
            planted = [e for e in plant.entries if e.role in kind.split("+")]
            found = [e for e in planted if self.found(e)]
            print(
                f"# duplicates {kind}: planted={len(planted)} found={len(found)} "
                f"recall={_ratio(len(found), len(planted)):.2f}"
            )
            if kind in DUPLICATE_KINDS:
                total, hits = total + len(planted), hits + len(found)
                for entry in [e for e in planted if e not in found][:examples]:
                    first = plant.facts[entry.fact].text
                    print(f"#   missed: {first!r} / {entry.text!r}")
        for how, count in sorted(Counter(how for *_, how in self.merges).items()):
            good = sum(1 for *_, h in self.right if h == how)
            print(f"# merges {how}: {count}, correct {good}, precision={_ratio(good, count):.2f}")
        wrong = [m for m in self.merges if m not in self.right]
        if wrong:
            why = Counter(self.why_wrong(k, a) for k, a, _ in wrong)
            print("# wrong merges: " + ", ".join(f"{w} {n}" for w, n in why.most_common()))
        for kept, gone, how in wrong[:examples]:
            print(f"#   wrong ({how}): {self.text(kept)!r} <- {self.text(gone)!r}")
        return hits, total

    def caught(self) -> tuple[dict[tuple[str, str], frozenset], list[tuple[str, str]]]:
        """Each recorded conflict's two planted facts, and the recorded conflicts that are
        planted contradictions."""
        facts = {(a, b): frozenset((self.fact(a), self.fact(b))) for a, b in self.run.conflicts}
        return facts, [p for p, f in facts.items() if f in self.plant.contradictions]

    def conflicts(self, examples: int) -> tuple[int, int]:
        """Print recall per kind; (planted found, correct conflicts recorded)."""
        plant = self.plant
        facts, true = self.caught()
        caught = {facts[p] for p in true}
        for kind in CONFLICT_KINDS:
            pairs = [p for p, k in plant.contradictions.items() if k == kind]
            m = sum(1 for p in pairs if p in caught)
            print(
                f"# conflicts {kind}: planted={len(pairs)} found={m} "
                f"recall={_ratio(m, len(pairs)):.2f}"
            )
            for pair in [p for p in pairs if p not in caught][:examples]:
                a, b = sorted(pair)
                print(f"#   missed: {plant.facts[a].text!r} / {plant.facts[b].text!r}")
        false = [p for p in facts if p not in true]
        if false:
            why = Counter(self.why_wrong(a, b) for a, b in false)
            print("# wrong conflicts: " + ", ".join(f"{w} {n}" for w, n in why.most_common()))
        for a, b in false[:examples]:
            print(f"#   wrong conflict: {self.text(a)!r} / {self.text(b)!r}")
        return len(caught), len(true)

    def lost(self, examples: int) -> int:
        """Print what was archived and what is gone from the files; how many are gone."""
        lost = [e for e in self.plant.entries if e.line not in self.files.lines]
        rewritten = [e for e in lost if e.id in self.files.live]
        print(
            f"# archived: {len(self.files.archived)} entries in memory/archive (merged: "
            f"{len(self.run.report.merged)}), promoted to MEMORY.md: "
            f"{len(self.run.report.promoted)}"
        )
        print(f"# originals deleted: {len(lost)} ({len(rewritten)} of them rewritten in place)")
        for entry in lost[:examples]:
            now = self.files.live.get(entry.id) or self.files.archived.get(entry.id)
            print(f"#   lost: {entry.line!r} (now: {now!r})")
        return len(lost)


def catch_up(
    plant: Plant, storage: Path, embedder: str, now: dt.datetime, weeks: int
) -> list[tuple[float, int, int]]:
    """``weeks`` deep passes at the product's default budget over a fresh copy of the plant,
    one a week: after each, the conflict recall so far, its model calls and the pairs it left
    for a later run (the budget was spent; pairs judged within recheck_days are not counted)."""
    root, state = storage / "workspace", storage / "state"
    write_plant(plant, root)
    figures: list[tuple[float, int, int]] = []
    merged: list[tuple[str, str, str]] = []
    with ScriptedModel() as server:
        server.set_handler(judge_handler(oracle(plant, Counter())))
        config = consolidation_config(server.base_url, embedder, None)
        settings = config.memory.maintenance.consolidation
        memory = FileMemory(
            MemoryScope("agent_bench", root, state),
            shared_embedder(config.memory_embedder, storage),
        )
        try:
            for week in range(weeks):
                judge = PairJudge(
                    model_ask(config, None, 120),
                    Budget(settings.max_model_calls_per_run, settings.max_model_calls_per_day, 0),
                    pairs_per_call=settings.pairs_per_call,
                )
                when = now + dt.timedelta(days=7 * week)
                done = consolidate_memory(memory, config, judge, when)
                merged += done.merged
                records = ConsolidationRecords(db_path(state))
                try:
                    recorded = records.conflicts(include_resolved=True)
                finally:
                    records.close()
                conflicts = [
                    (c.memory_id, c.conflicting_memory_id) for c in recorded if c.kind == "conflict"
                ]
                run = Run(
                    ScopeReport("bench", merged=merged), conflicts, [], Counter(), 0, 0, 0.0, None
                )
                facts, true = Score(plant, read_files(root), run).caught()
                recall = _ratio(len({facts[p] for p in true}), len(plant.contradictions))
                figures.append((recall, judge.budget.calls, done.unjudged))
        finally:
            memory.close()
    return figures


def report(plant: Plant, root: Path, run: Run, examples: int) -> str:
    """Print the figures of ``run``; return the final line."""
    score = Score(plant, read_files(root), run)
    found, duplicates = score.duplicates(examples)
    caught, true = score.conflicts(examples)
    lost = score.lost(examples)
    print(
        f"# model calls: {run.calls} (judge budget), {run.requests} (server requests); pairs "
        f"asked {run.report.asked}, left without verdict {run.report.unjudged}"
    )
    print("# verdicts: " + (", ".join(f"{k} {n}" for k, n in run.said.most_common()) or "none"))
    return (
        f"duplicates: recall={_ratio(found, duplicates):.2f} "
        f"precision={_ratio(len(score.right), len(score.merges)):.2f} "
        f"conflicts: recall={_ratio(caught, len(plant.contradictions)):.2f} "
        f"precision={_ratio(true, len(run.conflicts)):.2f} originals_lost={lost}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=1200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--days", type=int, default=60, help="days of daily files")
    parser.add_argument("--max-calls", type=int, default=200, help="model calls per run and day")
    parser.add_argument("--embedder", choices=EMBEDDERS, default="default")
    parser.add_argument("--examples", type=int, default=3, help="examples of each miss")
    parser.add_argument("--keep", type=Path, help="an empty folder to build the memory in, kept")
    parser.add_argument(
        "--weeks",
        type=int,
        default=8,
        help="weekly deep runs at the default budget on a fresh copy (0: none)",
    )
    args = parser.parse_args(argv)
    if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
        parser.error(f"--keep {args.keep}: not empty")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    now = dt.datetime.now(dt.UTC)
    plant = build_plant(args.entries, args.seed, now.astimezone().date(), args.days)
    roles, kinds = Counter(e.role for e in plant.entries), Counter(plant.contradictions.values())
    curated = [e for e in plant.entries if e.path == CURATED]
    print(
        f"# entries: {len(plant.entries)} (facts {roles['fact']}; duplicates exact "
        f"{roles['exact']}, near-exact {roles['near-exact']}, paraphrase {roles['paraphrase']}; "
        f"contradicting {roles['contradiction']}: negation {kinds['negation']}, value change "
        f"{kinds['value change']}), seed {args.seed}"
    )
    print(
        f"# files: {len({e.path for e in plant.entries} - {CURATED})} daily over {args.days} "
        f"days; MEMORY.md {len(curated)} entries ({sum(e.hand for e in curated)} a person's "
        f"lines); people {len({f.person for f in plant.facts.values()})}"
    )
    with tempfile.TemporaryDirectory(prefix="consolidation-bench-") as scratch:
        storage = args.keep or Path(scratch)
        run = run_pass(plant, storage, args.embedder, args.max_calls, now)
        embedded = "" if run.embed_seconds is None else f" (embedding {run.embed_seconds:.2f} s)"
        print(
            f"# embedder: {args.embedder}{embedded}; budget {args.max_calls} model calls per "
            f"run and per day"
        )
        print(
            f"# pass: {run.seconds:.2f} s; entries {run.report.entries}, candidates "
            f"{run.report.candidates}, pairs in a band {run.report.pairs}"
        )
        final = report(plant, storage / "workspace", run, args.examples)
        if args.weeks:
            weeks = catch_up(plant, storage / "catch-up", args.embedder, now, args.weeks)
            defaults = Config().memory.maintenance.consolidation
            print(
                f"# at the default budget ({defaults.max_model_calls_per_run} calls a run), "
                f"{args.weeks} weekly deep runs on a fresh copy:"
            )
            for week, (recall, calls, waiting) in enumerate(weeks, start=1):
                print(
                    f"#   run {week}: conflicts recall so far={recall:.2f}, model calls {calls}, "
                    f"pairs left for a later run {waiting}"
                )
    print(final)


if __name__ == "__main__":
    main()
