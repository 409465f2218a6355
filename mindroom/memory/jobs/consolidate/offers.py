"""The memory side of offering an open conflict to the person it is about, in chat.

Consolidation records two entries that cannot both be true as an open conflict
(:mod:`mindroom.memory.jobs.consolidate.records`). One is *about* a person when it is in their
own private memory, or when both its entries name them (their Matrix ID, its localpart or their
display name, as :class:`~mindroom.memory.policy.consent.Person` reads a text). Such a conflict
is offered to them in their direct chat with the agent (:mod:`mindroom.pipeline.consent_offers`
posts it): a ✅ keeps the newer entry and lets the other go, a ❌ keeps both; either settles it
through :func:`~mindroom.memory.jobs.consolidate.resolve.resolve`, with the person as the
history's actor (``mindroom memory restore`` brings back what left). Proposed merges are not
offered: they rewrite a line a person wrote, which the dashboard and the CLI show better.

The offer quotes both entries in the person's direct chat, and its ✅ takes one out of memory,
so a conflict is offered only when the read gate lets that chat show both, as they are now
(:meth:`~mindroom.memory.policy.view.AgentView.shows_by_id`, with the deployment's
``memory.audience``): an entry told in Bob's DM that names Alice is not quoted to her. The
answer asks the gate again (an audience may have narrowed since the offer), and an entry it
refuses is left as it was, answered as if there were no such conflict.

Blocking (SQLite, files): call it from a thread.
"""

from __future__ import annotations

import datetime as dt

from mindroom.config.schema import Config
from mindroom.errors import MemoryStoreError
from mindroom.memory.backend import keeps_files
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.consolidate.records import Conflict, ConsolidationRecords, db_path
from mindroom.memory.jobs.consolidate.resolve import Side, resolve, sides
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.consent import Person
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.policy.view import AgentView
from mindroom.memory.private import requester_key
from mindroom.memory.registry import MemoryRegistry


def _file_memory(
    config: Config, registry: MemoryRegistry, agent: str, person: str
) -> FileMemory | None:
    if agent not in config.agents:
        return None
    memory = registry.existing_for_agent(agent, person)  # never a folder made by looking
    return memory if keeps_files(memory) else None


def _when(entry: MemoryEntry) -> dt.date:
    return entry.fields.updated or entry.fields.created or entry.date or dt.date.min


def newer_first(first: Side, second: Side) -> tuple[Side, Side]:
    """``(newer, older)`` of a conflict's two entries as they are now (pure): the later
    updated, created or written date; on a tie (or no dates), the second is the newer."""
    if first.now is not None and second.now is not None and _when(first.now) > _when(second.now):
        return first, second
    return second, first


def is_about(memory: FileMemory, person: Person, first: Side, second: Side) -> bool:
    """Whether the conflict of ``first`` and ``second`` in ``memory`` is ``person``'s to settle
    (pure): their private memory, or both entries name them."""
    key = memory.scope.person_key
    if key is not None:
        return requester_key(person.user_id) == key
    return all(side.now is not None and person.named_in(side.now.text) for side in (first, second))


def shown_in_dm(config: Config, memory: FileMemory, person: str, *conflicting: Side) -> bool:
    """Whether ``person``'s direct chat may show each of ``conflicting`` that is still in
    memory (the read gate of a read by id there, on the entry as it is now; the person reads
    their own facts, so every category)."""
    view = AgentView(
        memory,
        CategoryAccess.everything(),
        room=RoomAudience.private_to(person),
        policy=config.memory.audience,
    )
    return all(side.now is None or view.shows_by_id(side.now) for side in conflicting)


def offer_text(conflict: Conflict, newer: Side, older: Side) -> str:
    """The message that offers ``conflict`` to the person it is about."""
    assert newer.now is not None
    assert older.now is not None
    reason = f" ({conflict.reason.strip().rstrip('.')})" if conflict.reason.strip() else ""
    return (
        f"Two things I remember about you disagree{reason}:\n\n"
        f"> {older.now.text}\n\n> {newer.now.text} (newer)\n\n"
        "React \u2705 to keep the newer one and let the other go, or \u274c to keep both "
        f"(conflict {conflict.id})."
    )


def conflicts_to_offer(
    config: Config, registry: MemoryRegistry, agent: str, person: Person
) -> list[tuple[Conflict, str]]:
    """The open conflicts in ``agent``'s memory (as ``person`` reaches it) about ``person``,
    each with the text that offers it; both of its entries still in memory, and both such that
    the person's direct chat may show them (:func:`shown_in_dm`)."""
    memory = _file_memory(config, registry, agent, person.user_id)
    if memory is None:
        return []
    path = db_path(memory.scope.state_dir)
    if not path.exists():  # never consolidated: nothing recorded (and no file made here)
        return []
    records = ConsolidationRecords(path)
    try:
        found = []
        for conflict in records.conflicts():
            if conflict.kind != "conflict" or conflict.status != "open":
                continue
            first, second = sides(memory, conflict)
            if first.now is None or second.now is None:
                continue
            mine = is_about(memory, person, first, second)
            if mine and shown_in_dm(config, memory, person.user_id, first, second):
                newer, older = newer_first(first, second)
                found.append((conflict, offer_text(conflict, newer, older)))
        return found
    finally:
        records.close()


def answer_conflict(
    config: Config,
    registry: MemoryRegistry,
    agent: str,
    person: str,
    conflict_id: str,
    *,
    keep_newer: bool,
    actor: str,
) -> str:
    """``actor`` (the person, or an admin) answered the offer of ``conflict_id``: keep the
    newer entry (the other leaves live memory) or keep both; what happened, in a sentence
    (posted in ``person``'s direct chat). An entry of it that chat may no longer show (its
    audience changed since the offer) is not touched: answered as no such conflict."""
    nothing = f"Nothing done: no conflict {conflict_id!r} waiting for you."
    memory = _file_memory(config, registry, agent, person)
    path = None if memory is None else db_path(memory.scope.state_dir)
    if memory is None or path is None or not path.exists():
        return nothing
    records = ConsolidationRecords(path)
    try:
        conflict = records.get(conflict_id)
        if conflict is None:
            return nothing
        first, second = sides(memory, conflict)
        if not shown_in_dm(config, memory, person, first, second):  # as it is now
            return nothing
        if not keep_newer:
            resolve(memory, records, conflict_id, keep_both=True, actor=actor)
            return "Kept both."
        newer, older = newer_first(first, second)
        if newer.now is None or older.now is None:
            return "Nothing done: one of the two is no longer in memory."
        resolve(memory, records, conflict_id, keep=newer.id, actor=actor)
        return f"Kept: {newer.now.text} (the other one left; it can be restored)"
    except MemoryStoreError as exc:
        return f"Nothing done: {exc}."
    finally:
        records.close()
