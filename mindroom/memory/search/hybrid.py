"""Hybrid search: keyword (BM25) and vector (cosine) hits of one query in one ranking.

Each half brings its best ``pool`` hits. Their scores live on different scales (BM25 mapped to
[0, 1) with no fixed top, cosine similarity of normalised embeddings), so each half is min-max
normalised over its own pool (best hit 1, worst 0; a lone hit 1) before the weighted sum, and
a hit found by one half only gets nothing from the other. So neither half drowns the other:
the failure LESSONS.md records, where keyword-only hits always fell below a minimum score,
cannot happen. Measured on the LoCoMo development conversations (``bench/locomo_retrieval.py``,
categories 1-4, the local all-MiniLM-L6-v2):

=========================================  =====  ======
ranking                                    R@5    R@10
=========================================  =====  ======
keywords only (BM25)                       0.549  0.630
vectors only                               0.441  0.542
reciprocal rank fusion, k=60, pools of 50  0.536  0.625
raw scores, 0.5/0.5, pools of 50           0.569  0.662
min-max, 0.5/0.5, pools of 50              0.582  0.686
min-max, 0.5/0.5, pools of 20              0.594  0.688
min-max, 0.5/0.5, pools of 30 (default)    0.602  0.694
min-max, 0.6/0.4 and 0.4/0.6, pools of 50  0.585  0.679 / 0.559  0.666
=========================================  =====  ======

Min-max normalisation over the pool was chosen over the alternatives on principle (both halves
on one scale) and by a margin; the pool size matters less (20 to 50 are within 0.02), and the
default was not tuned further on four conversations.

Entries written together are read together: a hit gains ``neighbour_weight`` (0.3) of the
better fused score of the entries just before and after it in its file, when those are hits
too. Daily files hold a conversation's memories in the order they were written, so the answer
to a question often sits beside the entry that matches it best (LoCoMo, pools of 30: R@5/R@10
0.602/0.694 without, 0.603/0.713 with 0.2, 0.605/0.718 with 0.4).

A file with several good hits is about the query: a hit also gains ``file_weight`` (0.2) of the
sum of its file's best :data:`FILE_HITS` (3) fused scores, the passage-plus-document evidence of
classic passage retrieval. A daily file is a day's conversation, so its weaker hits rise above
an equally weak hit alone elsewhere; the order within one file never changes (every hit of a
file gains the same), and only hits already in a pool are reordered. LoCoMo, with neighbours at
0.3: R@5/R@10 0.602/0.717 without, 0.630/0.724 with 0.2. It gained on each of the four
conversations alone (0.581/0.672/0.641/0.560 to 0.605/0.678/0.698/0.576), and R@5 stays
within 0.624-0.634 for any weight from 0.15 to 0.5, so 0.2 is not a peak picked on this data.
Keyword-only search is left as it is.

The weights are ``memory.search.keyword_weight`` and ``vector_weight``. Every hit keeps its
cosine similarity (when the memory has vectors), which the recall gate
(:mod:`mindroom.memory.search.relevance`) judges by. Without an embedder, or when it fails (logged
once, :func:`mindroom.adapters.embeddings.select.report_keyword_only`), the search is the keyword
half alone.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mindroom.adapters.embeddings import embed_queries
from mindroom.adapters.embeddings.select import report_keyword_only
from mindroom.errors import EmbedderError
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.filters import LIVE, MemoryFilter
from mindroom.memory.search.index import SEARCH_WAIT_SECONDS, SearchHit

if TYPE_CHECKING:
    from mindroom.memory.search.vectors import VectorIndex

logger = logging.getLogger(__name__)

# A search embeds at most this many new texts before it answers (one embedder batch, well under
# a second); more (a memory that grew by hand, or an upgrade from keyword-only) are embedded in
# the background while searches stay keyword-only, so no reply waits for them.
CATCH_UP_LIMIT = 256
_catching_up: set[str] = set()  # scopes already reported (a bound: one line per scope)
_shared_failed: set[str] = set()  # scopes whose PostgreSQL index failed (told once)
FILE_HITS = 3  # a file's evidence is the sum of its best this many hits


@dataclass(frozen=True)
class Weights:
    """How much each half counts, and how many hits each brings (``memory.search``)."""

    keyword: float = 0.5
    vector: float = 0.5
    pool: int = 30
    neighbour: float = 0.3
    file: float = 0.2


@dataclass(frozen=True)
class Found:
    """One hit of a hybrid search."""

    entry: MemoryEntry
    score: float  # the fused score: own (at most keyword + vector weight), plus the gains
    keyword: float | None  # the BM25 score in [0, 1), when the keyword half found it
    similarity: float | None  # cosine similarity to the query, when the memory has vectors


def _normalised(hits: list[SearchHit]) -> dict[tuple[str, int], float]:
    if not hits:
        return {}
    high = max(hit.score for hit in hits)
    low = min(hit.score for hit in hits)
    span = high - low
    return {_key(h.entry): (h.score - low) / span if span > 0 else 1.0 for h in hits}


def _key(entry: MemoryEntry) -> tuple[str, int]:
    return (entry.path, entry.start_line)


def fuse(keyword: list[SearchHit], vector: list[SearchHit] | None, weights: Weights) -> list[Found]:
    """Both halves in one ranking, best first (ties: the keyword order, then file order)."""
    entries: dict[tuple[str, int], MemoryEntry] = {}
    for hit in [*keyword, *(vector or [])]:
        entries.setdefault(_key(hit.entry), hit.entry)
    bm25 = {_key(h.entry): h.score for h in keyword}
    cosine = {_key(h.entry): h.score for h in vector or []}
    kw_norm, vec_norm = _normalised(keyword), _normalised(vector or [])
    floor = min(cosine.values(), default=None)  # a bound for hits outside the vector pool
    own = {
        key: weights.keyword * kw_norm.get(key, 0.0) + weights.vector * vec_norm.get(key, 0.0)
        for key in entries
    }
    ends = {(e.path, e.end_line): own[key] for key, e in entries.items()}
    files = _file_scores(own, entries)
    found = [
        Found(
            entry,
            own[key]
            + weights.neighbour * _best_neighbour(own, ends, entry)
            + weights.file * files[entry.path],
            bm25.get(key),
            cosine.get(key, floor) if vector is not None else None,
        )
        for key, entry in entries.items()
    ]
    order = {key: i for i, key in enumerate(entries)}
    found.sort(key=lambda f: (-f.score, order[_key(f.entry)]))
    return found


def _file_scores(
    own: dict[tuple[str, int], float], entries: dict[tuple[str, int], MemoryEntry]
) -> dict[str, float]:
    """Each file's evidence for the query: the sum of its best :data:`FILE_HITS` fused scores."""
    by_file: dict[str, list[float]] = {}
    for key, entry in entries.items():
        by_file.setdefault(entry.path, []).append(own[key])
    return {path: sum(sorted(scores)[-FILE_HITS:]) for path, scores in by_file.items()}


def _best_neighbour(
    own: dict[tuple[str, int], float], ends: dict[tuple[str, int], float], entry: MemoryEntry
) -> float:
    """The better fused score of the entries just before and after ``entry`` in its file
    (``own`` by first line, ``ends`` by last line)."""
    before = ends.get((entry.path, entry.start_line - 1), 0.0)
    return max(before, own.get((entry.path, entry.end_line + 1), 0.0))


def _say_catching_up(scope_id: str) -> None:
    if scope_id not in _catching_up:
        _catching_up.add(scope_id)
        logger.info(
            "memory %s: embedding its entries in the background; searches are keyword-only "
            "until that is done",
            scope_id,
        )


def _follow_files(memory: FileMemory, weights: Weights) -> tuple[VectorIndex | None, bool]:
    """Bring the indexes up to the files, once, by whichever half searches first: the vector
    index (when vectors are weighted and an embedder works; it follows the keywords too) or
    else the keyword index. Returns the vector index (None: keyword-only) and whether the
    files are followed (a big file is indexed in the background: search what is indexed)."""
    if weights.vector > 0:
        try:
            vectors = memory.vectors  # EmbedderError without numpy
            if vectors is not None:  # it follows the keywords too; the embedder may fail
                return vectors, vectors.sync_within(CATCH_UP_LIMIT)
        except EmbedderError as exc:
            report_keyword_only(f"memory {memory.scope_id}", exc)
    return None, memory.index.sync_within(SEARCH_WAIT_SECONDS)


def hybrid_search(
    memory: FileMemory,
    query: str,
    limit: int,
    *,
    weights: Weights | None = None,
    exclude_paths: frozenset[str] = frozenset(),
    now: dt.datetime | None = None,
    only: MemoryFilter = LIVE,
    keyword_query: str | None = None,
    entry_id: str | None = None,
) -> list[Found]:
    """The best ``limit`` hits of ``query`` in ``memory`` among the entries ``only`` holds
    (blocking: files, SQLite, the embedder); keyword-only when the memory has no working
    embedder. ``keyword_query`` (default ``query``) is what the keyword half searches;
    ``entry_id``: the query is that entry's text, so its stored vector stands for it (no
    embedding)."""
    weights = weights or Weights()
    pool = max(limit, weights.pool)
    vector: list[SearchHit] | None = None
    vectors, ready = _follow_files(memory, weights)
    if ready:  # memory.search.index: postgresql searches there, once the files are followed
        shared = _shared_search(
            memory,
            query,
            pool,
            keyword_query,
            entry_id,
            exclude_paths=exclude_paths,
            now=now,
            only=only,
        )
        if shared is not None:
            keyword, vector = shared
            if vector is None:
                return [Found(h.entry, h.score, h.score, None) for h in keyword[:limit]]
            return fuse(keyword, vector, weights)[:limit]
    keyword = memory.index.search(
        query if keyword_query is None else keyword_query,
        pool,
        exclude_paths=exclude_paths,
        now=now,
        synced=True,
        where=only.where(),
    )
    if vectors is not None and ready:
        try:
            own = vectors.vector_of(entry_id) if entry_id is not None else None
            vector = vectors.search(
                query,
                pool,
                exclude_paths=exclude_paths,
                synced=True,
                only=only,
                vector=own,
            )
        except EmbedderError as exc:
            report_keyword_only(f"memory {memory.scope_id}", exc)
    elif vectors is not None:  # many entries still unembedded (an upgrade, a big import)
        _say_catching_up(memory.scope_id)
        vectors.catch_up()
    if vector is None:
        return [Found(h.entry, h.score, h.score, None) for h in keyword[:limit]]
    return fuse(keyword, vector, weights)[:limit]


def _shared_search(
    memory: FileMemory,
    query: str,
    pool: int,
    keyword_query: str | None,
    entry_id: str | None,
    *,
    exclude_paths: frozenset[str],
    now: dt.datetime | None,
    only: MemoryFilter,
) -> tuple[list[SearchHit], list[SearchHit] | None] | None:
    """Both halves from the PostgreSQL index (None: the memory searches locally, or that
    index failed now: logged, and the local halves answer)."""
    try:
        shared = memory.pg_search
        if shared is None:
            return None
        shared.sync()
        where = only.where()
        keyword = shared.keyword(
            query if keyword_query is None else keyword_query,
            pool,
            exclude_paths=exclude_paths,
            now=now,
            where=where,
        )
        vectors = shared.vectors
        if vectors is None:
            return keyword, None
        own = vectors.vector_of(entry_id) if entry_id is not None else None
        probe = own if own is not None else embed_queries(vectors.embedder, [query])[0]
        return keyword, shared.vector(probe, pool, exclude_paths=exclude_paths, where=where)
    except EmbedderError:
        return None  # the local halves say it (keyword-only) as they always do
    except Exception as exc:  # the database went away: the files' own indexes answer
        if memory.scope_id not in _shared_failed:
            _shared_failed.add(memory.scope_id)
            logger.warning(
                "memory %s: the PostgreSQL search index failed (%s: %s); searching locally",
                memory.scope_id,
                type(exc).__name__,
                str(exc)[:200],
            )
        return None


def search_hits(
    memory: FileMemory,
    query: str,
    limit: int,
    weights: Weights | None = None,
    only: MemoryFilter = LIVE,
) -> list[SearchHit]:
    """:func:`hybrid_search` as plain search hits (the memory tools' and CLI's search)."""
    found = hybrid_search(memory, query, limit, weights=weights, only=only)
    return [SearchHit(f.entry, f.score) for f in found]
