"""Both halves of a hybrid search, side by side, for a ranking that combines them.

:func:`search_candidates` returns the keyword hits (BM25 scores in [0, 1)) and the vector hits
(cosine similarity) of one memory for one query. When the memory has no embedder, or its
embedder cannot load or answer, the vector half is None and ``note`` says why: the search is
keyword-only, which is logged once per reason, never an error of the turn.

Deliberately not here: the combined ranking. Today's recall and tools still rank by keywords
alone (:meth:`mindroom.memory.search.index.MemoryIndex.search`).
"""

from __future__ import annotations

from dataclasses import dataclass

from mindroom.adapters.embeddings.select import report_keyword_only
from mindroom.errors import EmbedderError
from mindroom.memory.bounded import bounded
from mindroom.memory.files.store import FileMemory
from mindroom.memory.search.index import SearchHit


@dataclass(frozen=True)
class SearchCandidates:
    """The keyword hits and the vector hits of one query (``vector`` None: keyword-only)."""

    keyword: list[SearchHit]
    vector: list[SearchHit] | None
    note: str = ""


def search_candidates(
    memory: FileMemory, query: str, limit: int = 5, *, exclude_paths: frozenset[str] = frozenset()
) -> SearchCandidates:
    """The best ``limit`` keyword hits and vector hits of ``query`` (blocking: files, SQLite
    and the embedder; see :func:`search_candidates_async`)."""
    memory.prepare()
    keyword = memory.index.search(query, limit, exclude_paths=exclude_paths)
    try:
        vectors = memory.vectors
        if vectors is None:
            return SearchCandidates(keyword, None, "no embedder: keyword-only")
        return SearchCandidates(keyword, vectors.search(query, limit, exclude_paths=exclude_paths))
    except EmbedderError as exc:
        return SearchCandidates(
            keyword, None, report_keyword_only(f"memory {memory.scope_id}", exc)
        )


async def search_candidates_async(
    memory: FileMemory, query: str, limit: int = 5, *, exclude_paths: frozenset[str] = frozenset()
) -> SearchCandidates:
    """:func:`search_candidates` in a worker thread, bounded like every memory call."""
    return await bounded(search_candidates, memory, query, limit, exclude_paths=exclude_paths)
