"""Memory search: FTS5/BM25 index vs a plain linear scan of the files, at 1k, 10k, 100k entries.

For each size it writes that many entries into daily files of a fresh scope (about 300 entries
a file, as a busy year of daily logs would have), builds the index from scratch (timed), then
runs the same queries through the index (``MemoryIndex.search``, which also checks every file
for changes first, as every real search does) and through a linear scan that reads and scores
every line of every file. Prints median and p95 latency of both and their ratio.

    python bench/memory_search.py [--sizes 1000 10000 100000] [--queries 60]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mindroom.memory.index import MemoryIndex, memory_files, query_terms  # noqa: E402
from mindroom.memory.markdown import new_entry_id, render_entry  # noqa: E402

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


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    main(args.sizes, args.queries)
