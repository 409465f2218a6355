"""Facts the extraction turn writes: their tags, the validator, and the caps.

The extraction prompt asks for one fact a line, each tagged with its category and, when it
matters, its importance: ``- [preferences, 4] Alice prefers green tea``. :func:`tagged` reads
the tag (a line without one is in the default category); :func:`admit` decides which facts of
one flushed chunk are written:

* the writing validator (:mod:`mindroom.memory.files.writing`) trims or rejects each text;
* a category the agent may not write (its allowlist) or does not know rejects the fact;
* at most :data:`PER_TURN` facts per message of the person in the chunk, and at most
  ``daily_cap`` a day for the scope (what the flush wrote today, counted in the history).

Every decision is returned, with its reason, for the log and the operational events.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from mindroom.config.memory_schema import MemorySnippetsConfig
from mindroom.errors import MemoryAccessError
from mindroom.memory.backend import keeps_files
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.history import HistoryRecord
from mindroom.memory.files.store import FileMemory, same_text
from mindroom.memory.files.writing import validate
from mindroom.memory.ops_events import OpEvent, emit
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.consent import (
    ConsentPending,
    ConsentQueue,
    Person,
    WriteConsent,
    classify,
)
from mindroom.memory.policy.view import AgentView

logger = logging.getLogger(__name__)

PER_TURN = 3
_TAG = re.compile(
    r"^\[(?P<category>[A-Za-z][\w-]*)(?:\s*,\s*(?P<importance>[1-5]))?\]\s*(?P<text>.+)$"
)


@dataclass(frozen=True)
class Fact:
    """One fact of the model's answer, as decided."""

    text: str  # as it will be written (validated); the answer's text when rejected
    fields: EntryFields
    written: bool  # admitted
    first_pass: bool  # the validator took it as written
    reason: str = ""  # why it was trimmed or not admitted


def tagged(line: str) -> tuple[str, str | None, int | None]:
    """``(text, category, importance)`` of a fact line (category None: no tag)."""
    match = _TAG.match(line.strip())
    if match is None:
        return line.strip(), None, None
    importance = match.group("importance")
    return (
        match.group("text").strip(),
        match.group("category").lower(),
        (int(importance) if importance else None),
    )


def admit(
    lines: list[str], access: CategoryAccess, *, turns: int, written_today: int, daily_cap: int
) -> list[Fact]:
    """The decision on each fact of one chunk (see the module docstring)."""
    room = min(PER_TURN * max(1, turns), max(0, daily_cap - written_today))
    decided: list[Fact] = []
    for line in lines:
        text, category, importance = tagged(line)
        fields = EntryFields(category=category, importance=importance)
        verdict = validate(text, "semantic")
        if not verdict.accepted:
            decided.append(Fact(text, fields, False, False, "; ".join(verdict.reasons)))
            continue
        try:
            access.writable(category)
        except MemoryAccessError as exc:
            decided.append(Fact(verdict.text, fields, False, verdict.first_pass, str(exc)))
            continue
        if room <= 0:
            reason = f"over the cap ({PER_TURN} a message, {daily_cap} a day)"
            decided.append(Fact(verdict.text, fields, False, verdict.first_pass, reason))
            continue
        room -= 1
        decided.append(
            Fact(verdict.text, fields, True, verdict.first_pass, "; ".join(verdict.reasons))
        )
    return decided


def written_today(flushed: Sequence[HistoryRecord], now: dt.datetime | None = None) -> int:
    """How many of the flush's adds ``flushed`` (:func:`flush_adds`) were made since local
    midnight."""
    now = now or dt.datetime.now()
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    return sum(1 for r in flushed if r.time >= midnight)


def flushed_from(flushed: Sequence[HistoryRecord], run: str) -> set[str]:
    """The facts (:func:`~mindroom.memory.files.store.same_text`) of the flush's adds
    ``flushed`` that came from conversation ``run``, whatever file they went to."""
    return {same_text(r.new) for r in flushed if r.new and (r.meta or {}).get("run") == run}


def flush_adds(memory: FileMemory) -> list[HistoryRecord]:
    """The facts the flush added to ``memory`` (its history, read once)."""
    return [r for r in memory.history_of() if r.op == "add" and r.actor == "flush"]


def store_facts(
    view: AgentView,
    lines: list[str],
    *,
    turns: int,
    daily_cap: int,
    run: str,
    path: str,
    user_id: str | None = None,
    people: Sequence[Person] = (),
) -> tuple[list[str], list[Fact]]:
    """Write the admitted facts of one chunk (blocking): the texts written, and every
    decision. A fact already in the file is admitted but not written again; a benign change
    waits for a second signal, and one that changes a sensitive field waits for the consent of
    the person it is about (the store decides whom, from ``user_id``, the chunk's speaker, and
    ``people``, everyone who spoke in it; see :mod:`mindroom.memory.policy.consent`)."""
    consent = WriteConsent.model(user_id, people)
    memory = view.memory
    assert keeps_files(memory)
    flushed = flush_adds(memory)
    decided = admit(
        lines, view.access, turns=turns, written_today=written_today(flushed), daily_cap=daily_cap
    )
    # a flush done again (its earlier run died before it finished) writes nothing twice, also
    # when the redo falls on another day and so into another daily file
    before = flushed_from(flushed, run)
    written = []
    queue: ConsentQueue | None = None
    try:
        for fact in decided:
            category = fact.fields.category_or(view.access.default)
            event = OpEvent("episodic", "create", "ok", None, category, None, user_id, run)
            if not fact.written:
                logger.info(
                    "memory %s: fact not written (%s): %r", memory.scope_id, fact.reason, fact.text
                )
                emit(memory, replace(event, status="skipped"))
                continue
            if same_text(fact.text) in before:
                logger.info(
                    "memory %s: fact already written from this conversation: %r",
                    memory.scope_id,
                    fact.text,
                )
                emit(memory, replace(event, status="skipped"))
                continue
            change = classify(fact.text, fact.fields)
            if change is not None and change[0] == "benign":
                queue = queue or ConsentQueue(memory)
                proposal, ready = queue.propose(
                    fact.text,
                    fact.fields,
                    kind=change[0],
                    field=change[1],
                    path=path,
                    user_id=user_id,
                    actor="flush",
                )
                if not ready:
                    logger.info(
                        "memory %s: %s change waits as %s: %r",
                        memory.scope_id,
                        change[1],
                        proposal.id,
                        fact.text,
                    )
                    emit(memory, replace(event, status="skipped"))
                    continue
            try:
                added = view.append_unique_sync(
                    fact.text,
                    actor="flush",
                    path=path,
                    fields=fact.fields,
                    run=run,
                    consent=consent,
                )
            except ConsentPending as held:  # a sensitive fact: it waits for its subject
                logger.info("memory %s: fact waits for consent: %s", memory.scope_id, held)
                emit(memory, replace(event, status="skipped"))
                continue
            if change is not None and change[0] == "benign" and queue is not None:
                queue.settle(proposal, "flush")  # corroborated, and now written
            if added is not None:
                written.append(added.text)
            status = "ok" if added is not None else "skipped"  # skipped: already there
            emit(memory, replace(event, status=status, memory_id=added.id if added else None))
    finally:
        if queue is not None:
            queue.close()
    return written, decided


def known_snippets(
    view: AgentView, chunk: Sequence[Any], settings: MemorySnippetsConfig
) -> list[str]:
    """Memory the extraction turn is shown so it does not repeat it (blocking): only what the
    agent itself may read, found by the chunk's text."""
    if not settings.memory_snippets:
        return []
    query = " ".join(line.text for line in chunk)[:2000]
    hits = view.search_sync(query, settings.memory_snippets)
    return [hit.entry.text[: settings.snippet_max_chars] for hit in hits]


def writable_categories(access: CategoryAccess) -> list[str]:
    """The categories the extraction may tag facts with: what the agent may write, but not
    ``procedural`` (how-to steps come from their own trigger, not from a chat)."""
    return [c for c in access.known if access.may(c) and c != "procedural"]


def the_person(chunk: Sequence[Any], requester: str | None) -> str | None:
    """Whom a chunk is about: its one person (a private companion's requester when several
    or none wrote), for consent and insights; None when it cannot be told."""
    people = {line.user_id for line in chunk if line.role == "user" and line.user_id}
    return next(iter(people)) if len(people) == 1 else requester


_NAMED = re.compile(r"^(?P<name>[^()\n]{1,80}) \((?P<user>@[^()\s]+)\): ")


def chunk_people(chunk: Sequence[Any]) -> list[Person]:
    """Everyone who spoke in ``chunk``, with the display name a group turn's text gives them
    (``"Alice (@alice:example.org): ..."``), for consent: whom a fact names."""
    found: dict[str, str | None] = {}
    for line in chunk:
        if line.role != "user" or not line.user_id:
            continue
        named = _NAMED.match(line.text)
        name = named["name"] if named and named["user"] == line.user_id else None
        found[line.user_id] = found.get(line.user_id) or name
    return [Person(user, name) for user, name in found.items()]
