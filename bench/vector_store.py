"""Where to keep and scan memory vectors: numpy over a SQLite BLOB table, or sqlite-vec.

For 1k, 10k and 100k random unit vectors of 384 dimensions (all-MiniLM-L6-v2's size; the
values do not change the time of a brute-force scan) it measures, per store:

- ``insert``: writing every vector into a fresh database;
- ``load``: a new process's first read (numpy: every BLOB into one float32 matrix);
- ``query``: the 10 nearest by cosine (median, p95 of 60 queries), the query vector given;
- ``mem``: resident memory added by the loaded store.

Stores: ``numpy`` (float32 matrix, one BLAS matrix-vector product, argpartition),
``numpy+f16`` (the same plus a torch float16 copy that picks 80 candidates, rescored exactly
in float32: what :mod:`mindroom.memory.search.vectors` does from 20k entries; needs torch), and
``sqlite-vec`` (a ``vec0`` table with ``distance_metric=cosine``; needs ``sqlite-vec`` and
a SQLite that loads extensions, here ``sqlean.py``, as the standard library's cannot).
Stores whose packages are missing are skipped, saying so.

    pip install sqlite-vec sqlean.py   # for the sqlite-vec column
    python bench/vector_store.py [--sizes 1000 10000 100000]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

DIMS = 384
K = 10


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def unit_vectors(count: int, seed: int) -> np.ndarray:
    matrix = np.random.default_rng(seed).standard_normal((count, DIMS)).astype(np.float32)
    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)


def timings(search: Callable[[np.ndarray], object], queries: np.ndarray) -> tuple[float, float]:
    for query in queries[:5]:
        search(query)
    spent = []
    for query in queries:
        start = time.perf_counter()
        search(query)
        spent.append(time.perf_counter() - start)
    spent.sort()
    return statistics.median(spent) * 1000, spent[int(0.95 * len(spent))] * 1000


def numpy_store(folder: Path, vectors: np.ndarray, half: bool) -> tuple[float, float, Callable]:
    path = folder / f"numpy-{len(vectors)}-{half}.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE v (model TEXT, hash BLOB, vector BLOB, PRIMARY KEY (model, hash))")
    start = time.perf_counter()
    db.executemany(
        "INSERT INTO v VALUES ('m', ?, ?)", ((os.urandom(32), row.tobytes()) for row in vectors)
    )
    db.commit()
    insert = time.perf_counter() - start
    db.close()
    start = time.perf_counter()
    db = sqlite3.connect(path)
    blobs = [blob for (blob,) in db.execute("SELECT vector FROM v WHERE model = 'm'")]
    matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), DIMS).copy()
    del blobs
    db.close()
    scorer = None
    if half:
        import torch

        torch.set_num_threads(1)
        copy = torch.from_numpy(matrix).to(torch.float16)

        def scorer(q: np.ndarray) -> np.ndarray:
            return torch.mv(copy, torch.from_numpy(q).to(torch.float16)).float().numpy()

    load = time.perf_counter() - start

    def search(query: np.ndarray) -> list[int]:
        scores = matrix @ query if scorer is None else scorer(query)
        count = min(len(matrix), K if scorer is None else 80)
        top = np.argpartition(-scores, count - 1)[:count]
        exact = scores[top] if scorer is None else matrix[top] @ query
        return top[np.argsort(-exact)[:K]].tolist()

    return insert, load, search


def sqlite_vec_store(folder: Path, vectors: np.ndarray) -> tuple[float, float, Callable]:
    import sqlean
    import sqlite_vec

    def connect() -> sqlean.Connection:
        db = sqlean.connect(str(folder / f"vec-{len(vectors)}.db"))
        db.enable_load_extension(True)
        sqlite_vec.load(db)
        return db

    db = connect()
    db.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIMS}] distance_metric=cosine)")
    start = time.perf_counter()
    db.executemany(
        "INSERT INTO v (rowid, embedding) VALUES (?, ?)",
        ((i + 1, row.tobytes()) for i, row in enumerate(vectors)),
    )
    db.commit()
    insert = time.perf_counter() - start
    db.close()
    db = connect()

    def search(query: np.ndarray) -> list[int]:
        rows = db.execute(
            "SELECT rowid FROM v WHERE embedding MATCH ? AND k = ?", (query.tobytes(), K)
        ).fetchall()
        return [row[0] - 1 for row in rows]

    return insert, 0.0, search


def available(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def main(sizes: list[int]) -> None:
    stores = ["numpy"]
    stores += ["numpy+f16"] if available("torch") else []
    stores += ["sqlite-vec"] if available("sqlite_vec") and available("sqlean") else []
    print(f"stores: {', '.join(stores)}; load average {os.getloadavg()[0]:.1f} on 2 cores")
    print(
        f"{'store':<11} {'entries':>8} {'insert':>8} {'load':>8} {'query med':>10} "
        f"{'query p95':>10} {'mem':>7}"
    )
    queries = unit_vectors(60, 2)
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            vectors = unit_vectors(size, 1)
            for store in stores:
                before = rss_mb()
                if store == "sqlite-vec":
                    insert, load, search = sqlite_vec_store(Path(tmp), vectors)
                else:
                    insert, load, search = numpy_store(Path(tmp), vectors, store == "numpy+f16")
                median, p95 = timings(search, queries)
                print(
                    f"{store:<11} {size:>8} {insert:>7.2f}s {load * 1000:>6.0f}ms "
                    f"{median:>8.2f}ms {p95:>8.2f}ms {rss_mb() - before:>5.0f}MB"
                )
                del search


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000, 100_000])
    main(parser.parse_args().sizes)
