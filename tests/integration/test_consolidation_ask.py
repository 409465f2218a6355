"""How the judge reaches a model: the configured one over real HTTP (the scripted
OpenAI-compatible server), or a job's ``llm_command`` run as a real process."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from mindroom.config.schema import Config
from mindroom.errors import ConfigError, ModelError
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.jobs.consolidate.judge import (
    Budget,
    Pair,
    PairJudge,
    Verdict,
    command_ask,
    model_ask,
)
from tests.support.scripted_judge import JUDGE_MARKER, is_judge_request, judge_handler
from tests.support.scripted_model import Reply, ScriptedModel, last_user_text, system_text
from tests.support.waiting import wait_until

TEA = Pair(
    MemoryEntry("m-00000001", "Alice likes tea", "memory/2026-03-01.md", 1, 1),
    MemoryEntry("m-00000002", "alice prefers tea", "MEMORY.md", 3, 3),
    0.8,
    "synthesis",
)
HOME = Pair(
    MemoryEntry("m-00000003", "Alice lives in Berlin", "MEMORY.md", 4, 4),
    MemoryEntry("m-00000004", "Alice moved to Lisbon", "memory/2026-06-01.md", 1, 1),
    0.6,
    "conflict",
)
SCRIPT = {
    ("Alice likes tea", "alice prefers tea"): "same",
    ("Alice lives in Berlin", "Alice moved to Lisbon"): "conflict",
}


def config(url: str, **consolidation: Any) -> Config:
    scripted = {"base_url": url, "api_key": "test", "max_retries": 2, "timeout_seconds": 20}
    return Config.model_validate(
        {
            "models": {
                "default": {"provider": "openai", "id": "scripted", **scripted},
                "judge": {"provider": "openai", "id": "judge-model", **scripted},
            },
            "memory": {"maintenance": {"consolidation": consolidation}},
        }
    )


# -- the configured model ----------------------------------------------------------------


def test_the_default_model_judges_pairs_over_http(model: ScriptedModel) -> None:
    model.set_handler(judge_handler(SCRIPT))
    budget = Budget(5, 60, 0)

    verdicts = PairJudge(model_ask(config(model.base_url), None, 10), budget, pairs_per_call=8)
    found = verdicts.judge([TEA, HOME], None)

    assert found == [
        Verdict(TEA, "same", merged="Alice likes tea; alice prefers tea"),
        Verdict(HOME, "conflict", reason="scripted conflict"),
    ]
    (request,) = model.requests
    assert request["model"] == "scripted"
    assert is_judge_request(request)
    assert system_text(request).startswith(JUDGE_MARKER)
    assert "Pair 1 (A dated 2026-03-01)\nA: Alice likes tea\n" in last_user_text(request)
    assert budget.calls == 1


def test_the_consolidation_model_setting_picks_the_model(model: ScriptedModel) -> None:
    model.set_handler(judge_handler(SCRIPT))
    cfg = config(model.base_url, model="judge")

    model_ask(cfg, None, 10)(JUDGE_MARKER, "Pair 1\nA: x\nB: y")
    model_ask(cfg, "default", 10)(JUDGE_MARKER, "Pair 1\nA: x\nB: y")

    assert [r["model"] for r in model.requests] == ["judge-model", "scripted"]


def test_a_model_error_is_one_failed_call_without_retries(model: ScriptedModel) -> None:
    model.push(Reply(status=503, error_message="overloaded"))  # the SDK would retry a 503
    model.set_handler(judge_handler(SCRIPT))
    ask = model_ask(config(model.base_url), None, 10)

    with pytest.raises(ModelError, match="503.*overloaded"):
        ask(JUDGE_MARKER, "Pair 1\nA: x\nB: y")
    assert len(model.requests) == 1

    budget = Budget(5, 60, 0)
    model.push(Reply(status=500, error_message="broken"))
    judge = PairJudge(ask, budget, pairs_per_call=1)
    assert judge.judge([TEA, HOME], None) == [Verdict(HOME, "conflict", reason="scripted conflict")]
    assert (budget.calls, judge.failed_calls) == (2, 1)


def test_a_model_slower_than_the_timeout_is_a_failed_call(model: ScriptedModel) -> None:
    model.push(Reply(text='{"pairs": []}', delay=5))

    with pytest.raises(ModelError, match="did not answer within 0.3 s"):
        model_ask(config(model.base_url), None, 0.3)(JUDGE_MARKER, "Pair 1\nA: x\nB: y")


def test_an_answer_that_is_not_a_chat_completion_is_a_model_error(model: ScriptedModel) -> None:
    model.push(Reply(tool_calls=[], text=""))

    with pytest.raises(ModelError, match="empty answer"):
        model_ask(config(model.base_url), None, 10)(JUDGE_MARKER, "Pair 1\nA: x\nB: y")


def test_an_unreachable_server_is_a_model_error() -> None:
    ask = model_ask(config("http://127.0.0.1:9/v1"), None, 5)  # the discard port: nothing listens

    with pytest.raises(ModelError, match=r"127\.0\.0\.1:9"):
        ask(JUDGE_MARKER, "Pair 1\nA: x\nB: y")


def test_an_unknown_or_unsupported_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown model 'nope'"):
        model_ask(config("http://127.0.0.1:9/v1"), "nope", 5)
    anthropic = Config.model_validate({"models": {"default": {"provider": "anthropic", "id": "c"}}})
    with pytest.raises(ConfigError, match="anthropic.*llm_command"):
        model_ask(anthropic, None, 5)


# -- an external command -----------------------------------------------------------------

ANSWERING = """
import json, pathlib, re, sys
prompt = sys.stdin.read()
pathlib.Path(sys.argv[1]).write_text(prompt, encoding="utf-8")
numbers = [int(n) for n in re.findall(r"^Pair (\\d+)", prompt, re.M)]
print("Here is my answer:")
print(json.dumps({"pairs": [{"pair": n, "verdict": "different"} for n in numbers]}))
"""

HANGING = """
import os, pathlib, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
pathlib.Path(sys.argv[1]).write_text(f"{os.getpid()} {child.pid}")
print("thinking hard", file=sys.stderr, flush=True)
time.sleep(600)
"""

FAILING = """
import sys
sys.stdin.read()
print("x" * 5000, file=sys.stderr)
print("boom: no model configured", file=sys.stderr)
sys.exit(3)
"""


def script(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "llm.py"
    path.write_text(text, encoding="utf-8")
    return [sys.executable, str(path)]


def test_a_command_answers_the_prompt_on_stdin(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    ask = command_ask([*script(tmp_path, ANSWERING), str(prompt)], 60)

    verdicts = PairJudge(ask, Budget(5, 60, 0), pairs_per_call=8).judge([TEA, HOME], None)

    assert verdicts == [Verdict(TEA, "different"), Verdict(HOME, "different")]
    sent = prompt.read_text(encoding="utf-8")
    assert sent.startswith(JUDGE_MARKER)
    assert "\nA: Alice lives in Berlin\nB: Alice moved to Lisbon" in sent


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie no longer does)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.asyncio
async def test_a_command_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    ask = command_ask([*script(tmp_path, HANGING), str(pids)], 2)

    with pytest.raises(ModelError, match="did not answer within 2 s.*thinking hard"):
        await asyncio.to_thread(ask, JUDGE_MARKER, "Pair 1\nA: x\nB: y")

    parent, child = (int(p) for p in pids.read_text().split())
    assert _alive(os.getpid())  # the control: the check sees a running process
    await wait_until(lambda: not _alive(parent) and not _alive(child))


def test_a_failing_command_raises_with_the_end_of_its_stderr(tmp_path: Path) -> None:
    ask = command_ask(script(tmp_path, FAILING), 60)

    with pytest.raises(ModelError, match="exited with 3.*boom: no model configured") as caught:
        ask(JUDGE_MARKER, "Pair 1\nA: x\nB: y")
    assert len(str(caught.value)) < 1000


def test_a_missing_command_raises(tmp_path: Path) -> None:
    ask = command_ask([str(tmp_path / "no-such-llm")], 5)

    with pytest.raises(ModelError, match="could not start"):
        ask(JUDGE_MARKER, "Pair 1\nA: x\nB: y")
