"""The memory browser: scopes, search, entries (read, edit, delete, restore, history, where
each was learned and the audience it may be recalled for), the
flush state of the sessions writing into a scope, its conflicts and consent proposals, and the
maintenance runs.

Edits go through the scope's own write path (:class:`~mindroom.memory.policy.view.AgentView` over
the
registry's memory, actor ``dashboard``): the file lock, the history and the index, exactly as
the agents' tools, so a person saving the same file in an editor loses nothing (the write
path re-reads and retries, see :mod:`mindroom.memory.files.protocol`). A private scope is one
person's:
it is listed apart, and its page shows nothing until the admin says they mean to look.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aiohttp import web

from mindroom.dashboard import scopes
from mindroom.dashboard.pages import held, page
from mindroom.errors import MemoryStoreError
from mindroom.memory.backend import keeps_files
from mindroom.memory.files.restore import set_fields_sync
from mindroom.memory.jobs.maintenance.loop import schedule_target
from mindroom.memory.jobs.maintenance.store import MaintenanceStore
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.audience import DEFAULT_WORD, PUBLIC, AudienceBook, chosen, describe
from mindroom.memory.policy.consent import WriteConsent
from mindroom.memory.policy.view import AgentView

if TYPE_CHECKING:
    from mindroom.dashboard.server import Dashboard

ACTOR = "dashboard"
LISTED = 200
_SHOWN = "shown"  # ?private=shown: the admin chose to look at a person's memory
NO_BANNER: dict[str, Any] = {"label": None}  # a shared scope's pages: no private banner


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "never"


def scope_url(ref: scopes.ScopeRef, tail: str = "") -> str:
    return f"/memory/s/{quote(ref.id, safe='')}{tail}"


def _private_query(ref: scopes.ScopeRef) -> str:
    return f"?private={_SHOWN}" if ref.kind == scopes.PRIVATE else ""


def _find_scope(dash: Dashboard, scope_id: str) -> scopes.ScopeRef | None:
    """The scope ``scope_id``, a private one labelled with its person's Matrix ID (blocking)."""
    config = dash.host.config
    people = scopes.people(dash.data_dir, config.storage.database)
    return scopes.find_scope(config, dash.data_dir.parent, scope_id, people)


class _Scope:
    """The scope a request names, opened."""

    def __init__(self, dash: Dashboard, ref: scopes.ScopeRef, memory: scopes.Browsed) -> None:
        self.dash, self.ref, self.memory = dash, ref, memory
        self.view = AgentView(memory, CategoryAccess.everything())

    @classmethod
    async def of(cls, dash: Dashboard, request: web.Request) -> _Scope:
        config, storage = dash.host.config, dash.data_dir.parent
        scope_id = request.match_info["scope"]
        ref = await asyncio.to_thread(_find_scope, dash, scope_id)
        if ref is None:
            raise web.HTTPNotFound(text=f"no memory scope {scope_id!r}")
        try:
            memory = scopes.open_scope(dash.host.memories, config, storage, ref)
        except LookupError as exc:
            raise web.HTTPNotFound(text=str(exc)) from None
        return cls(dash, ref, memory)

    def gate(self, request: web.Request) -> tuple[bool, dict[str, Any]]:
        """(whether the page may show the scope's content, the private banner above it): a
        private scope's content only once the admin chose to look."""
        if self.ref.kind != scopes.PRIVATE:
            return True, NO_BANNER
        if request.query.get("private") == _SHOWN:
            return True, {"label": self.ref.label, "actor": ACTOR, "reveal": ""}
        reveal = f"{quote(request.path)}?private={_SHOWN}"
        return False, {"label": self.ref.label, "actor": ACTOR, "reveal": reveal}

    def page(self, template: str, title: str, status: int = 200, **context: Any) -> web.Response:
        return page(self.dash, template, title, "/memory", status, **context)

    def gated(self, gate: dict[str, Any]) -> web.Response:
        """The page of a private scope the admin has not chosen to look at yet."""
        return self.page("memory_gated.html", f"Memory: {self.ref.label}", gate=gate)

    @property
    def owner(self) -> str | None:
        """Whose memory a private scope is (its entries without an audience are theirs)."""
        return self.ref.label if self.ref.kind == scopes.PRIVATE else None

    def book(self) -> AudienceBook | None:
        """The scope's recorded rooms (None: mem0 records no audience)."""
        return AudienceBook(self.memory.scope.state_dir) if keeps_files(self.memory) else None

    def learned(self, words: list[str | None]) -> list[str]:
        """Where entries with audience ``words`` were learned, for a person (blocking)."""
        book = self.book()
        return ["" if book is None else describe(w, book, self.owner) for w in words]

    def audience_choices(self) -> list[dict[str, str]]:
        """What the audience form offers: the scope's default, public, each recorded room
        (blocking; a direct chat is typed as ``dm:@person:server``)."""
        book = self.book()
        if book is None:
            return []
        found = [
            {"value": DEFAULT_WORD, "label": describe(None, book, self.owner)},
            {"value": PUBLIC, "label": describe(PUBLIC, book)},
        ]
        rooms = book.rooms()
        found += [{"value": key, "label": describe(key, book)} for key in sorted(rooms)]
        return found

    def set_audience(self, entry_id: str, value: str) -> str:
        """Give entry ``entry_id`` the audience a person chose; its id (blocking)."""
        book = self.book()
        if book is None or not keeps_files(self.memory):
            raise MemoryStoreError("mem0 records no audience: only file memory has one")
        try:
            word = chosen(value, book, self.owner)
        except ValueError as exc:
            raise MemoryStoreError(str(exc)) from None
        entry = self.view.get_sync(entry_id)
        done = set_fields_sync(
            self.memory, entry.id, replace(entry.fields, audience=word), actor=ACTOR
        )
        return done.id


async def index_page(dash: Dashboard, request: web.Request) -> web.Response:
    config, storage = dash.host.config, dash.data_dir.parent
    found = await asyncio.to_thread(scopes.list_scopes, config, storage)
    people = await asyncio.to_thread(scopes.people, dash.data_dir, config.storage.database)
    shared = [
        {"url": scope_url(s), "label": s.label, "kind": s.kind, "id": s.id}
        for s in found
        if s.kind != scopes.PRIVATE
    ]
    private = [
        {
            "url": scope_url(s),
            "companion": s.agent or "team",
            "person": people.get(s.person, s.person),
        }
        for s in found
        if s.kind == scopes.PRIVATE
    ]
    runs = await asyncio.to_thread(_runs, storage, config.storage.database)
    return page(
        dash, "memory_index.html", "Memory", "/memory", shared=shared, private=private, runs=runs
    )


def _runs(storage: Any, database: str | None) -> list[dict[str, str]]:
    target = schedule_target(storage, database)
    if isinstance(target, Path) and not target.exists():
        return []
    store = MaintenanceStore(target)
    try:
        runs = store.runs(limit=20)
    finally:
        store.close()  # its connections (PostgreSQL: a pool of its own)
    return [
        {
            "job": r.job_id,
            "status": r.status,
            "started": r.started_at.strftime("%Y-%m-%d %H:%M"),
            "summary": r.error_message or r.summary or "",
        }
        for r in reversed(runs)
    ]


async def scope_page(dash: Dashboard, request: web.Request) -> web.Response:
    scope = await _Scope.of(dash, request)
    shown, gate = scope.gate(request)
    if not shown:
        return scope.gated(gate)
    query = request.query.get("q", "")
    found, flushes, conflicts, proposals = await asyncio.gather(
        asyncio.to_thread(scopes.entries, scope.memory, query, LISTED),
        asyncio.to_thread(
            scopes.flush_sessions, dash.data_dir, scope.ref, dash.host.config.storage.database
        ),
        asyncio.to_thread(scopes.conflicts, scope.memory),
        asyncio.to_thread(scopes.proposals, scope.memory),
    )
    private = _private_query(scope.ref)
    learned = await asyncio.to_thread(scope.learned, [e.fields.audience for e, _ in found])
    entries = [
        {
            "url": scope_url(scope.ref, "/e/" + quote(entry.id, safe="")) + private,
            "id": entry.id,
            "text": entry.text,
            "path": entry.path,
            "learned": where,
            "score": "" if score is None else f"{score:.2f}",
        }
        for (entry, score), where in zip(found, learned, strict=True)
    ]
    flush_rows = [
        {
            "session": f["session"],
            "agent": f["agent"],
            "state": ("dirty" if f["dirty"] else "clean")
            + (" (flushing)" if f["in_flight"] else ""),
            "last_seen": _when(f["last_seen"]),
            "flushed": _when(f["flushed"]),
            "failures": f"{f['failures']}"
            + (", next try " + _when(f["retry_at"]) if f["failures"] else ""),
        }
        for f in flushes
    ]
    heading = f"{len(found)} {'found' if query else 'entries'}" + (
        f" (the first {LISTED})" if len(found) >= LISTED else ""
    )
    return scope.page(
        "memory_scope.html",
        f"Memory: {scope.ref.label}",
        gate=gate,
        action=scope_url(scope.ref),
        private=private,
        query=query,
        heading=heading,
        entries=entries,
        deleted_url=scope_url(scope.ref, "/deleted") + private,
        flushes=flush_rows,
        conflicts=conflicts,
        proposals=proposals,
    )


def _entry_page(
    scope: _Scope,
    entry_id: str,
    entry: Any,
    history: list[Any],
    gate: dict[str, Any],
    problem: str = "",
    text: str | None = None,
    status: int = 200,
    where: tuple[str, list[dict[str, str]]] = ("", []),
) -> web.Response:
    rows = [
        {"when": _when(r.time), "op": r.op, "actor": r.actor, "old": r.old, "new": r.new}
        for r in reversed(history)
    ]
    return scope.page(
        "memory_entry.html",
        f"Entry {entry_id}",
        status,
        gate=gate,
        problem=problem,
        action=scope_url(scope.ref, f"/e/{quote(entry_id, safe='')}"),
        private=_private_query(scope.ref),
        entry=entry,
        mem0=scope.ref.backend == "mem0",
        text=(entry.text if text is None else text) if entry is not None else "",
        history=rows,
        learned=where[0],
        audience=(entry.fields.audience or DEFAULT_WORD) if entry is not None else "",
        choices=where[1],
    )


async def _where(scope: _Scope, entry: Any) -> tuple[str, list[dict[str, str]]]:
    """Where ``entry`` was learned, and the audiences the form offers."""
    if entry is None:
        return "", []

    def read() -> tuple[str, list[dict[str, str]]]:
        return scope.learned([entry.fields.audience])[0], scope.audience_choices()

    return await asyncio.to_thread(read)


async def entry_page(dash: Dashboard, request: web.Request) -> web.Response:
    scope = await _Scope.of(dash, request)
    shown, gate = scope.gate(request)
    if not shown:
        return scope.gated(gate)
    entry_id = request.match_info["entry"]
    entry = await asyncio.to_thread(scopes.lookup, scope.memory, entry_id)
    text = entry.text if entry else None
    history = await asyncio.to_thread(scopes.entry_history, scope.memory, entry_id, text)
    if entry is None and not history:
        raise web.HTTPNotFound(text=f"no entry {entry_id!r} in {scope.ref.label}")
    where = await _where(scope, entry)
    return _entry_page(scope, entry_id, entry, history, gate, where=where)


async def _change(dash: Dashboard, request: web.Request, what: str) -> web.Response:
    scope = await _Scope.of(dash, request)
    form = await dash.form(request)
    entry_id = request.match_info["entry"]
    private = _private_query(scope.ref)
    try:
        if what == "update":
            text = " ".join(form.get("text", "").split())
            if not text:
                raise MemoryStoreError("an entry needs some text (Delete removes it)")
            # an operator's edit is not the consent of the person a fact is about: a
            # sensitive new text waits for them (the store files it, and says so here)
            changed = await asyncio.to_thread(
                partial(scope.view.update_sync, consent=WriteConsent.operator()),
                entry_id,
                text,
                actor=ACTOR,
            )
            target = changed.id  # a hand-written entry's id follows its text
        elif what == "delete":
            await asyncio.to_thread(scope.view.delete_sync, entry_id, actor=ACTOR)
            target = entry_id
        elif what == "audience":
            value = form.get("audience", "")
            target = await asyncio.to_thread(scope.set_audience, entry_id, value)
        else:
            restored = await asyncio.to_thread(scopes.restore, scope.memory, entry_id, actor=ACTOR)
            target = restored.id
    except MemoryStoreError as exc:
        entry = await asyncio.to_thread(scopes.lookup, scope.memory, entry_id)
        current = entry.text if entry else None
        history = await asyncio.to_thread(scopes.entry_history, scope.memory, entry_id, current)
        where = await _where(scope, entry)
        return _entry_page(
            scope,
            entry_id,
            entry,
            history,
            NO_BANNER,
            str(exc),
            form.get("text"),
            status=422,
            where=where,
        )
    raise web.HTTPSeeOther(scope_url(scope.ref, f"/e/{quote(target, safe='')}") + private)


async def save_entry(dash: Dashboard, request: web.Request) -> web.Response:
    return await _change(dash, request, "update")


async def delete_entry(dash: Dashboard, request: web.Request) -> web.Response:
    return await _change(dash, request, "delete")


async def set_entry_audience(dash: Dashboard, request: web.Request) -> web.Response:
    return await _change(dash, request, "audience")


async def restore_entry(dash: Dashboard, request: web.Request) -> web.Response:
    return await _change(dash, request, "restore")


async def deleted_page(dash: Dashboard, request: web.Request) -> web.Response:
    scope = await _Scope.of(dash, request)
    shown, gate = scope.gate(request)
    if not shown:
        return scope.gated(gate)
    gone = await asyncio.to_thread(scopes.deleted, scope.memory)
    private = _private_query(scope.ref)
    rows = [
        {
            "url": scope_url(scope.ref, "/e/" + quote(g["id"], safe="")) + private,
            "id": g["id"],
            "text": g["text"],
            "op": g["op"],
            "when": _when(g["when"]),
        }
        for g in gone
    ]
    return scope.page(
        "memory_deleted.html", f"Deleted from {scope.ref.label}", gate=gate, gone=rows
    )


def add_memory_routes(app: web.Application, bind: Any) -> None:
    """The memory browser's routes (``bind`` ties a handler to the dashboard)."""
    app.router.add_get("/memory", bind(index_page))
    app.router.add_get("/memory/s/{scope}", bind(scope_page))
    app.router.add_get("/memory/s/{scope}/deleted", bind(deleted_page))
    app.router.add_get("/memory/s/{scope}/e/{entry}", bind(entry_page))
    app.router.add_post("/memory/s/{scope}/e/{entry}", bind(held(save_entry)))
    app.router.add_post("/memory/s/{scope}/e/{entry}/delete", bind(held(delete_entry)))
    app.router.add_post("/memory/s/{scope}/e/{entry}/audience", bind(held(set_entry_audience)))
    app.router.add_post("/memory/s/{scope}/e/{entry}/restore", bind(held(restore_entry)))
