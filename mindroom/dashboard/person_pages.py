"""``/me``: a person reads, corrects, deletes and exports what the companions know about them.

Signed in through the link ``!memory`` sends (:mod:`mindroom.dashboard.person`), a person sees
their own private memories only: the scopes whose folder is theirs (the key of their Matrix
ID). Edits take the same write path as the companion's own tools (actor ``person``); nothing
here reads or names anybody else.

The download and "forget me" enumerate the map of a person's data
(:mod:`mindroom.people.data`): the download holds every store's part (conversations, expired
and archived entries, mem0), forget-me (asked twice, CSRF-protected like every form here)
erases it. A deleted fact is also replaced in the person's conversations and what is derived
from them, so no recall path brings it back (:func:`mindroom.people.data.redact_deleted_fact`).
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aiohttp import web

from mindroom.dashboard import person, scopes
from mindroom.dashboard.access import PERSON, PERSON_COOKIE, PERSON_UNTIL
from mindroom.dashboard.pages import held
from mindroom.dashboard.render import render
from mindroom.errors import ErasureBusy, MemoryStoreError
from mindroom.memory.backend import keeps_files
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.audit import person_export
from mindroom.memory.policy.consent import WriteConsent
from mindroom.memory.policy.view import AgentView
from mindroom.memory.private import PRIVATE_DIR, requester_key
from mindroom.people import data as person_data

if TYPE_CHECKING:
    from mindroom.dashboard.server import Dashboard

ACTOR = "person"
SHOWN = 500


def _unreadable(root: Path) -> list[str]:
    """The memory files under ``root`` that are not UTF-8 text (the store skips them)."""
    found = []
    for path in sorted(root.rglob("*.md")):
        try:
            path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            found.append(path.relative_to(root).as_posix())
        except OSError:
            continue
    return found


def own_scopes(dash: Dashboard, user_id: str) -> list[scopes.ScopeRef]:
    """The private scopes of ``user_id`` (blocking)."""
    key = requester_key(user_id)
    found = scopes.list_scopes(dash.host.config, dash.data_dir.parent)
    return [s for s in found if s.kind == scopes.PRIVATE and s.person == key]


async def login_page(dash: Dashboard, request: web.Request) -> web.Response:
    """The link's landing page: whose memory it opens, and a button that does (a GET never
    signs anyone in, so nobody can be signed in as someone else by a link they did not ask
    for without seeing whose name it carries)."""
    user, expires, sig = (request.query.get(k, "") for k in ("u", "exp", "sig"))
    problem = person.check_link(dash.token, user, expires, sig)
    if problem:
        return web.Response(status=401, text=problem + "\n", content_type="text/plain")
    link = (("u", user), ("exp", expires), ("sig", sig))
    return render("me_login.html", title="Your memory", user=user, link=link)


async def login(dash: Dashboard, request: web.Request) -> web.Response:
    """Sign the link's person in (from the landing page only: same origin)."""
    form = await request.post()
    origin = request.headers.get("Origin")
    if origin is not None and origin not in dash.access.origins:
        raise web.HTTPForbidden(text="open the link itself, then its button")
    user, expires, sig = (str(form.get(k, "")) for k in ("u", "exp", "sig"))
    problem = person.check_link(dash.token, user, expires, sig)
    if problem:
        return web.Response(status=401, text=problem + "\n", content_type="text/plain")
    found = web.Response(status=303, headers={"Location": "/me"})
    found.set_cookie(
        PERSON_COOKIE,
        person.session_cookie(dash.token, user),
        httponly=True,
        samesite="Lax",
        path="/me",
        max_age=person.SESSION_TTL_S,
        secure=dash.access.secure_cookies,
    )
    return found


async def _open(dash: Dashboard, request: web.Request) -> tuple[str, Any, AgentView]:
    """The signed-in person, and the scope the URL names: only one of theirs (else 404)."""
    user: str = request[PERSON]
    mine = await asyncio.to_thread(own_scopes, dash, user)
    ref = next((s for s in mine if s.id == request.match_info["scope"]), None)
    if ref is None:
        raise web.HTTPNotFound(text="not one of your memories")
    memory = _opened(dash, ref)
    if memory is None:
        raise web.HTTPNotFound(text="that memory is not there any more")
    return user, ref, AgentView(memory, CategoryAccess.everything())


def _opened(dash: Dashboard, ref: scopes.ScopeRef) -> scopes.Browsed | None:
    """The memory of one of the person's scopes (None: gone since it was listed, e.g. its
    companion's backend changed by a reload)."""
    try:
        return scopes.open_scope(dash.host.memories, dash.host.config, dash.data_dir.parent, ref)
    except LookupError:
        return None


async def home(dash: Dashboard, request: web.Request) -> web.Response:
    user: str = request[PERSON]
    token = person.person_csrf(dash.token, user, request[PERSON_UNTIL])
    mine = await asyncio.to_thread(own_scopes, dash, user)
    memories = []
    for ref in mine:
        memory = _opened(dash, ref)
        if memory is None:
            continue
        found = await asyncio.to_thread(memory.list_sync, SHOWN + 1)
        unreadable = (
            await asyncio.to_thread(_unreadable, memory.scope.root)
            if keeps_files(memory)
            else []  # mem0 keeps no files
        )
        entries = [
            {
                "action": f"/me/s/{quote(ref.id, safe='')}/e/{quote(entry.id, safe='')}",
                "id": entry.id,
                "text": entry.text,
            }
            for entry in found[:SHOWN]
        ]
        memories.append(
            {
                "companion": ref.agent or "a team",
                "entries": entries,
                "more": len(found) > SHOWN,
                "unreadable": unreadable,
            }
        )
    held = await asyncio.to_thread(
        person_data.list_person, dash.host.config, dash.data_dir.parent, dash.host.memories, user
    )
    stores = {store.name: store.what for store in person_data.STORES}
    return render(
        "me_home.html",
        title="Your memory",
        user=user,
        csrf=token,
        memories=memories,
        any_scope=bool(mine),
        shown=SHOWN,
        held=[(stores[name], len(where)) for name, where in held.items() if where],
    )


async def _change(dash: Dashboard, request: web.Request, what: str) -> web.Response:
    form = await dash.form(request)  # this person's CSRF field, before anything is opened
    user, _, view = await _open(dash, request)
    entry_id = request.match_info["entry"]
    try:
        if what == "update":
            text = " ".join(str(form.get("text", "")).split())
            if not text:
                raise MemoryStoreError("an entry needs some text (Delete removes it)")
            # the person's own edit of their own memory is their consent (the store checks
            # that the scope is theirs: see mindroom.memory.policy.consent)
            consent = WriteConsent.person(user)
            await asyncio.to_thread(
                partial(view.update_sync, consent=consent), entry_id, text, actor=ACTOR
            )
        else:
            deleted = await asyncio.to_thread(view.delete_sync, entry_id, actor=ACTOR)
            # the fact goes from every recall path too: the person's transcripts and what
            # is derived from them (session index, insights, learning)
            await asyncio.to_thread(
                person_data.redact_deleted_fact,
                dash.host.config,
                dash.data_dir.parent,
                dash.host.memories,
                user,
                deleted.text,
            )
    except MemoryStoreError as exc:
        return render("me_problem.html", 422, title="Your memory", problem=str(exc))
    raise web.HTTPSeeOther("/me")


async def save(dash: Dashboard, request: web.Request) -> web.Response:
    return await _change(dash, request, "update")


async def delete(dash: Dashboard, request: web.Request) -> web.Response:
    return await _change(dash, request, "delete")


async def export(dash: Dashboard, request: web.Request) -> web.Response:
    """Everything about the person: every store of the map (:mod:`mindroom.people.data`), and
    their private memories by companion as before (``memories``: live, expired and archived
    entries, mem0's too). Of shared memories, only what the person could be shown in their own
    direct chat (an admin's ``mindroom memory export --user`` has everything)."""
    user: str = request[PERSON]
    data = await asyncio.to_thread(
        person_export,
        dash.host.config,
        dash.host.memories,
        dash.data_dir.parent,
        user,
        for_person=True,  # only what the person could be shown
    )
    out: dict[str, Any] = {"user_id": user, "memories": []}
    for scope in data["private_memory"]:
        out["memories"].append(
            {
                "companion": scope["agent"],
                "entries": [
                    {
                        "id": e["id"],
                        "text": e["text"],
                        "file": e["path"],
                        "state": e.get("state", "active"),
                    }
                    for e in scope["entries"]
                ],
            }
        )
    out["stores"] = data["stores"]
    return web.Response(
        text=json.dumps(out, indent=2, ensure_ascii=False),
        content_type="application/json",
        headers={"Content-Disposition": 'attachment; filename="my-memory.json"'},
    )


async def forget_ask(dash: Dashboard, request: web.Request) -> web.Response:
    """The second step of forget-me: what will go, and the button that erases it."""
    await dash.form(request)  # this person's CSRF field
    user: str = request[PERSON]
    token = person.person_csrf(dash.token, user, request[PERSON_UNTIL])
    return render("me_forget_ask.html", title="Forget me", user=user, csrf=token)


async def forget(dash: Dashboard, request: web.Request) -> web.Response:
    """Erase the person's part of every store of the map; reports counts per store."""
    form = await dash.form(request)
    if form.get("confirm") != "yes":
        raise web.HTTPSeeOther("/me")
    user: str = request[PERSON]
    folder = dash.data_dir.parent / PRIVATE_DIR / requester_key(user)
    try:
        async with dash.host.runtime.erasing(folder):  # no answer or flush writes meanwhile
            reports = await asyncio.to_thread(
                person_data.forget_person,
                dash.host.config,
                dash.data_dir.parent,
                dash.host.memories,
                user,
            )
    except ErasureBusy as exc:  # another process did not hold still: nothing was erased
        return render("me_problem.html", 503, title="Forget me", problem=str(exc))
    page = render("me_forgotten.html", title="Forgotten", user=user, reports=reports)
    page.del_cookie(PERSON_COOKIE, path="/me")
    return page


async def static(dash: Dashboard, request: web.Request) -> web.StreamResponse:
    return await dash.static(request)


def add_person_routes(app: web.Application, bind: Any) -> None:
    """The person's routes (``bind`` ties a handler to the dashboard)."""
    app.router.add_get("/me/login", bind(login_page))
    app.router.add_post("/me/login", bind(login))
    app.router.add_get("/me/static/{name}", bind(static))  # its cookie is for /me only
    app.router.add_get("/me", bind(home))
    app.router.add_get("/me/export", bind(export))
    app.router.add_post("/me/s/{scope}/e/{entry}", bind(held(save)))
    app.router.add_post("/me/s/{scope}/e/{entry}/delete", bind(held(delete)))
    app.router.add_post("/me/forget", bind(forget_ask))
    app.router.add_post("/me/forget/confirm", bind(forget))
