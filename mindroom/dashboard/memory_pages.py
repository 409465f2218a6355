"""The memory browser: scopes, search, entries (read, edit, delete, restore, history), the
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
import html
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aiohttp import web

from mindroom.dashboard import scopes
from mindroom.dashboard.pages import layout
from mindroom.errors import MemoryStoreError
from mindroom.memory.jobs.maintenance.loop import schedule_target
from mindroom.memory.jobs.maintenance.store import MaintenanceStore
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.consent import WriteConsent
from mindroom.memory.policy.view import AgentView

if TYPE_CHECKING:
    from mindroom.dashboard.server import Dashboard

ACTOR = "dashboard"
LISTED = 200
_SHOWN = "shown"  # ?private=shown: the admin chose to look at a person's memory


def _e(value: object) -> str:
    return html.escape(str(value))


def _when(stamp: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp)) if stamp else "never"


def scope_url(ref: scopes.ScopeRef, tail: str = "") -> str:
    return f"/memory/s/{quote(ref.id, safe='')}{tail}"


def _private_query(ref: scopes.ScopeRef) -> str:
    return f"?private={_SHOWN}" if ref.kind == scopes.PRIVATE else ""


class _Scope:
    """The scope a request names, opened."""

    def __init__(self, dash: Dashboard, ref: scopes.ScopeRef, memory: scopes.Browsed) -> None:
        self.dash, self.ref, self.memory = dash, ref, memory
        self.view = AgentView(memory, CategoryAccess.everything())

    @classmethod
    async def of(cls, dash: Dashboard, request: web.Request) -> _Scope:
        config, storage = dash.host.config, dash.data_dir.parent
        scope_id = request.match_info["scope"]
        ref = await asyncio.to_thread(scopes.find_scope, config, storage, scope_id)
        if ref is None:
            raise web.HTTPNotFound(text=f"no memory scope {scope_id!r}")
        try:
            memory = scopes.open_scope(dash.host.memories, config, storage, ref)
        except LookupError as exc:
            raise web.HTTPNotFound(text=str(exc)) from None
        return cls(dash, ref, memory)

    def banner(self, request: web.Request) -> tuple[bool, str]:
        """(whether the page may show the scope's content, the notice above it): a private
        scope's content only once the admin chose to look."""
        if self.ref.kind != scopes.PRIVATE:
            return True, ""
        note = (
            f'<div class="notice warn" role="note"><strong>Private memory</strong> of '
            f"{_e(self.ref.label)}: what this person told the companion in confidence. "
            "Open it only for a reason they would accept; edits are recorded in its history "
            f"as <code>{ACTOR}</code>.</div>"
        )
        if request.query.get("private") == _SHOWN:
            return True, note
        return False, note + (
            f'<p><a href="{_e(quote(request.path))}?private={_SHOWN}">I have a reason: show this '
            "person's memory</a></p>"
        )

    def page(self, title: str, body: str, status: int = 200) -> web.Response:
        return layout(self.dash, title, "/memory", body, status)


async def index_page(dash: Dashboard, request: web.Request) -> web.Response:
    config, storage = dash.host.config, dash.data_dir.parent
    found = await asyncio.to_thread(scopes.list_scopes, config, storage)
    people = await asyncio.to_thread(scopes.people, dash.data_dir, config.storage.database)
    shared = [s for s in found if s.kind != scopes.PRIVATE]
    private = [s for s in found if s.kind == scopes.PRIVATE]
    rows = "".join(
        f'<tr><td><a href="{scope_url(s)}">{_e(s.label)}</a></td><td>{_e(s.kind)}</td>'
        f"<td><code>{_e(s.id)}</code></td></tr>"
        for s in shared
    )
    private_rows = "".join(
        f'<tr><td><a href="{scope_url(s)}">{_e(s.agent or "team")}</a></td>'
        f"<td>{_e(people.get(s.person, s.person))}</td></tr>"
        for s in private
    )
    runs = await asyncio.to_thread(_runs, storage, config.storage.database)
    body = (
        "<table><thead><tr><th>Scope</th><th>Kind</th><th>ID</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        "<h2>Private memories</h2>"
        '<div class="notice warn">Each of these is one person\'s memory with a private '
        "companion. Opening one asks you to confirm.</div>"
        "<table><thead><tr><th>Companion</th><th>Person</th></tr></thead>"
        f"<tbody>{private_rows}</tbody></table>"
        "<h2>Maintenance runs</h2><table><thead><tr><th>Job</th><th>Status</th><th>Started</th>"
        f"<th>Summary</th></tr></thead><tbody>{runs}</tbody></table>"
    )
    return layout(dash, "Memory", "/memory", body)


def _runs(storage: Any, database: str | None) -> str:
    target = schedule_target(storage, database)
    if isinstance(target, Path) and not target.exists():
        return ""
    store = MaintenanceStore(target)
    try:
        runs = store.runs(limit=20)
    finally:
        store.close()  # its connections (PostgreSQL: a pool of its own)
    return "".join(
        f"<tr><td>{_e(r.job_id)}</td><td>{_e(r.status)}</td>"
        f"<td>{_e(r.started_at.strftime('%Y-%m-%d %H:%M'))}</td>"
        f"<td>{_e(r.error_message or r.summary or '')}</td></tr>"
        for r in reversed(runs)
    )


async def scope_page(dash: Dashboard, request: web.Request) -> web.Response:
    scope = await _Scope.of(dash, request)
    shown, banner = scope.banner(request)
    if not shown:
        return scope.page(f"Memory: {scope.ref.label}", banner)
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
    keep = f'<input type="hidden" name="private" value="{_SHOWN}">' if private else ""
    rows = "".join(
        f'<tr><td><a href="{scope_url(scope.ref, "/e/" + quote(entry.id, safe=""))}{private}">'
        f"{_e(entry.id)}</a></td><td>{_e(entry.text)}</td><td>{_e(entry.path)}</td>"
        f"<td>{'' if score is None else f'{score:.2f}'}</td></tr>"
        for entry, score in found
    )
    flush_rows = "".join(
        f"<tr><td><code>{_e(f['session'])}</code></td><td>{_e(f['agent'])}</td>"
        f"<td>{'dirty' if f['dirty'] else 'clean'}{' (flushing)' if f['in_flight'] else ''}</td>"
        f"<td>{_e(_when(f['last_seen']))}</td><td>{_e(_when(f['flushed']))}</td>"
        f"<td>{_e(f['failures'])}{', next try ' + _when(f['retry_at']) if f['failures'] else ''}"
        "</td></tr>"
        for f in flushes
    )
    conflict_rows = "".join(
        f"<tr><td>{_e(c.id)}</td><td>{_e(c.kind)}</td><td>{_e(c.memory_id)} / "
        f"{_e(c.conflicting_memory_id)}</td><td>{_e(c.reason)}</td></tr>"
        for c in conflicts
    )
    proposal_rows = "".join(
        f"<tr><td>{_e(p.id)}</td><td>{_e(p.kind)}</td><td>{_e(p.text)}</td>"
        f"<td>{_e(p.user_id or '')}</td></tr>"
        for p in proposals
    )
    heading = f"{len(found)} {'found' if query else 'entries'}" + (
        f" (the first {LISTED})" if len(found) >= LISTED else ""
    )
    body = (
        banner + f'<form method="get" action="{scope_url(scope.ref)}">{keep}'
        f'<input name="q" id="q" value="{_e(query)}" placeholder="search this memory" '
        'size="40"> <button type="submit">Search</button></form>'
        f"<h2>{_e(heading)}</h2><table><thead><tr><th>ID</th><th>Entry</th><th>File</th>"
        f"<th>Score</th></tr></thead><tbody>{rows}</tbody></table>"
        f'<p><a href="{scope_url(scope.ref, "/deleted")}{private}">Deleted and archived '
        "entries</a></p>"
        "<h2>Sessions flushed into it</h2><table><thead><tr><th>Session</th><th>Agent</th>"
        "<th>State</th><th>Last seen</th><th>Last flushed</th><th>Failures</th></tr></thead>"
        f"<tbody>{flush_rows}</tbody></table>"
        "<h2>Open conflicts</h2><table><thead><tr><th>ID</th><th>Kind</th><th>Entries</th>"
        f"<th>Why</th></tr></thead><tbody>{conflict_rows}</tbody></table>"
        "<h2>Consent proposals waiting</h2><table><thead><tr><th>ID</th><th>Kind</th>"
        f"<th>Text</th><th>Person</th></tr></thead><tbody>{proposal_rows}</tbody></table>"
    )
    return scope.page(f"Memory: {scope.ref.label}", body)


def _entry_body(
    scope: _Scope,
    entry_id: str,
    entry: Any,
    history: list[Any],
    problem: str = "",
    text: str | None = None,
) -> str:
    dash, private = scope.dash, _private_query(scope.ref)
    action = scope_url(scope.ref, f"/e/{quote(entry_id, safe='')}")
    history_rows = "".join(
        f"<tr><td>{_e(_when(r.time))}</td><td>{_e(r.op)}</td><td>{_e(r.actor)}</td>"
        f"<td>{_e(r.old or '')}</td><td>{_e(r.new or '')}</td></tr>"
        for r in reversed(history)
    )
    notice = f'<div class="notice bad" role="alert">{_e(problem)}</div>' if problem else ""
    if entry is None:
        form = (
            "<p>This entry is not in the memory now (deleted, archived or expired).</p>"
            f'<form method="post" action="{action}/restore{private}">{dash.csrf_input()}'
            '<button type="submit">Restore it</button></form>'
        )
    else:
        where = (
            "Stored in mem0."
            if scope.ref.backend == "mem0"
            else f"In <code>{_e(entry.path)}</code>, lines {entry.start_line}–{entry.end_line}."
        )
        form = (
            f"<p class=muted>{where}</p>"
            f'<form method="post" action="{action}{private}">{dash.csrf_input()}'
            f'<textarea name="text" id="text" rows="4" cols="90">'
            f"{_e(entry.text if text is None else text)}</textarea>"
            '<p><button type="submit">Save</button></p></form>'
            f'<form method="post" action="{action}/delete{private}">{dash.csrf_input()}'
            '<button class="danger" type="submit">Delete</button></form>'
        )
    return (
        notice + form + "<h2>History</h2><table><thead><tr><th>When</th><th>What</th><th>Who</th>"
        f"<th>Before</th><th>After</th></tr></thead><tbody>{history_rows}</tbody></table>"
    )


async def entry_page(dash: Dashboard, request: web.Request) -> web.Response:
    scope = await _Scope.of(dash, request)
    shown, banner = scope.banner(request)
    if not shown:
        return scope.page(f"Memory: {scope.ref.label}", banner)
    entry_id = request.match_info["entry"]
    entry = await asyncio.to_thread(scopes.lookup, scope.memory, entry_id)
    text = entry.text if entry else None
    history = await asyncio.to_thread(scopes.entry_history, scope.memory, entry_id, text)
    if entry is None and not history:
        raise web.HTTPNotFound(text=f"no entry {entry_id!r} in {scope.ref.label}")
    body = banner + _entry_body(scope, entry_id, entry, history)
    return scope.page(f"Entry {entry_id}", body)


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
        else:
            restored = await asyncio.to_thread(scopes.restore, scope.memory, entry_id, actor=ACTOR)
            target = restored.id
    except MemoryStoreError as exc:
        entry = await asyncio.to_thread(scopes.lookup, scope.memory, entry_id)
        current = entry.text if entry else None
        history = await asyncio.to_thread(scopes.entry_history, scope.memory, entry_id, current)
        body = _entry_body(scope, entry_id, entry, history, str(exc), form.get("text"))
        return scope.page(f"Entry {entry_id}", body, status=422)
    raise web.HTTPSeeOther(scope_url(scope.ref, f"/e/{quote(target, safe='')}") + private)


async def save_entry(dash: Dashboard, request: web.Request) -> web.Response:
    return await _change(dash, request, "update")


async def delete_entry(dash: Dashboard, request: web.Request) -> web.Response:
    return await _change(dash, request, "delete")


async def restore_entry(dash: Dashboard, request: web.Request) -> web.Response:
    return await _change(dash, request, "restore")


async def deleted_page(dash: Dashboard, request: web.Request) -> web.Response:
    scope = await _Scope.of(dash, request)
    shown, banner = scope.banner(request)
    if not shown:
        return scope.page(f"Memory: {scope.ref.label}", banner)
    gone = await asyncio.to_thread(scopes.deleted, scope.memory)
    private = _private_query(scope.ref)
    rows = "".join(
        f'<tr><td><a href="{scope_url(scope.ref, "/e/" + quote(g["id"], safe=""))}{private}">'
        f"{_e(g['id'])}</a></td><td>{_e(g['text'])}</td><td>{_e(g['op'])}</td>"
        f"<td>{_e(_when(g['when']))}</td></tr>"
        for g in gone
    )
    body = (
        banner + "<table><thead><tr><th>ID</th><th>Entry</th><th>How</th><th>When</th></tr>"
        f"</thead><tbody>{rows}</tbody></table>"
    )
    return scope.page(f"Deleted from {scope.ref.label}", body)


def add_memory_routes(app: web.Application, bind: Any) -> None:
    """The memory browser's routes (``bind`` ties a handler to the dashboard)."""
    app.router.add_get("/memory", bind(index_page))
    app.router.add_get("/memory/s/{scope}", bind(scope_page))
    app.router.add_get("/memory/s/{scope}/deleted", bind(deleted_page))
    app.router.add_get("/memory/s/{scope}/e/{entry}", bind(entry_page))
    app.router.add_post("/memory/s/{scope}/e/{entry}", bind(save_entry))
    app.router.add_post("/memory/s/{scope}/e/{entry}/delete", bind(delete_entry))
    app.router.add_post("/memory/s/{scope}/e/{entry}/restore", bind(restore_entry))
