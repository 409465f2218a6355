"""``mindroom memory recall`` and ``memory search`` as a person runs them: a new process each call.

Builds a fresh scope (the repository's config.yaml, its shared agent ``general``) holding N
hand-written entries: short generated sentences about a few people (who did what, where,
when), twenty to a daily file, as a person's notes of a long conversation would be. No data
set: the sentences come from small word lists and a seeded random generator.

Then runs, each as its own ``python -m mindroom`` process:

- the first ``memory recall`` (it builds the persisted indexes: the keyword index, and every
  entry embedded by the local model when ``mindroom[embeddings]`` is installed, with its
  progress bar on stderr);
- ``--later`` (3) more ``memory recall`` calls with other questions (they read the persisted
  indexes; the query is embedded without loading torch);
- ``--later`` ``memory search`` calls.

Each call's wall time and CPU time (user + system of the child, from ``getrusage``) are printed,
with the load average before and after: wall time on a machine other work is using is noise,
the CPU time is what the call costs. The last line is::

    cli_recall_first_ms=N cli_recall_later_ms=N cli_search_later_ms=N

(wall time; "later" figures are medians), preceded by the same figures in CPU time.

    python bench/cli_recall.py [--entries 680] [--later 3] [--seed 7]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PEOPLE = ["Alice", "Bob", "Carol", "Dan", "Eve", "Frank", "Grace", "Hiro"]
DOINGS = [
    "started learning the violin",
    "adopted a rescue dog called Pepper",
    "ran a half marathon",
    "moved to a flat near the river",
    "baked sourdough bread for the neighbours",
    "lost their keys at the station",
    "signed up for a pottery class",
    "visited their grandmother in Lisbon",
    "fixed the old bicycle",
    "started a new job at the library",
    "planted tomatoes on the balcony",
    "read a novel about a lighthouse keeper",
]
WHEN = ["on Saturday", "last week", "in May", "after work", "this morning", "in the holidays"]
WHY = ["", " because a friend asked", " to relax", " for the first time", " with their sister"]
QUESTIONS = [
    "who plays an instrument?",
    "which pets does anyone have?",
    "who travelled to Portugal?",
    "what did Grace do at the weekend?",
]
SEARCHES = ["violin", "dog Pepper", "Lisbon grandmother", "pottery class"]


def build_scope(folder: Path, entries: int, seed: int) -> Path:
    """The config of a scope with ``entries`` generated hand-written entries."""
    config = folder / "config.yaml"
    shutil.copy(REPO / "config.yaml", config)
    shutil.copytree(REPO / "mind_template", folder / "mind_template")
    memory = folder / "agents" / "general" / "workspace" / "memory"
    memory.mkdir(parents=True)
    rng = random.Random(seed)
    lines = [
        f"- {rng.choice(PEOPLE)} {rng.choice(DOINGS)} {rng.choice(WHEN)}{rng.choice(WHY)}."
        for _ in range(entries)
    ]
    for n in range(0, entries, 20):
        day = f"2026-{1 + n // 600 % 12:02d}-{1 + n // 20 % 28:02d}"
        path = memory / f"{day}.md"
        with path.open("a", encoding="utf-8") as handle:
            handle.write("".join(f"{line}\n" for line in lines[n : n + 20]))
    return config


def run(config: Path, *argv: str) -> tuple[float, float, str, str]:
    """One CLI process: wall ms, CPU ms, stdout, stderr."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "mindroom", "memory", *argv, "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    if done.returncode != 0:
        raise SystemExit(f"mindroom memory {' '.join(argv)} failed:\n{done.stderr}")
    return wall, cpu, done.stdout, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=680)
    parser.add_argument("--later", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        config = build_scope(Path(tmp), args.entries, args.seed)
        print(f"scope: {args.entries} hand-written entries")
        wall, cpu, out, err = run(config, "recall", "--agent", "general", QUESTIONS[0])
        bars = [line for line in err.splitlines() if line.startswith("indexing")]
        print(
            f"recall first: wall {wall:.0f} ms, cpu {cpu:.0f} ms ({bars[-1] if bars else 'no bar'})"
        )
        first = (wall, cpu)
        recalls: list[tuple[float, float]] = []
        searches: list[tuple[float, float]] = []
        for n in range(args.later):
            question = QUESTIONS[(n + 1) % len(QUESTIONS)]
            wall, cpu, out, err = run(config, "recall", "--agent", "general", question)
            embedded = "indexing" in err
            print(
                f"recall later {n + 1}: wall {wall:.0f} ms, cpu {cpu:.0f} ms, "
                f"{len(out.splitlines())} lines{', EMBEDDED AGAIN' if embedded else ''}"
            )
            recalls.append((wall, cpu))
        for n in range(args.later):
            query = SEARCHES[n % len(SEARCHES)]
            wall, cpu, out, _ = run(config, "search", "--agent", "general", query)
            hits = len(out.splitlines())
            print(f"search later {n + 1}: wall {wall:.0f} ms, cpu {cpu:.0f} ms, {hits} hits")
            searches.append((wall, cpu))
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print(
        f"cpu: cli_recall_first_cpu_ms={first[1]:.0f} "
        f"cli_recall_later_cpu_ms={statistics.median(c for _, c in recalls):.0f} "
        f"cli_search_later_cpu_ms={statistics.median(c for _, c in searches):.0f}"
    )
    print(
        f"cli_recall_first_ms={first[0]:.0f} "
        f"cli_recall_later_ms={statistics.median(w for w, _ in recalls):.0f} "
        f"cli_search_later_ms={statistics.median(w for w, _ in searches):.0f}"
    )


if __name__ == "__main__":
    main()
