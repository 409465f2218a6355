"""``mindroom memory recall`` from a new process each time: the first call builds the persisted
indexes (a progress bar on stderr, stdout clean), later calls embed no entry again and do not
load torch, and an edit between calls is the only thing embedded again.

Real processes, real files, real SQLite, the real bundled embedder.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from mindroom.adapters.embeddings.local import BUNDLED_ID, bundled_model_path
from tests.support.harness import repo_config, write_entries

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "sentence_transformers", "numpy", "sqlalchemy")
# Runs the CLI, then writes which heavy packages it loaded to the file $PROBE_OUT (stdout and
# stderr stay exactly the command's).
PROBE = f"""
import json, os, sys
from mindroom.cli.main import main
code = main(sys.argv[1:])
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
with open(os.environ["PROBE_OUT"], "w") as out:
    json.dump({{"code": code, "loaded": loaded}}, out)
"""
PEOPLE = ["Alice", "Bob", "Carol", "Dan"]
HOBBIES = ["plays the violin", "bakes sourdough bread", "repairs old bicycles", "studies Japanese"]


@pytest.fixture
def scope(tmp_path: Path) -> Path:
    """A config with 32 hand-written entries in the shared agent's daily files."""
    assert bundled_model_path() is not None, "mindroom[embeddings] is not installed"
    config = repo_config(tmp_path)
    root = tmp_path / "agents" / "general" / "workspace"
    for day in range(1, 5):
        lines = [
            f"{p} {h} (note {day}.{n})"
            for n, (p, h) in enumerate(zip(PEOPLE * 2, HOBBIES * 2, strict=True))
        ]
        write_entries(root, f"memory/2026-03-0{day}.md", lines)
    return config


def recall(config: Path, message: str, action: str = "recall") -> tuple[str, str, list[str]]:
    """stdout, stderr and the heavy packages loaded of one ``memory recall`` (or ``action``)
    process."""
    out = config.parent / "probe.json"
    out.unlink(missing_ok=True)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            PROBE,
            "memory",
            action,
            "--agent",
            "general",
            message,
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PROBE_OUT": str(out)},
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["code"] == 0
    return done.stdout, done.stderr, result["loaded"]


def stored_vectors(config: Path) -> int:
    path = config.parent / "mindroom_data" / "memory" / "agent_general" / "vectors.db"
    with sqlite3.connect(path) as db:
        return int(
            db.execute("SELECT count(*) FROM vectors WHERE model = ?", (BUNDLED_ID,)).fetchone()[0]
        )


@pytest.mark.timeout(600)  # three processes, two of which load torch: slow on a loaded machine
def test_recall_builds_the_indexes_once_and_later_processes_embed_nothing(scope: Path) -> None:
    question = "who plays the violin?"

    first_out, first_err, first_loaded = recall(scope, question)
    # the first call embeds every entry, saying so on stderr only
    assert "indexing 32 entries for agent_general: [" in first_err
    assert "32/32" in first_err
    assert first_out.startswith("<memory>")
    assert "indexing" not in first_out
    assert "[#" not in first_out
    assert "violin" in first_out
    assert "torch" in first_loaded  # the positive control: embedding entries loads the model
    assert stored_vectors(scope) == 32

    second_out, second_err, second_loaded = recall(scope, question)
    assert "indexing" not in second_err  # no entry embedded again
    assert "keyword-only" not in second_err
    assert second_out == first_out  # the same block, vectors included
    assert "numpy" in second_loaded  # the vectors were read
    assert "torch" not in second_loaded
    assert "sentence_transformers" not in second_loaded
    assert "sqlalchemy" not in second_loaded
    assert stored_vectors(scope) == 32

    # memory search ranks by keywords: it reads the keyword index and loads no embedder
    search_out, search_err, search_loaded = recall(scope, "violin", "search")
    assert "Alice plays the violin (note 1.0)" in search_out
    assert "indexing" not in search_err
    assert search_loaded == []

    # an edit between calls: only the changed entry is embedded again
    daily = scope.parent / "agents" / "general" / "workspace" / "memory" / "2026-03-02.md"
    daily.write_text(
        daily.read_text().replace("Bob bakes sourdough bread", "Bob plays the cello", 1)
    )
    third_out, third_err, _ = recall(scope, "who plays the cello?")
    assert "indexing 1 entry for agent_general: [" in third_err
    assert "1/1" in third_err
    assert "Bob plays the cello (note 2.1)" in third_out
    assert "indexing" not in third_out
