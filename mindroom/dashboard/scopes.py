"""The memory scopes the dashboard's memory browser shows, and what it reads of each.

A scope is one memory: a shared agent's, a team's, or one person's private memory with a
companion (:func:`mindroom.memory.jobs.consolidate.run.private_scopes` finds those on disk), kept in
files or in mem0. The browser opens them through the bot's own
:class:`~mindroom.memory.registry.MemoryRegistry`, so its edits take the same write path as the
agents' tools (file locks, history, the index; mem0's scope lock and op log). A mem0 scope's
history is mem0's own (the ids the scope ever held, from its op log); a restore there stores
the deleted text again, under a new id (mem0 has no undelete).
Reads do not count as an agent reading (no retrieval stats are noted), so browsing never
keeps an entry alive that its agent stopped using.

Everything here is synchronous and runs in a worker thread.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mindroom.config.schema import Config
from mindroom.dashboard.ledger_reads import ledger_rows
from mindroom.errors import MemoryStoreError
from mindroom.memory.backend import MemoryBackend, in_engine, keeps_files
from mindroom.memory.files.history import HistoryRecord
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.consolidate.records import Conflict, ConsolidationRecords, db_path
from mindroom.memory.jobs.consolidate.run import private_scopes, team_member_lists
from mindroom.memory.mem0 import Mem0Memory
from mindroom.memory.policy.consent import KEPT, ConsentQueue, Proposal
from mindroom.memory.private import PRIVATE_DIR
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.scope import team_scope_id

PRIVATE = "private"
BACKENDS = ("file", "mem0")  # the backends whose memories the browser shows
Browsed = FileMemory | Mem0Memory


@dataclass(frozen=True)
class ScopeRef:
    """One scope as the browser lists it."""

    id: str  # the scope id: the browser's URL key
    kind: str  # "agent", "team" or "private"
    label: str
    agent: str | None = None  # the agent (shared or private companion)
    members: tuple[str, ...] = ()  # a team's
    person: str = ""  # a private scope's folder key (its person)
    backend: str = "file"


def list_scopes(
    config: Config, storage: Path, people: dict[str, str] | None = None
) -> list[ScopeRef]:
    """Every scope with a memory (files or mem0): shared agents, teams, then the private ones
    on disk, each private one labelled with its person's Matrix ID when ``people`` (see
    :func:`people`) knows it, else with its folder key."""
    people = people or {}
    found = []
    for name, settings in config.agents.items():
        backend = config.agent_memory_backend(name)
        if settings.private is None and backend in BACKENDS:
            found.append(ScopeRef(f"agent_{name}", "agent", name, agent=name, backend=backend))
    if config.memory.backend in BACKENDS:
        found += [
            ScopeRef(
                team_scope_id(members),
                "team",
                " + ".join(members),
                members=tuple(members),
                backend=config.memory.backend,
            )
            for members in team_member_lists(storage, config)
        ]
    for kept_in in BACKENDS:
        for scope, agent in private_scopes(storage, config, kept_in):
            # the person's folder is the first below private_instances/ (its key)
            person = scope.root.relative_to(storage / PRIVATE_DIR).parts[0]
            companion = agent or scope.scope_id.rsplit("__", 1)[0]
            label = f"{companion} with {people.get(person, person)}"
            found.append(
                ScopeRef(
                    scope.scope_id, PRIVATE, label, agent=agent, person=person, backend=kept_in
                )
            )
    return found


def open_scope(registry: MemoryRegistry, config: Config, storage: Path, ref: ScopeRef) -> Browsed:
    """The memory of ``ref``, opened through the registry (LookupError when gone)."""
    memory: MemoryBackend | None = None
    if ref.kind == "agent" and ref.agent:
        memory = registry.for_agent(ref.agent)
    elif ref.kind == "team":
        memory = registry.for_team(list(ref.members))
    elif ref.backend == "mem0":  # a person's: the registry's own way to their scope
        memory = _private_mem0(registry, config, storage, ref)
    else:
        for scope, agent in private_scopes(storage, config):
            if scope.scope_id == ref.id:
                memory = registry.open_private_scope(scope, agent)
                break
    if ref.backend == "mem0" and in_engine(memory) and memory.scope_id == ref.id:
        return memory
    if ref.backend != "mem0" and keeps_files(memory):
        return memory
    raise LookupError(f"no {ref.backend} memory for {ref.label}")


def _private_mem0(
    registry: MemoryRegistry, config: Config, storage: Path, ref: ScopeRef
) -> Mem0Memory | None:
    for scope, agent in private_scopes(storage, config, "mem0"):
        if scope.scope_id != ref.id:
            continue
        return registry.open_private_mem0(scope, agent)  # agent None: a team's with them
    return None


def find_scope(
    config: Config, storage: Path, scope_id: str, people: dict[str, str] | None = None
) -> ScopeRef | None:
    return next((s for s in list_scopes(config, storage, people) if s.id == scope_id), None)


def entries(memory: Browsed, query: str, limit: int) -> list[tuple[MemoryEntry, float | None]]:
    """The scope's entries: the product's search for ``query`` (keyword and vector, as the
    agents search), else the listing order (MEMORY.md, then the newest daily files)."""
    if query.strip():
        return [(hit.entry, hit.score) for hit in memory.search_sync(query, limit)]
    return [(entry, None) for entry in memory.list_sync(limit)]


def lookup(memory: Browsed, entry_id: str) -> MemoryEntry | None:
    """The live entry ``entry_id`` of the scope (None: not there now)."""
    if keeps_files(memory):
        return memory.lookup(entry_id)
    try:
        return memory.get_sync(entry_id)
    except MemoryStoreError:
        return None


def history_of(memory: Browsed) -> list[HistoryRecord]:
    """The scope's history, oldest first (mem0's change records, read as the file backend's)."""
    if keeps_files(memory):
        return memory.history_of()
    return [_mem0_record(row) for row in memory.history_sync()]


def _mem0_record(row: dict[str, str]) -> HistoryRecord:
    when = row.get("updated_at") or row.get("created_at") or ""
    try:
        stamp = dt.datetime.fromisoformat(when).timestamp()
    except ValueError:
        stamp = 0.0
    return HistoryRecord(
        time=stamp,
        actor=row.get("actor_id") or "—",  # mem0 does not record who changed a memory
        op=(row.get("event") or "").lower(),  # ADD, UPDATE, DELETE
        id=row.get("memory_id", ""),
        path="mem0",
        old=row.get("old_memory") or None,
        new=row.get("new_memory") or None,
    )


def restore(memory: Browsed, entry_id: str, *, actor: str) -> MemoryEntry:
    """Bring back a deleted entry: in files with its id where it was; in mem0 its last text,
    stored again (a new id: mem0 cannot undelete)."""
    if keeps_files(memory):
        return memory.restore_sync(entry_id, actor=actor)
    if lookup(memory, entry_id) is not None:
        raise MemoryStoreError(f"{entry_id!r} is in the memory now: there is nothing to restore")
    records = [r for r in history_of(memory) if r.id == entry_id]  # this scope's ids only
    if not records or records[-1].op != "delete" or not records[-1].old:
        raise MemoryStoreError(f"no deleted memory with id {entry_id!r} in this scope")
    return memory.add_sync(records[-1].old, actor=actor, consent=KEPT)  # stored before


def deleted(memory: Browsed, limit: int = 100) -> list[dict[str, Any]]:
    """Entries deleted or archived and not live again, newest first, from the history."""
    gone = deleted_records(history_of(memory))
    if in_engine(memory):  # a restore there is a new id with the same text
        live = {e.text for e in memory.list_sync(1_000_000)}
        gone = [g for g in gone if g["text"] not in live]
    return sorted(gone, key=lambda g: g["when"], reverse=True)[:limit]


def deleted_records(history: list[HistoryRecord]) -> list[dict[str, Any]]:
    """The entries ``history`` (oldest first) leaves deleted or archived."""
    gone: dict[str, dict[str, Any]] = {}
    for record in history:
        if record.op in ("delete", "archive"):
            gone[record.id] = {
                "id": record.id,
                "text": record.old or "",
                "when": record.time,
                "op": record.op,
                "path": record.path,
            }
        elif record.op in ("add", "restore", "update"):
            gone.pop(record.id, None)
            if record.op == "restore":  # a hand-written line comes back with an m- id
                gone = {k: g for k, g in gone.items() if g["text"] != record.new}
    return list(gone.values())


def entry_history(memory: Browsed, entry_id: str, text: str | None) -> list[HistoryRecord]:
    """The records of one entry, oldest first, across the ids it had: a hand-written line's id
    follows its text, so an edit or a restore gives it a new one (followed by text). A mem0
    id never changes: its own records (another scope's id has none)."""
    if in_engine(memory):
        try:
            return [_mem0_record(row) for row in memory.history_sync(entry_id)]
        except MemoryStoreError:  # not an id of this scope
            return []
    ids, texts = {entry_id}, {text} if text else set()
    found = []
    for record in reversed(history_of(memory)):
        if record.id in ids or (record.new is not None and record.new in texts):
            found.append(record)
            ids.add(record.id)
            if record.old:
                texts.add(record.old)
    return found[::-1]


def conflicts(memory: Browsed) -> list[Conflict]:
    if not keeps_files(memory):  # consolidation runs on files only
        return []
    records = ConsolidationRecords(db_path(memory.scope.state_dir))
    try:
        return records.conflicts()
    finally:
        records.close()


def proposals(memory: Browsed) -> list[Proposal]:
    queue = ConsentQueue(memory)
    try:
        return queue.pending()
    finally:
        queue.close()


def people(data_dir: Path, database: str | None = None) -> dict[str, str]:
    """Private folder keys -> the Matrix IDs they belong to, as far as the ledger knows them
    (the keys are one-way: a person who never talked since the ledger began stays a key)."""
    from mindroom.memory.private import requester_key

    found: set[str] = set()
    for rows in ledger_rows(
        data_dir,
        ("SELECT DISTINCT requester FROM flush_sessions", ()),
        ("SELECT DISTINCT requester FROM conversation_sessions", ()),
        database=database,
    ):
        found.update(r for (r,) in rows if r)
    return {requester_key(user): user for user in found}


def flush_sessions(
    data_dir: Path, ref: ScopeRef, database: str | None = None
) -> list[dict[str, Any]]:
    """The flush state of the sessions that write into ``ref`` (read-only, from the ledger)."""
    [rows] = ledger_rows(
        data_dir,
        (
            "SELECT agent, session_id, requester, team, dirty, last_seen_at,"
            " flushed_updated_at, failures, next_attempt_at, in_flight FROM flush_sessions",
            (),
        ),
        database=database,
    )
    from mindroom.memory.private import requester_key

    found = []
    for agent, session, requester, team, dirty, seen, flushed, failures, retry, busy in rows:
        members = tuple(sorted(json.loads(team or "[]")))
        if ref.kind == "agent":
            mine = agent == ref.agent and not requester and not members
        elif ref.kind == "team":
            mine = members == tuple(sorted(ref.members)) and not requester
        else:
            mine = (
                bool(requester)
                and requester_key(requester) == ref.person
                and (agent == ref.agent or (ref.agent is None and bool(members)))
            )
        if mine:
            found.append(
                {
                    "agent": agent,
                    "session": session,
                    "dirty": bool(dirty),
                    "last_seen": seen,
                    "flushed": flushed,
                    "failures": failures,
                    "retry_at": retry,
                    "in_flight": bool(busy),
                }
            )
    return sorted(found, key=lambda f: f["last_seen"], reverse=True)
