"""One consolidation pass over one scope, on real files: what merges, what is only recorded,
what is never touched, and what survives a person's edit or a crash between two steps.

The judge is the real one over real HTTP; the scripted model answers its prompts
(:mod:`tests.support.scripted_judge`). Entries are written as a person's editor or the flush leaves
them (``- text <!-- m-... -->``) into daily files older than the settle time.
"""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mindroom.config.schema import Config
from mindroom.memory.files.archive import archived_entries, reconcile_archive_sync
from mindroom.memory.files.protocol import read_text
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.consolidate.ask import model_ask
from mindroom.memory.jobs.consolidate.judge import Budget, PairJudge
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords, db_path
from mindroom.memory.jobs.consolidate.run import consolidate_memory
from mindroom.memory.jobs.consolidate.scope_pass import ScopeReport
from mindroom.memory.ops_events import EventLog
from mindroom.memory.scope import MemoryScope
from tests.support.scripted_judge import is_judge_request, judge_handler, judge_pairs
from tests.support.scripted_model import ScriptedModel, last_user_text

REPO = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
_ids = iter(range(1, 10**6))


def new_id() -> str:
    return f"m-{next(_ids):08x}"


def write(memory: FileMemory, path: str, *texts: str, hand: bool = False) -> list[str]:
    """Append entries (mindroom's, or a person's plain lines with ``hand``); their ids."""
    target = memory.scope.root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    ids, lines = [], []
    for text in texts:
        if hand:
            lines.append(f"- {text}")
        else:
            ids.append(new_id())
            lines.append(f"- {text} <!-- {ids[-1]} -->")
    with target.open("a", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return ids


def config(url: str = "http://127.0.0.1:9/v1", **consolidation: Any) -> Config:
    scripted = {"base_url": url, "api_key": "test", "max_retries": 0, "timeout_seconds": 20}
    return Config.model_validate(
        {
            "models": {"default": {"provider": "openai", "id": "scripted", **scripted}},
            "memory": {"maintenance": {"consolidation": consolidation}},
        }
    )


def judge_for(cfg: Config, calls: int = 20) -> PairJudge:
    settings = cfg.memory.maintenance.consolidation
    return PairJudge(
        model_ask(cfg, None, 20), Budget(calls, 100, 0), pairs_per_call=settings.pairs_per_call
    )


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[FileMemory]:
    root = tmp_path / "workspace"
    root.mkdir()
    mem = FileMemory(MemoryScope("agent_test", root, tmp_path / "state"))
    yield mem
    mem.close()


def live(memory: FileMemory) -> dict[str, str]:
    return {e.id: e.text for e in memory.list_sync(1000)}


def archived(memory: FileMemory) -> dict[str, str]:
    return {a.entry.id: a.entry.text for a in archived_entries(memory)}


def records(memory: FileMemory) -> ConsolidationRecords:
    return ConsolidationRecords(db_path(memory.scope.state_dir))


def light(memory: FileMemory, **settings: Any) -> ScopeReport:
    """A pass without a model (promotion off unless a test asks for it: its copies in
    MEMORY.md would be in the way of what the test looks at)."""
    settings.setdefault("promotion_confidence", 1.0)
    return consolidate_memory(memory, config(**settings), None, NOW)


# -- without a model -------------------------------------------------------------------------


def test_an_exact_duplicate_is_archived_with_a_pointer_and_the_merge_names_its_source(
    memory: FileMemory,
) -> None:
    (first,) = write(memory, "memory/2026-11-01.md", "Alice drinks green tea every morning")
    (again,) = write(memory, "memory/2026-11-05.md", "alice drinks green tea every morning.")
    (other,) = write(memory, "memory/2026-11-05.md", "Bob drinks coffee every morning")

    report = light(memory)

    assert report.merged == [(first, again, "exact duplicate")]
    assert set(live(memory)) == {first, other}
    assert archived(memory) == {again: "alice drinks green tea every morning."}
    archive = read_text(memory.scope.root / "memory/archive/2026-11.md")
    assert f"<!-- {again} -->" in archive
    assert f"from memory/2026-11-05.md; exact duplicate: merged into {first}" in archive
    ops = {(r.id, r.op) for r in memory.history_of(None)}
    assert {(again, "archive"), (first, "merge")} <= ops
    merge = next(r for r in memory.history_of(first) if r.op == "merge")
    assert merge.meta == {"sources": [again], "how": "exact duplicate"}
    events = EventLog(memory)
    try:
        assert events.counts() == [("worker", "merge", "ok", 1)]  # for `memory stats`
    finally:
        events.close()
    # search and listing leave the archive out
    assert [h.entry.id for h in memory.index.search("green tea", 10)] == [first]


def test_a_near_exact_duplicate_keeps_the_more_detailed_entry(memory: FileMemory) -> None:
    (short,) = write(memory, "memory/2026-11-01.md", "Alice drinks green tea every morning")
    (detailed,) = write(
        memory, "memory/2026-11-03.md", "Alice drinks green tea every morning at 7am"
    )

    report = light(memory)

    assert report.merged == [(detailed, short, "near-exact duplicate")]
    assert list(live(memory)) == [detailed]
    assert short in archived(memory)


def test_different_values_and_a_negation_are_never_merged_without_a_model(
    memory: FileMemory,
) -> None:
    job = write(memory, "memory/2026-11-01.md", "Alice works as an engineer", "Bob eats meat")
    (other_job,) = write(memory, "memory/2026-11-02.md", "Alice works as a manager")
    (no_meat,) = write(memory, "memory/2026-11-02.md", "Bob does not eat meat")
    (dup,) = write(memory, "memory/2026-11-03.md", "Bob eats meat")  # the positive control

    report = light(memory)

    assert report.merged == [(job[1], dup, "exact duplicate")]
    assert set(live(memory)) == {*job, other_job, no_meat}
    # the negated twin is a conflict; different values wait for a model (light run: none)
    assert report.conflicts == [(job[1], no_meat)]
    assert report.unjudged >= 1
    (conflict,) = records(memory).conflicts()
    assert {conflict.memory_id, conflict.conflicting_memory_id} == {job[1], no_meat}
    assert "negation" in conflict.reason
    assert light(memory).conflicts == []  # recorded once


def test_young_daily_entries_are_left_to_settle(memory: FileMemory) -> None:
    write(memory, "memory/2026-11-24.md", "Carol feeds the cat", "Carol feeds the cat")
    write(memory, "memory/2026-11-20.md", "Dave feeds the dog", "Dave feeds the dog")

    report = light(memory, min_age_days=2)

    assert [how for *_, how in report.merged] == ["exact duplicate"]
    assert len([t for t in live(memory).values() if t == "Carol feeds the cat"]) == 2


def test_a_persons_line_is_never_rewritten_or_archived_only_proposed(
    memory: FileMemory,
) -> None:
    write(memory, "memory/2026-11-01.md", "Carol plays the cello", hand=True)
    write(memory, "memory/2026-11-02.md", "Erin plays the flute", hand=True)
    (erin,) = write(memory, "memory/2026-11-03.md", "Erin plays the flute")
    (detailed,) = write(memory, "memory/2026-11-04.md", "Carol plays the cello in an orchestra")
    before = {
        p: read_text(memory.scope.root / p)
        for p in ("memory/2026-11-01.md", "memory/2026-11-02.md")
    }

    report = light(memory, lexical_merge=0.6)

    for path, text in before.items():
        assert read_text(memory.scope.root / path) == text  # byte for byte
    # the person's line was kept over mindroom's copy (archived) ...
    erin_hand = next(i for i, t in live(memory).items() if t == "Erin plays the flute")
    assert report.merged == [(erin_hand, erin, "exact duplicate")]
    # ... and where mindroom's entry says more, the merge is only proposed
    carol_hand = next(i for i, t in live(memory).items() if t == "Carol plays the cello")
    assert report.suggestions == [(detailed, carol_hand)]
    (proposal,) = records(memory).conflicts()
    assert proposal.kind == "merge"
    assert proposal.metadata["text"] == "Carol plays the cello in an orchestra"
    assert detailed in live(memory)


def test_a_fact_noted_on_two_days_is_promoted_to_memory_md_once(memory: FileMemory) -> None:
    write(memory, "memory/2026-11-01.md", "Alice is allergic to peanuts")
    write(memory, "memory/2026-11-06.md", "Alice is allergic to peanuts")
    write(memory, "memory/2026-11-06.md", "Bob visited Rome")  # one day only: stays daily

    report = light(memory, promotion_confidence=0.7)

    assert len(report.promoted) == 1
    long_term = read_text(memory.scope.root / "MEMORY.md")
    assert "Alice is allergic to peanuts" in long_term
    assert "Rome" not in long_term
    assert "Alice is allergic to peanuts" in read_text(memory.scope.root / "memory/2026-11-01.md")
    assert light(memory, promotion_confidence=0.7).promoted == []
    assert read_text(memory.scope.root / "MEMORY.md").count("peanuts") == 1


def test_a_fact_recalled_often_counts_as_corroborated(memory: FileMemory) -> None:
    (fact,) = write(memory, "memory/2026-11-01.md", "Alice keeps bees")
    write(memory, "memory/2026-11-01.md", "Bob keeps goats")
    store = records(memory)
    for _ in range(3):
        store.note_retrieved([fact])
    store.close()

    report = light(memory, promotion_confidence=0.7)

    assert [daily for daily, _ in report.promoted] == [fact]
    assert "goats" not in read_text(memory.scope.root / "MEMORY.md")


def test_a_daily_note_and_its_copy_in_memory_md_are_not_duplicates(memory: FileMemory) -> None:
    (daily,) = write(memory, "memory/2026-11-01.md", "Alice lives in Berlin")
    (curated,) = write(memory, "MEMORY.md", "Alice lives in Berlin")

    report = light(memory)

    assert report.merged == []
    assert {daily, curated} <= set(live(memory))


# -- with the model ------------------------------------------------------------------------


def test_the_model_merges_a_paraphrase_into_a_new_entry_and_archives_both_originals(
    memory: FileMemory, model: ScriptedModel
) -> None:
    (tea,) = write(memory, "memory/2026-11-01.md", "Alice likes tea")
    (prefers,) = write(memory, "memory/2026-11-02.md", "alice prefers tea")
    (job,) = write(memory, "memory/2026-11-02.md", "Alice works as an engineer")
    (other,) = write(memory, "memory/2026-11-03.md", "Alice works as a manager")
    merged_text = "Alice likes tea and prefers it"
    model.set_handler(
        judge_handler(
            {
                ("Alice likes tea", "alice prefers tea"): {
                    "verdict": "same",
                    "merged": merged_text,
                },
                ("Alice works as an engineer", "Alice works as a manager"): "conflict",
            }
        )
    )
    cfg = config(model.base_url, promotion_confidence=1.0)
    judge = judge_for(cfg)

    report = consolidate_memory(memory, cfg, judge, NOW)

    now_live = live(memory)
    (new_id_,) = [i for i, t in now_live.items() if t == merged_text]
    assert {tea, prefers}.isdisjoint(now_live)
    assert archived(memory) == {tea: "Alice likes tea", prefers: "alice prefers tea"}
    assert {job, other} <= set(now_live)
    assert sorted(report.merged) == sorted(
        [(new_id_, tea, "same fact (model)"), (new_id_, prefers, "same fact (model)")]
    )
    assert report.conflicts == [(job, other)] or report.conflicts == [(other, job)]
    merge = next(r for r in memory.history_of(new_id_) if r.op == "merge")
    assert merge.meta is not None
    assert merge.meta["sources"] == [tea, prefers]
    assert judge.budget.calls == len([r for r in model.requests if is_judge_request(r)]) >= 1

    # judged pairs are not asked again (fingerprints), nor recorded twice
    asked = len(model.requests)
    again = consolidate_memory(memory, cfg, judge_for(cfg), NOW)
    assert again.conflicts == []
    assert again.merged == []
    assert all(
        {"Alice works as an engineer", "Alice works as a manager"} != {a, b}
        for r in model.requests[asked:]
        for _, a, b in judge_pairs(last_user_text(r))
    )


def test_past_the_budget_pairs_wait_for_the_next_run_and_the_non_model_merges_still_happen(
    memory: FileMemory, model: ScriptedModel
) -> None:
    people = ["Alice", "Bob", "Carol", "Dave"]
    for day, person in enumerate(people, start=1):
        write(memory, f"memory/2026-11-0{day}.md", f"{person} works as an engineer")
        write(memory, f"memory/2026-11-0{day + 1}.md", f"{person} works as a pilot")
    (dup,) = write(memory, "memory/2026-11-09.md", "Alice works as an engineer")
    model.set_handler(judge_handler({}, default="conflict"))
    cfg = config(model.base_url, pairs_per_call=1, promotion_confidence=1.0)

    judge = judge_for(cfg, calls=2)
    report = consolidate_memory(memory, cfg, judge, NOW)

    assert judge.budget.calls == 2 == len(model.requests)
    assert len(report.conflicts) == 2
    assert report.unjudged == 2
    assert [archived_id for _, archived_id, _ in report.merged] == [dup]  # no model needed

    second = consolidate_memory(memory, cfg, judge_for(cfg, calls=10), NOW)
    assert len(second.conflicts) == 2
    assert second.unjudged == 0
    assert len(records(memory).conflicts()) == 4


def test_an_unreachable_model_leaves_pairs_unjudged_and_merges_nothing_it_should_not(
    memory: FileMemory,
) -> None:
    write(memory, "memory/2026-11-01.md", "Alice likes tea")
    write(memory, "memory/2026-11-02.md", "alice prefers tea")
    cfg = config("http://127.0.0.1:9/v1")  # nothing listens on the discard port

    report = consolidate_memory(memory, cfg, judge_for(cfg), NOW)

    assert report.merged == []
    assert report.unjudged >= 1
    assert len(live(memory)) == 2


# -- intersections: a person's edit, a crash -------------------------------------------------


def test_a_person_editing_an_entry_while_the_model_judges_it_keeps_the_edit(
    memory: FileMemory, model: ScriptedModel
) -> None:
    (tea,) = write(memory, "memory/2026-11-01.md", "Alice likes tea")
    (prefers,) = write(memory, "memory/2026-11-02.md", "alice prefers tea")
    daily = memory.scope.root / "memory/2026-11-02.md"
    inner = judge_handler({("Alice likes tea", "alice prefers tea"): "same"})
    edited = []

    def person_saves_then_model_answers(body: dict[str, Any]) -> Any:
        if not edited:  # the person saves their editor while the pass waits for the model
            daily.write_text(
                daily.read_text().replace("alice prefers tea", "alice prefers coffee now")
            )
            edited.append(True)
        return inner(body)

    model.set_handler(person_saves_then_model_answers)
    cfg = config(model.base_url)

    report = consolidate_memory(memory, cfg, judge_for(cfg), NOW)

    assert edited
    assert report.skipped_changed == 1
    assert report.merged == []
    assert live(memory) == {tea: "Alice likes tea", prefers: "alice prefers coffee now"}
    assert archived(memory) == {}
    assert "alice prefers coffee now" in daily.read_text()


def test_archiving_an_entry_a_person_changed_since_it_was_read_moves_nothing(
    memory: FileMemory,
) -> None:
    from mindroom.memory.files.archive import archive_entry_sync

    (entry_id,) = write(memory, "memory/2026-11-01.md", "Alice likes tea")
    seen = memory.find(entry_id)
    path = memory.scope.root / "memory/2026-11-01.md"
    path.write_text(path.read_text().replace("likes tea", "likes green tea"))

    moved = archive_entry_sync(memory, seen, into=None, why="test", actor="test", today=NOW.date())

    assert moved is False
    assert live(memory) == {entry_id: "Alice likes green tea"}
    assert archived(memory) == {}
    assert archived_entries(memory) == []


CRASH = textwrap.dedent(
    """
    import datetime as dt, os, sys
    from pathlib import Path
    from mindroom.memory.scope import MemoryScope
    from mindroom.memory.files.store import FileMemory
    from mindroom.memory.files.archive import archive_entry_sync, restore_archived_sync

    tmp, what, entry_id = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    memory = FileMemory(MemoryScope("agent_test", tmp / "workspace", tmp / "state"))
    writes = []
    real_write = memory.write

    def write(*args, **kwargs):
        writes.append(args[0])
        if len(writes) == 2:  # the second step: the process dies before it
            os._exit(7)
        return real_write(*args, **kwargs)

    memory.write = write
    if what == "archive":
        archive_entry_sync(memory, memory.find(entry_id), into=None, why="t", actor="t",
                           today=dt.date(2026, 11, 24))
    else:
        restore_archived_sync(memory, entry_id, actor="t")
    """
)


@pytest.mark.parametrize("what", ["archive", "restore"])
def test_a_crash_between_the_two_steps_of_a_move_loses_nothing_and_live_wins(
    memory: FileMemory, tmp_path: Path, what: str
) -> None:
    from mindroom.memory.files.archive import archive_entry_sync

    (entry_id,) = write(memory, "memory/2026-11-01.md", "Alice likes tea")
    if what == "restore":
        assert archive_entry_sync(
            memory, memory.find(entry_id), into=None, why="t", actor="t", today=NOW.date()
        )
        assert entry_id not in live(memory)

    died = subprocess.run(
        [sys.executable, "-c", CRASH, str(tmp_path), what, entry_id],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert died.returncode == 7, died.stderr

    # cut short: the entry is in both places (the first step done), in neither never
    assert entry_id in live(memory)
    assert entry_id in archived(memory)
    assert reconcile_archive_sync(memory) == 1
    assert live(memory) == {entry_id: "Alice likes tea"}
    assert archived(memory) == {}
    assert read_text(memory.scope.root / "memory/2026-11-01.md").count("Alice likes tea") == 1


def test_restore_brings_an_archived_entry_back_where_it_was_with_its_id(
    memory: FileMemory,
) -> None:
    (first,) = write(memory, "memory/2026-11-01.md", "Alice drinks green tea every morning")
    (again,) = write(memory, "memory/2026-11-05.md", "Alice drinks green tea every morning")
    light(memory)
    assert again in archived(memory)

    restored = memory.restore_sync(again, actor="cli")

    assert (restored.id, restored.path) == (again, "memory/2026-11-05.md")
    assert set(live(memory)) == {first, again}
    assert archived(memory) == {}
    assert (
        re.search(r"<!-- archived", read_text(memory.scope.root / "memory/archive/2026-11.md"))
        is None
    )
    assert [r.op for r in memory.history_of(again)][-2:] == ["archive", "restore"]


# -- what the bench found: each a rule, not a case ---------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "band"),
    [
        ("Morzok likes crowds", "Morzok does not like crowds", "polarity"),  # likes/like
        ("Ines moved to Porto", "Ines did not move to Porto", "polarity"),  # moved/move
        ("Brathkrun can drive", "Brathkrun can't drive", "polarity"),
        # an added word that changes whose fact it is: the model decides
        (
            "Nolemom's birthday is on June 14",
            "Nolemom's brother's birthday is on June 14",
            "synthesis",
        ),
        (
            "Alice drinks green tea every morning",
            "Alice drinks green tea every morning at 7am",
            "merge",
        ),
        # a possessive does not hide the subject
        (
            "Navy is Geshirvil's favourite colour",
            "Geshirvil's favourite colour is mint",
            "conflict",
        ),
    ],
)
def test_bands_of_word_forms_possessives_and_whose_fact(a: str, b: str, band: str) -> None:
    from mindroom.memory.jobs.consolidate.signals import Thresholds, classify, words

    assert classify(words(a), words(b), None, Thresholds())[0] == band
    assert classify(words(b), words(a), None, Thresholds())[0] == band


def test_a_negation_of_a_fact_in_memory_md_is_recorded(memory: FileMemory) -> None:
    (curated,) = write(memory, "MEMORY.md", "Frirror drinks coffee")
    (daily,) = write(memory, "memory/2026-11-02.md", "Frirror never drinks coffee")

    report = light(memory)

    assert report.conflicts == [(curated, daily)]
    assert report.merged == []


def test_a_conflict_with_an_entry_merged_away_is_recorded_on_what_took_over(
    memory: FileMemory,
) -> None:
    van = "Brathkrun can drive the old blue family van"
    (short,) = write(memory, "memory/2026-11-01.md", van)
    (detailed,) = write(memory, "memory/2026-11-02.md", f"{van} in 2019")
    (negated,) = write(
        memory, "memory/2026-11-03.md", "Brathkrun can't drive the old blue family van"
    )

    report = light(memory)

    assert report.merged == [(detailed, short, "near-exact duplicate")]
    assert report.conflicts == [(detailed, negated)]
    (conflict,) = records(memory).conflicts()
    texts = {conflict.metadata["a"]["text"], conflict.metadata["b"]["text"]}
    assert texts == {f"{van} in 2019", "Brathkrun can't drive the old blue family van"}


def test_when_the_model_keeps_one_wording_that_entry_is_kept_with_its_id(
    memory: FileMemory, model: ScriptedModel
) -> None:
    (first,) = write(memory, "memory/2026-11-01.md", "Alice likes tea")
    (second,) = write(memory, "memory/2026-11-02.md", "Alice really likes tea a lot")
    model.set_handler(
        judge_handler(
            {
                ("Alice likes tea", "Alice really likes tea a lot"): {
                    "verdict": "same",
                    "merged": "alice really likes tea a lot.",
                }
            }
        )
    )
    cfg = config(model.base_url, promotion_confidence=1.0, lexical_merge=1.0)

    report = consolidate_memory(memory, cfg, judge_for(cfg), NOW)

    assert report.merged == [(second, first, "same fact (model)")]
    assert live(memory) == {second: "Alice really likes tea a lot"}
    assert archived(memory) == {first: "Alice likes tea"}


# -- found in review: moves against a reconcile, copied markers, what recall shows -------------


def test_a_reconcile_from_elsewhere_waits_for_a_move_in_between_its_two_steps(
    memory: FileMemory,
) -> None:
    import threading

    from mindroom.memory.files.archive import archive_entry_sync

    (entry_id,) = write(memory, "memory/2026-11-01.md", "Alice likes tea")
    other = FileMemory(MemoryScope("agent_test", memory.scope.root, memory.scope.state_dir))
    real_write = memory.write
    reconciled: list[int] = []
    worker: list[threading.Thread] = []

    def write_then_let_another_process_reconcile(relative: str, *args: Any, **kw: Any) -> Any:
        result = real_write(relative, *args, **kw)
        if relative.startswith("memory/archive/") and not worker:  # step one done
            worker.append(
                threading.Thread(target=lambda: reconciled.append(reconcile_archive_sync(other)))
            )
            worker[0].start()
            worker[0].join(timeout=2)  # unlocked, it drops the archived copy right here
        return result

    memory.write = write_then_let_another_process_reconcile  # type: ignore[method-assign]
    try:
        moved = archive_entry_sync(
            memory, memory.find(entry_id), into=None, why="t", actor="t", today=NOW.date()
        )
    finally:
        del memory.write
    worker[0].join()
    other.close()

    assert moved
    assert reconciled == [0]
    assert archived(memory) == {entry_id: "Alice likes tea"}
    assert entry_id not in live(memory)


def test_a_marker_copied_by_hand_with_other_text_never_costs_the_archived_text(
    memory: FileMemory,
) -> None:
    from mindroom.errors import MemoryStoreError as Refused
    from mindroom.memory.files.archive import archive_entry_sync

    daily = memory.scope.root / "memory/2026-11-01.md"
    daily.parent.mkdir(parents=True)
    daily.write_text("- Bo likes tea <!-- m-11112222 -->\n")
    (memory.scope.root / "topics.md").write_text("- Bo likes green tea <!-- m-11112222 -->\n")
    seen = next(e for e in memory.entries_of("memory/2026-11-01.md"))

    assert archive_entry_sync(memory, seen, into=None, why="t", actor="t", today=NOW.date())
    assert reconcile_archive_sync(memory) == 0  # live has the id, not the text

    assert archived(memory) == {"m-11112222": "Bo likes tea"}
    daily.write_text("- Bo likes black tea <!-- m-11112222 -->\n")  # copied back, changed
    with pytest.raises(Refused, match="already"):
        memory.restore_sync("m-11112222", actor="t")  # the id is taken in its file...
    assert archived(memory) == {"m-11112222": "Bo likes tea"}  # ...and the archive kept it
    daily.write_text("")
    assert memory.restore_sync("m-11112222", actor="t").text == "Bo likes tea"
    assert archived(memory) == {}


def test_recall_shows_each_side_of_an_open_conflict_with_its_own_id_and_current_text(
    memory: FileMemory,
) -> None:
    from mindroom.config.schema import FileMemoryConfig
    from mindroom.memory.files.archive import archive_entry_sync
    from mindroom.memory.search.recall import RecallSettings, build_recall

    daily = memory.scope.root / "memory/2026-11-01.md"
    daily.parent.mkdir(parents=True)
    daily.write_text(  # the larger id first: records keep ids sorted, texts as seen
        "- Bob eats meat <!-- m-ff000001 -->\n- Bob does not eat meat <!-- m-00000002 -->\n"
    )
    assert light(memory).conflicts
    settings = RecallSettings.of(FileMemoryConfig())

    block = build_recall(memory, "does Bob eat meat?", settings, now=NOW, count=False)

    (line,) = [line for line in block.splitlines() if "[m-ff000001]" in line]
    assert "'Bob eats meat' [m-ff000001]" in line
    assert "'Bob does not eat meat' [m-00000002]" in line
    archive_entry_sync(
        memory, memory.find("m-00000002"), into=None, why="t", actor="t", today=NOW.date()
    )
    after = build_recall(memory, "does Bob eat meat?", settings, now=NOW, count=False)
    assert "Bob eats meat" in after  # the control: the entry is still recalled
    assert "Open conflicts" not in after  # one side left memory: nothing to weigh
