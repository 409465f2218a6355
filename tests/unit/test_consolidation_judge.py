"""The consolidation judge: batches, budget, fingerprints and reading the model's answer.

``ask`` here is a plain function answering through :mod:`tests.support.scripted_judge` (the same
answers the scripted model serves over HTTP in test_consolidation_ask.py).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
from pathlib import Path

import pytest

from mindroom.errors import ModelError
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.jobs.consolidate.fingerprints import Fingerprints
from mindroom.memory.jobs.consolidate.judge import Budget, Pair, PairJudge, Verdict, render_pairs
from tests.support.scripted_judge import JUDGE_MARKER, answer_judge, judge_pairs

NOW = dt.datetime(2026, 11, 20, 9, 0, tzinfo=dt.UTC)


def entry(eid: str, text: str, path: str = "MEMORY.md") -> MemoryEntry:
    return MemoryEntry(eid, text, path, 1, 1)


def pair(n: int, similarity: float = 0.8) -> Pair:
    a = entry(f"m-a{n:07d}", f"fact a{n}")
    b = entry(f"m-b{n:07d}", f"fact b{n}")
    return Pair(a, b, similarity, "synthesis")


class Recorder:
    """An ``ask`` that answers every pair with ``verdict`` and keeps what it was asked."""

    def __init__(self, verdict: str = "different", answer: str | None = None) -> None:
        self.verdict = verdict
        self.answer = answer
        self.prompts: list[tuple[str, str]] = []

    def __call__(self, system: str, user: str) -> str:
        self.prompts.append((system, user))
        if self.answer is not None:
            return self.answer
        return answer_judge(system, user, {}, default=self.verdict)


def test_pairs_are_asked_in_batches_of_pairs_per_call() -> None:
    ask = Recorder("different")
    budget = Budget(per_run=20, per_day=60, used_today=0)
    pairs = [pair(n) for n in range(17)]

    verdicts = PairJudge(ask, budget, pairs_per_call=8).judge(pairs, None)

    assert [len(judge_pairs(user)) for _, user in ask.prompts] == [8, 8, 1]
    assert budget.calls == 3
    assert all(system.startswith(JUDGE_MARKER) for system, _ in ask.prompts)
    assert [v.pair for v in verdicts] == pairs
    assert {v.kind for v in verdicts} == {"different"}


def test_each_verdict_belongs_to_its_pair() -> None:
    tea = Pair(
        entry("m-00000001", "Alice likes tea"),
        entry("m-00000002", "alice prefers tea"),
        0.8,
        "synthesis",
    )
    home = Pair(
        entry("m-00000003", "Alice lives in Berlin"),
        entry("m-00000004", "Alice moved to Lisbon"),
        0.55,
        "conflict",
    )
    other = Pair(
        entry("m-00000005", "Bob plays chess"),
        entry("m-00000006", "Bob owns a cat"),
        0.6,
        "conflict",
    )
    script = {
        ("Alice likes tea", "alice prefers tea"): {"verdict": "same", "merged": "Alice likes tea"},
        ("Alice moved to Lisbon", "Alice lives in Berlin"): {
            "verdict": "conflict",
            "reason": "Berlin vs Lisbon",
        },
    }

    verdicts = PairJudge(
        lambda system, user: answer_judge(system, user, script), Budget(5, 5, 0), pairs_per_call=8
    ).judge([tea, home, other], None)

    assert verdicts == [
        Verdict(tea, "same", merged="Alice likes tea"),
        Verdict(home, "conflict", reason="Berlin vs Lisbon"),
        Verdict(other, "different"),
    ]


def test_the_prompt_shows_each_entrys_date_when_known() -> None:
    dated = Pair(
        entry("m-00000001", "Alice lives in Berlin", "memory/2026-03-01.md"),
        entry("m-00000002", "Alice moved to Lisbon", "memory/2026-06-01.md"),
        0.6,
        "conflict",
    )
    half = Pair(
        entry("m-00000003", "Bob likes chess"),
        entry("m-00000004", "Bob plays chess daily", "memory/2026-05-02.md"),
        0.8,
        "synthesis",
    )
    undated = pair(1)

    user = render_pairs([dated, half, undated])

    assert "Pair 1 (A dated 2026-03-01, B dated 2026-06-01)\n" in user
    assert "Pair 2 (B dated 2026-05-02)\n" in user
    assert "Pair 3\n" in user
    assert judge_pairs(user) == [
        (1, "Alice lives in Berlin", "Alice moved to Lisbon"),
        (2, "Bob likes chess", "Bob plays chess daily"),
        (3, "fact a1", "fact b1"),
    ]


def test_an_entry_of_several_lines_is_shown_on_one_line() -> None:
    multi = Pair(
        entry("m-00000001", "Alice's plan:\nfly to Lisbon\nin May"),
        entry("m-00000002", "Pair 9 of shoes"),
        0.8,
        "synthesis",
    )

    assert judge_pairs(render_pairs([multi])) == [
        (1, "Alice's plan: fly to Lisbon in May", "Pair 9 of shoes")
    ]


def test_the_system_prompt_explains_verdicts_merges_conflicts_and_json() -> None:
    ask = Recorder()
    PairJudge(ask, Budget(1, 1, 0), pairs_per_call=8).judge([pair(1)], None)
    system = ask.prompts[0][0]

    assert system.startswith(JUDGE_MARKER + "\n")
    for word in ('"same"', '"conflict"', '"different"', "every detail", "newer", "JSON"):
        assert word in system


# -- budget -------------------------------------------------------------------------------


def test_budget_counts_calls_and_stops_at_the_run_cap() -> None:
    budget = Budget(per_run=2, per_day=10, used_today=0)

    assert [budget.take() for _ in range(4)] == [True, True, False, False]
    assert budget.calls == 2


def test_budget_stops_at_the_day_cap_counting_earlier_runs() -> None:
    budget = Budget(per_run=10, per_day=5, used_today=3)

    assert [budget.take() for _ in range(4)] == [True, True, False, False]
    assert budget.calls == 2
    assert Budget(per_run=10, per_day=5, used_today=7).take() is False


def test_past_the_run_budget_the_remaining_pairs_get_no_verdict() -> None:
    ask = Recorder()
    budget = Budget(per_run=2, per_day=60, used_today=0)
    pairs = [pair(n) for n in range(17)]
    judge = PairJudge(ask, budget, pairs_per_call=8)

    verdicts = judge.judge(pairs, None)

    assert len(ask.prompts) == 2
    assert [v.pair for v in verdicts] == pairs[:16]
    assert judge.unasked == 1


def test_the_day_budget_is_shared_with_earlier_runs() -> None:
    ask = Recorder()
    judge = PairJudge(ask, Budget(per_run=20, per_day=5, used_today=4), pairs_per_call=5)

    verdicts = judge.judge([pair(n) for n in range(12)], None)

    assert len(ask.prompts) == 1
    assert len(verdicts) == 5


def test_one_budget_spans_every_scope_of_the_run() -> None:
    ask = Recorder()
    judge = PairJudge(ask, Budget(per_run=3, per_day=60, used_today=0), pairs_per_call=2)

    first = judge.judge([pair(n) for n in range(4)], None)
    second = judge.judge([pair(n) for n in range(10, 14)], None)

    assert (len(first), len(second), len(ask.prompts)) == (4, 2, 3)


def test_no_budget_means_no_call() -> None:
    ask = Recorder()

    assert PairJudge(ask, Budget(0, 60, 0), pairs_per_call=8).judge([pair(1)], None) == []
    assert ask.prompts == []
    # the control: with one call allowed, the same pair is asked
    assert len(PairJudge(ask, Budget(1, 60, 0), pairs_per_call=8).judge([pair(1)], None)) == 1


# -- failures ---------------------------------------------------------------------------


def test_a_failing_call_counts_and_the_next_batch_is_still_asked() -> None:
    calls: list[str] = []

    def ask(system: str, user: str) -> str:
        calls.append(user)
        if len(calls) == 1:
            raise ModelError("model default at http://127.0.0.1:1/v1 did not answer")
        return answer_judge(system, user, {})

    budget = Budget(per_run=10, per_day=60, used_today=0)
    judge = PairJudge(ask, budget, pairs_per_call=2)
    pairs = [pair(n) for n in range(4)]

    verdicts = judge.judge(pairs, None)

    assert budget.calls == 2
    assert [v.pair for v in verdicts] == pairs[2:]
    assert judge.failed_calls == 1


def test_after_consecutive_failures_the_judge_stops_asking() -> None:
    calls: list[str] = []

    def ask(system: str, user: str) -> str:
        calls.append(user)
        raise ModelError("connection refused")

    budget = Budget(per_run=20, per_day=60, used_today=0)
    judge = PairJudge(ask, budget, pairs_per_call=1)

    assert judge.judge([pair(n) for n in range(10)], None) == []
    assert len(calls) == PairJudge.MAX_CONSECUTIVE_FAILURES == budget.calls
    assert judge.stopped
    assert judge.judge([pair(20)], None) == []  # later scopes of the run are not asked either
    assert len(calls) == PairJudge.MAX_CONSECUTIVE_FAILURES


def test_a_success_between_failures_resets_the_count() -> None:
    results = iter(["fail", "fail", "ok", "fail", "fail", "ok"])

    def ask(system: str, user: str) -> str:
        if next(results) == "fail":
            raise ModelError("overloaded")
        return answer_judge(system, user, {})

    judge = PairJudge(ask, Budget(20, 60, 0), pairs_per_call=1)

    assert len(judge.judge([pair(n) for n in range(6)], None)) == 2
    assert not judge.stopped


# -- reading the answer ------------------------------------------------------------------

TWO = [pair(1), pair(2)]


def read(answer: str, pairs: list[Pair] = TWO) -> list[Verdict]:
    return PairJudge(Recorder(answer=answer), Budget(1, 1, 0), pairs_per_call=8).judge(pairs, None)


def test_an_answer_in_a_code_fence_with_words_around_it_is_read() -> None:
    answer = (
        "Sure! Here is my judgement:\n```json\n"
        '{"pairs": [{"pair": 1, "verdict": "same", "merged": "fact a1 and b1"},'
        ' {"pair": 2, "verdict": "different"}]}\n```\nLet me know if {you} need more.'
    )

    assert read(answer) == [Verdict(TWO[0], "same", "fact a1 and b1"), Verdict(TWO[1], "different")]


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        pytest.param("I think they are the same.", [], id="not-json"),
        pytest.param('{"pairs": [{"pair": 1, "verdict": "same"', [], id="truncated-json"),
        pytest.param('{"verdicts": []}', [], id="no-pairs-key"),
        pytest.param(
            '{"pairs": [{"pair": 1, "verdict": "different"}, {"pair": 7, "verdict": "same",'
            ' "merged": "x"}]}',
            [1],
            id="unknown-pair-number",
        ),
        pytest.param('{"pairs": [{"pair": 2, "verdict": "different"}]}', [2], id="missing-pair"),
        pytest.param(
            '{"pairs": [{"pair": 1}, {"pair": 2, "verdict": "different"}]}', [2], id="no-verdict"
        ),
        pytest.param(
            '{"pairs": [{"pair": 1, "verdict": "same"}, {"pair": 2, "verdict": "same",'
            ' "merged": " "}]}',
            [],
            id="same-without-merged-text",
        ),
        pytest.param(
            '{"pairs": [{"pair": 1, "verdict": "maybe"}, {"pair": 2, "verdict": "different"}]}',
            [2],
            id="unknown-verdict",
        ),
        pytest.param(
            '{"pairs": [{"pair": 1, "verdict": "different"}, {"pair": 1, "verdict": "conflict"},'
            ' {"pair": 2, "verdict": "different"}]}',
            [2],
            id="two-verdicts-for-one-pair",
        ),
        pytest.param(
            '{"pairs": [{"pair": true, "verdict": "different"}, {"pair": "2", "verdict":'
            ' "different"}]}',
            [2],
            id="pair-number-not-a-number",
        ),
    ],
)
def test_a_malformed_answer_gives_no_verdict_for_what_it_garbles(
    answer: str, kept: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="mindroom.memory.jobs.consolidate.judge"):
        verdicts = read(answer)

    assert [TWO.index(v.pair) + 1 for v in verdicts] == kept
    assert caplog.records, "the problem is logged"


def test_a_well_formed_answer_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    # the control for the test above: its log lines come from the garbled parts
    answer = json.dumps(
        {
            "pairs": [
                {"pair": 1, "verdict": "different"},
                {"pair": 2, "verdict": "conflict", "reason": "r"},
            ]
        }
    )
    with caplog.at_level(logging.WARNING, logger="mindroom.memory.jobs.consolidate.judge"):
        assert len(read(answer)) == 2
    assert caplog.records == []


def test_an_unreadable_answer_counts_as_a_failed_call() -> None:
    ask = Recorder(answer="no idea")
    judge = PairJudge(ask, Budget(20, 60, 0), pairs_per_call=1)

    assert judge.judge([pair(n) for n in range(10)], None) == []
    assert len(ask.prompts) == PairJudge.MAX_CONSECUTIVE_FAILURES
    assert judge.unreadable == PairJudge.MAX_CONSECUTIVE_FAILURES


# -- fingerprints --------------------------------------------------------------------------


def test_a_pair_judged_within_recheck_days_is_not_asked_again(tmp_path: Path) -> None:
    seen = Fingerprints(tmp_path / "consolidation.db", recheck_days=14)
    ask = Recorder()
    judge = PairJudge(ask, Budget(20, 60, 0), pairs_per_call=8)
    pairs = [pair(1), pair(2)]

    assert len(judge.judge(pairs, seen, now=NOW)) == 2
    assert judge.judge(pairs, seen, now=NOW + dt.timedelta(days=13)) == []
    assert judge.skipped_recent == 2
    assert len(ask.prompts) == 1

    later = judge.judge(pairs, seen, now=NOW + dt.timedelta(days=15))
    assert len(later) == 2
    assert len(ask.prompts) == 2


def test_a_short_budget_asks_the_pairs_never_asked_before_those_asked_long_ago(
    tmp_path: Path,
) -> None:
    """Else a budget smaller than the waiting pairs would re-ask the same ones every
    recheck_days and never reach the rest."""
    seen = Fingerprints(tmp_path / "consolidation.db", recheck_days=14)
    ask = Recorder()
    week = dt.timedelta(days=7)
    for run in range(4):  # one call of two pairs a week, six pairs waiting, in one order
        PairJudge(ask, Budget(1, 60, 0), pairs_per_call=2).judge(
            [pair(n) for n in range(6)], seen, now=NOW + run * week
        )

    asked = [sorted(re.findall(r"^A: (.*)$", user, re.MULTILINE)) for _, user in ask.prompts]
    firsts = [pair(n).a.text for n in range(6)]
    assert asked == [firsts[0:2], firsts[2:4], firsts[4:6], firsts[0:2]]


def test_a_pair_without_a_verdict_is_not_fingerprinted(tmp_path: Path) -> None:
    seen = Fingerprints(tmp_path / "consolidation.db", recheck_days=14)
    garbled = PairJudge(Recorder(answer="???"), Budget(5, 60, 0), pairs_per_call=8)
    assert garbled.judge([pair(1)], seen, now=NOW) == []

    ask = Recorder()
    assert len(PairJudge(ask, Budget(5, 60, 0), pairs_per_call=8).judge([pair(1)], seen, now=NOW))
    assert len(ask.prompts) == 1


def test_one_pair_given_twice_is_asked_once() -> None:
    ask = Recorder()
    one = pair(1)
    flipped = Pair(one.b, one.a, one.similarity, one.band)

    verdicts = PairJudge(ask, Budget(5, 60, 0), pairs_per_call=8).judge([one, flipped], None)

    assert [v.pair for v in verdicts] == [one]
    assert len(judge_pairs(ask.prompts[0][1])) == 1
