"""``memory_query``: one request that finds memory by meaning, category and fields.

A request names a query (optional: without one the newest matching entries come back), the
categories it wants, filters on the entries' fields and provenance, how many results, a
similarity threshold, and whether it wants short bullets or full records within a token
budget. Everything is validated at this boundary (:class:`QueryRequest`, unknown keys are
errors) and then applied *in the store*: the fields as SQL over the index and a mask over
the vectors (:mod:`mindroom.memory.policy.filters`), provenance as a set of ids taken from the
history. The agent's allowlist applies whatever the request says (a category outside it is
refused, see :mod:`mindroom.memory.policy.access`); ``user_id`` and ``agent_id`` name whose memory
this is and must be the conversation's own, never someone else's.

Provenance filters: ``actor_id`` is who wrote the entry, as the history records it (``tool``,
``flush``, ``cli``, ``curation``, ``consolidation``); ``run_id`` the conversation (session) it
was written in; ``role`` ``user`` for entries people wrote (by hand, or ``mindroom memory``)
and ``assistant`` for those mindroom wrote.

``threshold`` drops hits whose similarity to the query (cosine, with an embedder; else the
keyword score in [0, 1)) is below it. ``procedural`` entries come back only when the request
names the ``procedural`` category.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mindroom.errors import MemoryAccessError, MemoryStoreError
from mindroom.memory.backend import keeps_files
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.filters import MemoryFilter
from mindroom.memory.policy.gate import StoredEntry, may_read
from mindroom.memory.policy.view import DELIBERATE, AgentView
from mindroom.memory.search.hybrid import hybrid_search
from mindroom.memory.search.relations import boosted, related_entries

PERSON_ACTORS = frozenset({"cli"})  # what a person writes through (besides editing by hand)
CHARS_PER_TOKEN = 4  # the usual estimate for English text


class QueryFilters(BaseModel):
    """``filters`` of a request (every key optional)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    actor_id: str | None = None
    role: Literal["user", "assistant"] | None = None
    category: str | None = None
    pinned: bool | None = None
    importance_min: int | None = Field(default=None, ge=1, le=5)
    importance_max: int | None = Field(default=None, ge=1, le=5)
    updated_after: dt.date | None = None
    updated_before: dt.date | None = None


class QueryRequest(BaseModel):
    """One ``memory_query`` call."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    agent: str | None = None
    query: str = ""
    categories: list[str] | None = None
    filters: QueryFilters = Field(default_factory=QueryFilters)
    top_k: int = Field(default=5, ge=1, le=50)
    threshold: float | None = Field(default=None, ge=-1, le=1)
    output: Literal["bullets", "full"] = Field(default="bullets", alias="return")
    budget_tokens: int = Field(default=512, ge=16, le=8192)


@dataclass(frozen=True)
class Asker:
    """Who asks: the agent (or team), the person the conversation is for, the owners of the
    memory asked (an agent's own name, its teams)."""

    agent: str
    user_id: str | None
    owners: frozenset[str]


def parse_request(arguments: dict[str, Any]) -> QueryRequest:
    """The request of a tool call's arguments; a MemoryStoreError says what is wrong."""
    try:
        return QueryRequest.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'request'}: {error['msg']}"
            for error in exc.errors()
        )
        raise MemoryStoreError(f"memory_query: {problems}") from None


def run_query(view: AgentView, request: QueryRequest, asker: Asker) -> str:
    """The answer to ``request`` as JSON text (a list of results), within its token budget."""
    memory = view.memory
    if not keeps_files(memory):
        raise MemoryStoreError("memory_query works on file memory (this agent uses mem0)")
    _check_whose(request, asker)
    only = _filter(view, memory, request)
    results = _found(memory, request, only)
    if view.relations and results:
        results = _with_relations(memory, results, view, only)
    # the read gate, on each entry as read now (the filter above is its SQL form)
    gate = view.reader(DELIBERATE if "procedural" in _asked(request) else frozenset())
    results = [r for r in results if may_read(gate, StoredEntry.of(r.entry))]
    shown = _within_budget(results, request, view)
    view.noted([r.entry for r in results[: len(shown)]])
    best = results[0] if results else None
    view.event("query", best.entry if best else None, best.similarity if best else None)
    return json.dumps(shown, ensure_ascii=False)


def _check_whose(request: QueryRequest, asker: Asker) -> None:
    agent = request.agent or request.filters.agent_id
    if agent is not None and agent not in asker.owners | {asker.agent}:
        raise MemoryAccessError(
            f"memory_query: {asker.agent!r} may query only its own memory, not {agent!r}"
        )
    user = request.filters.user_id
    if user is not None and user != asker.user_id:
        raise MemoryAccessError(
            "memory_query: user_id must be the person this conversation is for; another "
            "person's memory is never readable here"
        )


def _asked(request: QueryRequest) -> list[str]:
    """The categories ``request`` names."""
    wanted = list(request.categories or [])
    if request.filters.category is not None:
        wanted.append(request.filters.category)
    return wanted


def _filter(view: AgentView, memory: FileMemory, request: QueryRequest) -> MemoryFilter:
    filters = request.filters
    wanted = _asked(request)
    # the allowlist decides first: a category outside it fails, however it was asked for
    categories = view.access.readable(wanted or None)
    ids, hand = _provenance(memory, filters)
    procedural = "procedural" in wanted
    return view.access.only(
        sorted(categories) if categories is not None else None,
        DELIBERATE if procedural else (),
        view.audiences,
        pinned=filters.pinned,
        importance_min=filters.importance_min,
        importance_max=filters.importance_max,
        updated_after=filters.updated_after,
        updated_before=filters.updated_before,
        ids=ids,
        hand_written=hand,
    )


def _provenance(memory: FileMemory, filters: QueryFilters) -> tuple[frozenset[str] | None, bool]:
    """The ids the provenance filters keep (None: no such filter), and whether hand-written
    entries (no record: a person wrote them) are kept too."""
    if filters.actor_id is None and filters.run_id is None and filters.role is None:
        return None, False
    writers: dict[str, tuple[str, str | None]] = {}
    for record in memory.history_of():
        if record.op in ("add", "merge", "restore") and record.id:
            meta = record.meta or {}
            writers.setdefault(record.id, (record.actor, meta.get("run")))
    ids = {
        entry_id
        for entry_id, (actor, run) in writers.items()
        if (filters.actor_id is None or actor == filters.actor_id)
        and (filters.run_id is None or run == filters.run_id)
        and (filters.role is None or (actor in PERSON_ACTORS) == (filters.role == "user"))
    }
    by_hand = filters.role == "user" and filters.actor_id is None and filters.run_id is None
    return frozenset(ids), by_hand


@dataclass(frozen=True)
class _Result:
    entry: MemoryEntry
    score: float | None
    similarity: float | None
    related_to: str | None = None  # a linked entry: the result it is linked to


def _found(memory: FileMemory, request: QueryRequest, only: MemoryFilter) -> list[_Result]:
    if not request.query.strip():
        entries = memory.index.select(only.where(), request.top_k)
        return [_Result(e, None, None) for e in entries]
    found = hybrid_search(
        memory, request.query, request.top_k, weights=memory.search_weights, only=only
    )
    results = []
    for hit in found:
        closeness = hit.similarity if hit.similarity is not None else hit.keyword
        if request.threshold is not None and (closeness is None or closeness < request.threshold):
            continue
        results.append(_Result(hit.entry, hit.score, closeness))
    return results


def _with_relations(
    memory: FileMemory, results: list[_Result], view: AgentView, only: MemoryFilter
) -> list[_Result]:
    """``results`` with the relations boost, then up to two entries linked to the best three
    that the query did not find (``related_to`` names the one each is linked to)."""
    assert view.relations is not None
    by_place = {(r.entry.path, r.entry.start_line): r for r in results}
    if results[0].score is not None:
        scored = [(r.entry, r.score or 0.0) for r in results]
        ranked = boosted(memory, scored, view.relations.boost)
        results = [replace(by_place[(e.path, e.start_line)], score=score) for e, score in ranked]
    shown = [r.entry for r in results[:3]]
    extra = related_entries(memory, shown, only.holds, limit=2)
    return results + [_Result(entry, None, None, to.id) for entry, to in extra]


def _within_budget(
    results: list[_Result], request: QueryRequest, view: AgentView
) -> list[dict[str, Any]]:
    """The results as records, as many as fit in the budget (a first one that does not fit
    is cut to fit)."""
    budget = request.budget_tokens * CHARS_PER_TOKEN
    shown: list[dict[str, Any]] = []
    for result in results:
        record = _record(result, request.output, view.access.default)
        cost = len(json.dumps(record, ensure_ascii=False))
        if cost > budget:
            if shown:
                break
            keep = max(0, len(record["text"]) - (cost - budget) - 1)
            record["text"] = record["text"][:keep] + "…"
            cost = budget
        budget -= cost
        shown.append(record)
    return shown


def _record(result: _Result, output: str, default: str) -> dict[str, Any]:
    entry, fields = result.entry, result.entry.fields
    category = fields.category_or(default)
    record: dict[str, Any] = {"id": entry.id, "category": category}
    if result.related_to is not None:
        record["related_to"] = result.related_to
    if output == "bullets":
        record["text"] = f"[{category}] {' '.join(entry.text.split())}"
        return record
    day = fields.updated or fields.created or entry.date
    record.update(
        text=entry.text,
        importance=fields.importance_or_default,
        pinned=fields.pinned,
        type=fields.type_in(entry.path),
        created=fields.created.isoformat() if fields.created else None,
        updated=day.isoformat() if day else None,
        path=entry.path,
        line=entry.start_line,
    )
    if result.score is not None:
        record["score"] = round(result.score, 4)
    if result.similarity is not None:
        record["similarity"] = round(result.similarity, 4)
    return record
