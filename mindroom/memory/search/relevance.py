"""Which search hits are relevant to a message: the gate of per-turn recall.

A search ORs the message's terms, so any shared word makes a hit, "thanks!" included. A hit
enters a turn's context only when what it shares with the message is specific enough to be
about the same thing:

* Every term of the message (:mod:`mindroom.memory.search.query`) weighs its inverse document
  frequency in this memory, ``idf(n) = ln(1 + (N - n + 0.5) / (n + 0.5))`` for a term held by
  ``n`` of the ``N`` entries (BM25's idf): the rarer, the heavier. A date naming particular days
  ("yesterday", "8 May 2023", "last week") weighs as a word held by one entry: asking about a
  day is asking for what happened that day. A month or a year weighs its idf, like a word.
* A hit's *information* is the sum of the weights of the message's terms it holds, in units
  of ``idf(k)``, the weight of a word held by ``k = rare_word_entries`` entries (default 5).
  The hit is relevant when its information reaches 1: what it shares with the message is at
  least as specific as one word found in only ``k`` entries. In a memory of 1,000 entries
  that is one shared word held by at most 5 entries, or two held by at most about 70 each.
  Common words ("thanks", "good", "time") rarely make it, however many; one rare word, or
  several moderately rare ones, do. A memory of ``k`` entries or fewer cannot tell common
  from rare: any shared term counts. A smaller ``k`` lets less chit-chat through and asks
  more of real questions (a fact found in a few entries then needs a second shared word).
* A hit that carries a semantic similarity (the cosine of the message's and the entry's
  embeddings, when the memory has an embedder) is judged by it instead: relevant when it
  reaches ``min_similarity``, or ``min_similarity_with_keywords`` when what it shares in words
  also passes the rule above (meaning and words agreeing, each a little less sure). Keywords
  alone cannot tell a chit-chat message that happens to use a
  rare stored word ("tell me a joke" when one entry mentions a joke) from a question; meaning
  can.

The thresholds are relative to the memory (``N``, each term's frequency) and to the message,
never to a list of words or messages; they are in ``memory.file.recall_gate``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass

from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.search.index import MemoryIndex, SearchHit, TermCounts
from mindroom.memory.search.query import Term, parse_query


@dataclass(frozen=True)
class Gate:
    """The thresholds of :func:`relevant` (see the module docstring)."""

    rare_word_entries: int = 5
    min_similarity: float = 0.5
    min_similarity_with_keywords: float = 0.35


@dataclass(frozen=True)
class Candidate:
    """A search hit and what the gate knows about it."""

    entry: MemoryEntry
    score: float  # the search score, in [0, 1)
    information: float  # what it shares with the message, in rare words (see above)
    similarity: float | None = None  # cosine similarity to the message, when embedded


def idf(total: int, holding: int) -> float:
    """BM25's inverse document frequency of a term held by ``holding`` of ``total`` entries."""
    return math.log(1 + (total - holding + 0.5) / (holding + 0.5))


def information(
    terms: list[Term], counts: TermCounts, held: frozenset[str], rare_word_entries: int
) -> float:
    """What an entry holding the terms ``held`` shares with the message, in units of the weight
    of a word held by ``rare_word_entries`` entries (infinite when the memory is too small to
    tell common from rare words)."""
    if not held:
        return 0.0
    unit = idf(counts.total, rare_word_entries)
    if unit <= 0:
        return math.inf
    one = idf(counts.total, 1)
    weight = {
        term.key: one if term.exact_date else idf(counts.total, counts.frequency[term.key])
        for term in terms
    }
    return sum(weight[key] for key in held) / unit


def judge(
    index: MemoryIndex,
    query: str,
    hits: list[SearchHit],
    gate: Gate,
    *,
    now: dt.datetime | None = None,
    similarity: Mapping[tuple[str, int], float] | None = None,
) -> list[Candidate]:
    """The hits of ``query`` with their information (and similarity, keyed by path and first
    line, when a semantic search gave one), in the order given."""
    if not hits:
        return []
    terms = parse_query(query, now)
    counts = index.term_counts(terms, [hit.entry for hit in hits])
    similarity = similarity or {}
    return [
        Candidate(
            hit.entry,
            hit.score,
            information(terms, counts, held, gate.rare_word_entries),
            similarity.get((hit.entry.path, hit.entry.start_line)),
        )
        for hit, held in zip(hits, counts.held, strict=True)
    ]


def relevant(candidate: Candidate, gate: Gate) -> bool:
    """Whether ``candidate`` belongs in the context of the message it was found for."""
    if candidate.similarity is not None:
        if candidate.similarity >= gate.min_similarity:
            return True
        return (
            candidate.similarity >= gate.min_similarity_with_keywords
            and candidate.information >= 1.0
        )
    return candidate.information >= 1.0
