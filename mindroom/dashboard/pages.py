"""The dashboard's pages: status, agents and teams, memory settings.

Each page is server-rendered HTML; each form posts back with its CSRF field and the digest of
``config.yaml`` it was rendered from, and is saved by :mod:`mindroom.dashboard.forms`.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aiohttp import web

from mindroom.config.schema import AGENT_NAME_RE
from mindroom.config.store import ConfigDocument, edit_config
from mindroom.dashboard.forms import (
    BASE_FIELD,
    Field,
    StaleForm,
    check_fresh,
    field_errors,
    render_fields,
    save_fields,
)
from mindroom.dashboard.settings import MEMORY_FIELDS
from mindroom.errors import ConfigError

if TYPE_CHECKING:
    from mindroom.dashboard.server import Dashboard

_NAV = (
    ("/", "Status"),
    ("/agents", "Agents"),
    ("/memory", "Memory"),
    ("/memory/settings", "Memory settings"),
)


def _e(value: object) -> str:
    return html.escape(str(value))


def layout(dash: Dashboard, title: str, here: str, body: str, status: int = 200) -> web.Response:
    """A whole page: the navigation, then ``body``."""
    nav = "".join(
        f'<a href="{href}"{" class=here" if href == here else ""}>{label}</a>'
        for href, label in _NAV
    )
    page = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{_e(title)} · mindroom</title>"
        '<link rel="stylesheet" href="/static/style.css"></head>'
        f"<body><header><strong>mindroom</strong>{nav}</header><main><h1>{_e(title)}</h1>"
        f"{body}</main></body></html>"
    )
    return web.Response(text=page, content_type="text/html", status=status)


def _notice(request: web.Request, problem: str = "") -> str:
    if problem:
        return f'<div class="notice bad" role="alert">{_e(problem)}</div>'
    if "saved" in request.query:
        return (
            '<div class="notice ok">Saved to config.yaml; the bot applies it now '
            "(a change it cannot apply is shown on the status page).</div>"
        )
    return ""


def _doc(dash: Dashboard) -> ConfigDocument:
    return ConfigDocument(dash.config_path)


@dataclass(frozen=True)
class FormSpec:
    """A page with one form over config keys (``fields`` below ``base``)."""

    title: str
    here: str  # the navigation entry it belongs to
    action: str
    base: str
    fields: Sequence[Field]
    extra: str = ""  # more HTML after the form (a delete button)


def _form_page(
    dash: Dashboard,
    request: web.Request,
    spec: FormSpec,
    errors: Mapping[str, str] | None = None,
    submitted: Mapping[str, str] | None = None,
    status: int = 200,
) -> web.Response:
    doc = _doc(dash)
    errors = errors or {}
    body = (
        _notice(request, errors.get("", ""))
        + f'<form method="post" action="{_e(spec.action)}">{dash.csrf_input()}'
        f'<input type="hidden" name="{BASE_FIELD}" value="{doc.digest}">'
        + render_fields(doc, spec.base, spec.fields, errors, submitted)
        + '<p><button type="submit">Save</button></p></form>'
        + spec.extra
    )
    return layout(dash, spec.title, spec.here, body, status)


async def _save(dash: Dashboard, request: web.Request, spec: FormSpec) -> web.Response:
    form = await dash.form(request)
    try:
        save_fields(dash.config_path, spec.base, spec.fields, form)
    except StaleForm as exc:
        return _form_page(dash, request, spec, {"": str(exc)}, status=409)
    except ConfigError as exc:
        errors = field_errors(str(exc), spec.base, spec.fields)
        return _form_page(dash, request, spec, errors, form, status=422)
    raise web.HTTPSeeOther(f"{spec.action}?saved=1")


# -- status ---------------------------------------------------------------------------------------


async def status_page(dash: Dashboard, request: web.Request) -> web.Response:
    def table(title: str, body_id: str, heads: Sequence[str]) -> str:
        cells = "".join(f"<th>{h}</th>" for h in heads)
        return (
            f"<h2>{title}</h2><table><thead><tr>{cells}</tr></thead>"
            f'<tbody id="{body_id}"></tbody></table>'
        )

    body = (
        '<p class="muted">Updates every 2 s; last update <span id="updated">…</span>.</p>'
        + table("Accounts", "accounts", ("Account", "User", "Device", "Sync", "Rooms"))
        + table("Rooms", "rooms", ("Room", "ID", "Agents"))
        + table(
            "Last answers", "answers", ("Claimed", "Room", "From", "Answered by", "Status", "Took")
        )
        + table(
            "Warnings and errors (model errors among them)",
            "problems",
            ("When", "Level", "Where", "Message"),
        )
        + '<script src="/static/live.js"></script>'
    )
    return layout(dash, "Status", "/", body)


# -- agents and teams -----------------------------------------------------------------------------


def agent_fields(models: Sequence[str]) -> list[Field]:
    return [
        Field("display_name", "Display name"),
        Field("role", "Role"),
        Field("instructions", "Instructions (one per line)", "lines"),
        Field("model", "Model", "choice", tuple(models), "defaults.model"),
        Field("rooms", "Rooms (comma-separated)", "list"),
        Field("thread_mode", "Thread mode", "choice", ("thread", "room"), "defaults"),
        Field("history_runs", "History runs", "number", hint="defaults"),
        Field("streaming", "Streaming", "flag", hint="defaults"),
        Field("status_reactions", "Status reactions", "flag", hint="defaults"),
        Field(
            "memory_backend", "Memory backend", "choice", ("file", "mem0", "none"), "memory.backend"
        ),
        Field(
            "memory_embedder.provider",
            "Memory embedder override",
            "choice",
            ("sentence_transformers", "huggingface", "openai", "ollama", "none"),
            "memory.embedder",
            shorthand=True,
        ),
        Field("memory_embedder.config.model", "Memory embedder override: model"),
        Field("learning", "Agno learning", "flag", hint="defaults"),
        Field("learning_mode", "Learning mode", "choice", ("always", "agentic"), "defaults"),
        Field(
            "private.per",
            "Private companion: one memory per",
            "choice",
            ("user", "user_agent"),
            "not private",
        ),
        Field("private.root", "Private memory folder name", hint="the agent's name"),
        Field("private.template_dir", "Private template folder", hint="mind_template"),
    ]


def team_fields(models: Sequence[str]) -> list[Field]:
    return [
        Field("display_name", "Display name"),
        Field("role", "Role"),
        Field("agents", "Members (comma-separated)", "list"),
        Field("mode", "Mode", "choice", ("coordinate", "collaborate"), "coordinate"),
        Field("rooms", "Rooms (comma-separated)", "list"),
        Field("model", "Model", "choice", tuple(models), "defaults.model"),
        Field("instructions", "Instructions (one per line)", "lines"),
    ]


def _listing(
    dash: Dashboard,
    request: web.Request,
    problem: str = "",
    submitted: Mapping[str, str] | None = None,
    status: int = 200,
) -> web.Response:
    config = dash.host.config
    rows = []
    for name, agent in config.agents.items():
        private = f"per {agent.private.per}" if agent.private else ""
        learning = agent.learning if agent.learning is not None else config.defaults.learning
        rows.append(
            f'<tr><td><a href="/agents/{quote(name)}">{_e(name)}</a></td>'
            f"<td>{_e(agent.role)}</td><td>{_e(config.agent_model(name))}</td>"
            f"<td>{_e(', '.join(agent.rooms))}</td>"
            f"<td>{_e(agent.thread_mode or config.defaults.thread_mode)}</td>"
            f"<td>{_e(agent.memory_backend or config.memory.backend)}</td>"
            f"<td>{_e(private)}</td><td>{'on' if learning else 'off'}</td></tr>"
        )
    teams = [
        f'<tr><td><a href="/teams/{quote(name)}">{_e(name)}</a></td><td>{_e(team.role)}</td>'
        f"<td>{_e(', '.join(team.agents))}</td><td>{_e(team.mode or 'coordinate')}</td>"
        f"<td>{_e(', '.join(team.rooms))}</td></tr>"
        for name, team in config.teams.items()
    ]
    given = submitted or {}
    models = "".join(f"<option>{_e(m)}</option>" for m in config.models)
    doc = _doc(dash)
    body = (
        _notice(request, problem)
        + "<table><thead><tr><th>Agent</th><th>Role</th><th>Model</th><th>Rooms</th>"
        "<th>Thread mode</th><th>Memory</th><th>Private</th><th>Learning</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        + "<h2>Teams</h2><table><thead><tr><th>Team</th><th>Role</th><th>Members</th>"
        f"<th>Mode</th><th>Rooms</th></tr></thead><tbody>{''.join(teams)}</tbody></table>"
        + f'<h2>Add an agent</h2><form method="post" action="/agents">{dash.csrf_input()}'
        f'<input type="hidden" name="{BASE_FIELD}" value="{doc.digest}">'
        '<div class="field"><label for="f-name">Name</label>'
        f'<input id="f-name" name="name" value="{_e(given.get("name", ""))}" '
        'placeholder="lowercase, e.g. coder"></div>'
        '<div class="field"><label for="f-role">Role</label>'
        f'<input id="f-role" name="role" value="{_e(given.get("role", ""))}"></div>'
        '<div class="field"><label for="f-model">Model</label><select id="f-model" '
        f'name="model"><option value="">(defaults.model)</option>{models}</select></div>'
        '<div class="field"><label for="f-rooms">Rooms (comma-separated)</label>'
        f'<input id="f-rooms" name="rooms" value="{_e(given.get("rooms", ""))}"></div>'
        '<p><button type="submit">Add agent</button></p></form>'
    )
    return layout(dash, "Agents and teams", "/agents", body, status)


async def agents_page(dash: Dashboard, request: web.Request) -> web.Response:
    return _listing(dash, request)


async def add_agent(dash: Dashboard, request: web.Request) -> web.Response:
    form = await dash.form(request)
    name = form.get("name", "").strip()
    rooms = [r.strip() for r in form.get("rooms", "").split(",") if r.strip()]
    try:
        if not AGENT_NAME_RE.fullmatch(name):
            raise ConfigError(
                f"agent name {name!r} is not a safe identifier: lowercase letters, digits "
                "and '_', starting with a letter"
            )
        with edit_config(dash.config_path) as doc:
            check_fresh(doc, form)
            doc.add_agent(
                name,
                role=form.get("role", "").strip(),
                model=form.get("model") or None,
                rooms=rooms,
            )
            doc.save()
    except ConfigError as exc:
        return _listing(dash, request, str(exc), form, 409 if isinstance(exc, StaleForm) else 422)
    raise web.HTTPSeeOther(f"/agents/{quote(name)}?saved=1")


def _entity(dash: Dashboard, request: web.Request, kind: str) -> tuple[str, list[Field]]:
    name = request.match_info["name"]
    if not AGENT_NAME_RE.fullmatch(name):  # a dotted name would reach any key of the file
        raise web.HTTPNotFound(text=f"no {kind[:-1]} called {name!r}")
    config = dash.host.config
    known = config.agents if kind == "agents" else config.teams
    if name not in known and not _in_file(dash, f"{kind}.{name}"):
        raise web.HTTPNotFound(text=f"no {kind[:-1]} called {name!r} in config.yaml")
    models = list(config.models)
    return name, agent_fields(models) if kind == "agents" else team_fields(models)


def _in_file(dash: Dashboard, key: str) -> bool:
    try:
        _doc(dash).get(key)
    except ConfigError:
        return False
    return True


def _delete_form(dash: Dashboard, kind: str, name: str) -> str:
    return (
        f'<h2>Remove</h2><form method="post" action="/{kind}/{quote(name)}/delete">'
        f'{dash.csrf_input()}<input type="hidden" name="{BASE_FIELD}" '
        f'value="{_doc(dash).digest}"><p class="muted">Removes {_e(name)} from config.yaml: '
        "its account leaves its rooms and stops; its memory folder stays on disk.</p>"
        f'<button class="danger" type="submit">Remove {_e(name)}</button></form>'
    )


def entity_handlers(kind: str) -> tuple[Any, Any, Any]:
    """GET, POST and delete handlers of ``/agents/{name}`` or ``/teams/{name}``."""
    noun = "Agent" if kind == "agents" else "Team"

    def spec(dash: Dashboard, request: web.Request) -> tuple[str, FormSpec]:
        name, fields = _entity(dash, request, kind)
        page = FormSpec(
            f"{noun} {name}",
            "/agents",
            f"/{kind}/{quote(name)}",
            f"{kind}.{name}",
            fields,
            _delete_form(dash, kind, name),
        )
        return name, page

    async def show(dash: Dashboard, request: web.Request) -> web.Response:
        return _form_page(dash, request, spec(dash, request)[1])

    async def save(dash: Dashboard, request: web.Request) -> web.Response:
        return await _save(dash, request, spec(dash, request)[1])

    async def delete(dash: Dashboard, request: web.Request) -> web.Response:
        name, page = spec(dash, request)
        form = await dash.form(request)
        try:
            with edit_config(dash.config_path) as doc:
                check_fresh(doc, form)
                doc.unset(f"{kind}.{name}")
                doc.save()
        except ConfigError as exc:
            return _form_page(dash, request, page, {"": str(exc)}, status=422)
        raise web.HTTPSeeOther("/agents?saved=1")

    return show, save, delete


# -- memory settings ------------------------------------------------------------------------------

_MEMORY = FormSpec(
    "Memory settings", "/memory/settings", "/memory/settings", "memory", MEMORY_FIELDS
)


async def memory_page(dash: Dashboard, request: web.Request) -> web.Response:
    return _form_page(dash, request, _MEMORY)


async def save_memory(dash: Dashboard, request: web.Request) -> web.Response:
    return await _save(dash, request, _MEMORY)


def binder(dash: Dashboard) -> Any:
    """``bind(handler)``: the aiohttp handler calling ``handler(dash, request)``."""

    def bind(handler: Any) -> Any:
        async def bound(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(dash, request)
            except ConfigError as exc:  # config.yaml broken on disk: say so, not a 500
                body = (
                    f'<div class="notice bad" role="alert">{_e(exc)}</div><p>The bot runs '
                    "on the last valid config; fix the file and reload this page.</p>"
                )
                return layout(dash, "config.yaml cannot be read", "", body, status=503)

        return bound

    return bind


def add_routes(app: web.Application, dash: Dashboard) -> None:
    """The status, agents and memory settings pages' routes, bound to ``dash``."""
    bind = binder(dash)

    app.router.add_get("/", bind(status_page))
    app.router.add_get("/agents", bind(agents_page))
    app.router.add_post("/agents", bind(add_agent))
    for kind in ("agents", "teams"):
        show, save, delete = entity_handlers(kind)
        app.router.add_get(f"/{kind}/{{name}}", bind(show))
        app.router.add_post(f"/{kind}/{{name}}", bind(save))
        app.router.add_post(f"/{kind}/{{name}}/delete", bind(delete))
    app.router.add_get("/memory/settings", bind(memory_page))
    app.router.add_post("/memory/settings", bind(save_memory))
