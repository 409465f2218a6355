"""Structured memory: ``memory_query`` in bullets at 10k entries (issue 15).

Writes a scope of ``--entries`` entries (daily files of about 300 entries, plus MEMORY.md) whose
markers carry random fields (a category of the default set, importance 1-5, a few pinned, a few
soft-deleted), opens it as the product does (``FileMemory``; keyword search unless
``--hybrid``), and times, query by query in turn:

- ``memory_query``: the tool's whole path (request validation, the allowlist, the fields
  filter in SQL, search, bullets within a 512-token budget) for queries of 2-5 corpus words,
  each with a category and an importance filter, as an agent asks them;
- ``search``: the store's search of the same words with no filter but the live-entries one
  (``FileMemory.search_sync``, what ``search_memories`` runs), the baseline.

``--hybrid`` gives the scope the local embedder (``mindroom[embeddings]``) and random stand-in
vectors (``bench/memory_search.py`` says why), so both searches are hybrid, the query embedded
by the real model, as in a default install with the extra.

Prints the median and p95 of both, their ratio, then the contract line. Figures depend on the
machine; the ratio less so.

    python bench/structured_memory.py [--entries 10000] [--queries 200] [--seed 7] [--hybrid]

The last line is ``memory_query_bullets_p50_ms=N``. (The issue's full line adds ``edge_ms`` and
``validator_pass``, measured once relations and the writing validator exist.)
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_search import sentence, vocabulary  # noqa: E402

from mindroom.memory.access import CategoryAccess  # noqa: E402
from mindroom.memory.fields import EntryFields  # noqa: E402
from mindroom.memory.filters import LIVE  # noqa: E402
from mindroom.memory.markdown import new_entry_id, render_entry  # noqa: E402
from mindroom.memory.scope import MemoryScope  # noqa: E402
from mindroom.memory.store import FileMemory  # noqa: E402
from mindroom.memory.structured_query import Asker, parse_request, run_query  # noqa: E402
from mindroom.memory.view import AgentView  # noqa: E402

PER_FILE = 300
CATEGORIES = ["general", "profile", "preferences", "goals", "event", "activity", "tasks"]


def random_fields(rng: random.Random, day: dt.date) -> EntryFields:
    return EntryFields(
        category=rng.choice(CATEGORIES),
        importance=rng.randint(1, 5),
        pinned=rng.random() < 0.05,
        state="soft_deleted" if rng.random() < 0.03 else None,
        created=day,
    )


def write_scope(root: Path, entries: int, rng: random.Random, words: list[str]) -> None:
    """``entries`` entries with fields: a tenth in MEMORY.md, the rest in daily files."""
    (root / "memory").mkdir(parents=True)
    day = dt.date(2025, 1, 1)
    curated = entries // 10
    lines = [
        line
        for _ in range(curated)
        for line in render_entry(new_entry_id(), sentence(rng, words), random_fields(rng, day))
    ]
    (root / "MEMORY.md").write_text("\n".join(lines) + "\n")
    written = curated
    while written < entries:
        count = min(PER_FILE, entries - written)
        lines = [
            line
            for _ in range(count)
            for line in render_entry(new_entry_id(), sentence(rng, words), random_fields(rng, day))
        ]
        (root / "memory" / f"{day.isoformat()}.md").write_text("\n".join(lines) + "\n")
        written += count
        day += dt.timedelta(days=1)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--hybrid", action="store_true",
        help="search as with the local embedder (needs mindroom[embeddings]; see above)",
    )  # fmt: skip
    args = parser.parse_args()
    embedder = None
    if args.hybrid:
        from mindroom.embeddings.select import shared_embedder

        embedder = shared_embedder(None, Path.cwd())
        if embedder is None:
            sys.exit(
                "--hybrid: install mindroom[embeddings] first (pip install -e '.[embeddings]')"
            )
        print(f"hybrid: {embedder.model_id} (random stand-in vectors, as bench/memory_search.py)")
    rng = random.Random(args.seed)
    words = vocabulary(rng)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "workspace"
        root.mkdir()
        write_scope(root, args.entries, rng, words)
        memory = FileMemory(MemoryScope("bench", root, Path(tmp) / "state"), embedder)
        try:
            started = time.perf_counter()
            memory.index.sync()
            print(f"entries: {memory.index.count()}  index built in "
                  f"{time.perf_counter() - started:.2f} s")  # fmt: skip
            if embedder is not None:
                from vector_search import seed_vectors

                dims = embedder.embed(["load the model"]).shape[1]
                seed_vectors(
                    memory.index, Path(tmp) / "state" / "vectors.db", embedder.model_id, dims
                )
                assert memory.vectors is not None
                memory.vectors.sync()
            view = AgentView(memory, CategoryAccess.everything())
            asker = Asker("bench", None, frozenset({"bench"}))
            query_ms: list[float] = []
            search_ms: list[float] = []
            answered = 0
            for _ in range(args.queries):
                text = " ".join(rng.choice(words[:400]) for _ in range(rng.randint(2, 5)))
                request = parse_request({
                    "query": text,
                    "categories": rng.sample(CATEGORIES, 2),
                    "filters": {"importance_min": rng.randint(1, 3)},
                    "top_k": 5,
                    "return": "bullets",
                    "budget_tokens": 512,
                })  # fmt: skip
                started = time.perf_counter()
                answer = run_query(view, request, asker)
                query_ms.append((time.perf_counter() - started) * 1000)
                answered += answer != "[]"
                started = time.perf_counter()
                memory.search_sync(text, 5, LIVE)
                search_ms.append((time.perf_counter() - started) * 1000)
        finally:
            memory.close()
    q50, s50 = statistics.median(query_ms), statistics.median(search_ms)
    print(f"queries: {args.queries} ({answered} with results)")
    print(f"memory_query bullets: p50 {q50:.2f} ms  p95 {percentile(query_ms, 0.95):.2f} ms")
    print(f"store search:         p50 {s50:.2f} ms  p95 {percentile(search_ms, 0.95):.2f} ms")
    print(f"memory_query / search (p50): {q50 / s50:.2f}x   target: bullets < 150 ms")
    print(f"memory_query_bullets_p50_ms={q50:.1f}")


if __name__ == "__main__":
    main()
