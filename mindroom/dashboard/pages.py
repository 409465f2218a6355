"""The dashboard's pages: status, agents and teams, memory settings.

Each page is server-rendered HTML (the templates of :mod:`mindroom.dashboard.render`); each
form posts back with its CSRF field and the digest of ``config.yaml`` it was rendered
from, and is saved by :mod:`mindroom.dashboard.forms`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from aiohttp import web

from mindroom.config.schema import AGENT_NAME_RE
from mindroom.config.store import ConfigDocument, edit_config
from mindroom.dashboard.forms import (
    Field,
    StaleForm,
    check_fresh,
    field_errors,
    field_rows,
    save_fields,
)
from mindroom.dashboard.render import render
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


def page(
    dash: Dashboard, template: str, title: str, here: str, status: int = 200, **context: Any
) -> web.Response:
    """A whole page: the navigation (``here`` marked), then ``template``'s body."""
    return render(
        template,
        status,
        title=title,
        here=here,
        nav=_NAV,
        csrf=dash.csrf,
        **context,
    )


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
    removes: str = ""  # an agent's or team's name: a delete form after the form
    note: str = ""  # a line above the form


def _form_page(
    dash: Dashboard,
    request: web.Request,
    spec: FormSpec,
    errors: Mapping[str, str] | None = None,
    submitted: Mapping[str, str] | None = None,
    status: int = 200,
) -> web.Response:
    errors = errors or {}
    doc = _doc(dash)
    return page(
        dash,
        "form.html",
        spec.title,
        spec.here,
        status,
        problem=errors.get("", ""),
        saved="saved" in request.query,
        action=spec.action,
        digest=doc.digest,
        rows=field_rows(doc, spec.base, spec.fields, errors, submitted),
        removes=spec.removes,
        note=spec.note,
    )


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
    return page(dash, "status.html", "Status", "/")


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
    agents = []
    for name, agent in config.agents.items():
        learning = agent.learning if agent.learning is not None else config.defaults.learning
        agents.append(
            {
                "url": f"/agents/{quote(name)}",
                "name": name,
                "role": agent.role,
                "model": config.agent_model(name),
                "rooms": ", ".join(agent.rooms),
                "thread_mode": agent.thread_mode or config.defaults.thread_mode,
                "memory": agent.memory_backend or config.memory.backend,
                "private": f"per {agent.private.per}" if agent.private else "",
                "learning": "on" if learning else "off",
            }
        )
    teams = [
        {
            "url": f"/teams/{quote(name)}",
            "name": name,
            "role": team.role,
            "members": ", ".join(team.agents),
            "mode": team.mode or "coordinate",
            "rooms": ", ".join(team.rooms),
        }
        for name, team in config.teams.items()
    ]
    given = submitted or {}
    return page(
        dash,
        "agents.html",
        "Agents and teams",
        "/agents",
        status,
        problem=problem,
        saved="saved" in request.query,
        agents=agents,
        teams=teams,
        models=list(config.models),
        digest=_doc(dash).digest,
        given={k: given.get(k, "") for k in ("name", "role", "rooms")},
    )


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


def entity_handlers(kind: str) -> tuple[Any, Any, Any]:
    """GET, POST and delete handlers of ``/agents/{name}`` or ``/teams/{name}``."""
    noun = "Agent" if kind == "agents" else "Team"

    def spec(dash: Dashboard, request: web.Request) -> tuple[str, FormSpec]:
        name, fields = _entity(dash, request, kind)
        form = FormSpec(
            f"{noun} {name}", "/agents", f"/{kind}/{quote(name)}", f"{kind}.{name}", fields, name
        )
        return name, form

    async def show(dash: Dashboard, request: web.Request) -> web.Response:
        return _form_page(dash, request, spec(dash, request)[1])

    async def save(dash: Dashboard, request: web.Request) -> web.Response:
        return await _save(dash, request, spec(dash, request)[1])

    async def delete(dash: Dashboard, request: web.Request) -> web.Response:
        name, shown = spec(dash, request)
        form = await dash.form(request)
        try:
            with edit_config(dash.config_path) as doc:
                check_fresh(doc, form)
                doc.unset(f"{kind}.{name}")
                doc.save()
        except ConfigError as exc:
            return _form_page(dash, request, shown, {"": str(exc)}, status=422)
        raise web.HTTPSeeOther("/agents?saved=1")

    return show, save, delete


# -- memory settings ------------------------------------------------------------------------------


def _memory_spec(dash: Dashboard) -> FormSpec:
    """The memory settings form, saying which embedder is in effect and what the default is
    here, in the words ``mindroom doctor`` uses (the default depends on whether the embeddings
    extra is installed)."""
    from mindroom.adapters.embeddings.select import embedder_in_force

    default = embedder_in_force(None).split(" (", 1)[0]
    fields = [
        dataclasses.replace(f, hint=default) if f.key == "embedder.provider" else f
        for f in MEMORY_FIELDS
    ]
    note = f"Memory search in effect: {embedder_in_force(dash.host.config.memory_embedder)}."
    return FormSpec(
        "Memory settings", "/memory/settings", "/memory/settings", "memory", fields, note=note
    )


async def memory_page(dash: Dashboard, request: web.Request) -> web.Response:
    return _form_page(dash, request, _memory_spec(dash))


async def save_memory(dash: Dashboard, request: web.Request) -> web.Response:
    return await _save(dash, request, _memory_spec(dash))


def held(handler: Any) -> Any:
    """``handler`` (a memory write) as work on people's behalf: it holds the bot's erasure
    gate, so it never overlaps a forget-me (:mod:`mindroom.people.erasure`)."""

    async def holding(dash: Dashboard, request: web.Request) -> web.StreamResponse:
        async with dash.host.runtime.gate.working():
            response: web.StreamResponse = await handler(dash, request)
            return response

    return holding


def binder(dash: Dashboard) -> Any:
    """``bind(handler)``: the aiohttp handler calling ``handler(dash, request)``."""

    def bind(handler: Any) -> Any:
        async def bound(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(dash, request)
            except ConfigError as exc:  # config.yaml broken on disk: say so, not a 500
                return page(
                    dash,
                    "unreadable_config.html",
                    "config.yaml cannot be read",
                    "",
                    503,
                    problem=str(exc),
                )

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
