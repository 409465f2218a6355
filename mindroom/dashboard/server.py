"""The web dashboard ``mindroom run`` serves: status, agents, memory settings.

An aiohttp application on the bot's own event loop (no second process), listening on
127.0.0.1 only (:mod:`mindroom.dashboard.access` for the token, cookie and CSRF rules).
Pages are plain server-rendered HTML; the status page refreshes itself from ``/api/status``
every two seconds with one small script (the content security policy allows no other).
Nothing shown carries a secret: config values are shown as the file has them, secrets
redacted; log lines pass :func:`mindroom.redact.redact_text`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from mindroom.adapters.matrix.appservice import Appservice
from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.cluster.share import Cluster
from mindroom.config.schema import Config
from mindroom.dashboard import pages
from mindroom.dashboard.access import LOOPBACK, Access, dashboard_token, dashboard_url
from mindroom.dashboard.ledger_reads import ledger_rows
from mindroom.dashboard.memory_pages import add_memory_routes
from mindroom.dashboard.ops import account_states
from mindroom.dashboard.person import forget_port, record_port
from mindroom.dashboard.person_pages import add_person_routes
from mindroom.memory.registry import MemoryRegistry
from mindroom.redact import redact_text, without_database_detail

if TYPE_CHECKING:
    from mindroom.adapters.agno.runner import AgentRuntime

logger = logging.getLogger(__name__)

STATIC = Path(__file__).parent / "static"
_ANSWERS_SHOWN = 20
_PROBLEMS_KEPT = 50
PORTS_TRIED = 20  # a taken port: the next free one of this many after it


class HealthHost(Protocol):
    """What ``/healthz`` and ``/metrics`` read of the bot, read-only; they are served from
    before :meth:`mindroom.app.bot.Bot.start`, so ``running`` comes first: while it is False
    the rest is not asked (``cluster`` and ``appservice`` are decided at start)."""

    @property
    def running(self) -> bool: ...  # False: still starting (or stopped)
    @property
    def config(self) -> Config: ...
    @property
    def router(self) -> MatrixAccount | None: ...  # None: another process runs it
    @property
    def agents(self) -> dict[str, MatrixAccount]: ...
    @property
    def appservice(self) -> Appservice | None: ...  # None: not in appservice mode
    @property
    def cluster(self) -> Cluster | None: ...  # None: this process runs alone


class DashboardHost(HealthHost, Protocol):
    """What the dashboard reads of the running bot (served once it runs), read-only."""

    @property
    def memories(self) -> MemoryRegistry: ...
    @property
    def runtime(self) -> AgentRuntime: ...  # its session stores (let go before forget-me)
    @property
    def room_ids(self) -> dict[str, str]: ...

    def room_agents(self, room_id: str) -> list[str]: ...


DM_LABEL = "DM with "


def room_labels(host: DashboardHost) -> dict[str, str]:
    """A readable name for each room the accounts here are in: its name in the config, or for
    a direct chat (one person and one of mindroom's accounts) "DM with" the person's display
    name and Matrix ID; other rooms are left out (shown by their ID)."""
    accounts = [a for a in (host.router, *host.agents.values()) if a is not None]
    own = {a.user_id for a in accounts}
    labels = {room_id: name for name, room_id in host.room_ids.items()}
    for account in accounts:
        for room_id in account.joined_rooms() - labels.keys():
            members = account.room_members(room_id) | {account.user_id}
            people = members - own
            if len(people) != 1 or len(members & own) != 1:
                continue
            [person] = people
            shown = account.display_name(room_id, person)
            who = f"{shown} ({person})" if shown and shown != person else person
            labels[room_id] = f"{DM_LABEL}{who}"
    return labels


class _Problems(logging.Handler):
    """The latest warnings and errors of mindroom's loggers, for the status page."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: collections.deque[dict[str, str]] = collections.deque(maxlen=_PROBLEMS_KEPT)

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):  # a log handler must never raise
            self.records.appendleft(
                {
                    "when": time.strftime("%H:%M:%S", time.localtime(record.created)),
                    "level": record.levelname,
                    "logger": record.name,
                    "message": redact_text(without_database_detail(record.getMessage()))[:500],
                }
            )


class Dashboard:
    """The dashboard of one running bot."""

    def __init__(self, host: DashboardHost, config_path: Path, data_dir: Path, port: int) -> None:
        self.host = host
        self.config_path = config_path
        self.data_dir = data_dir
        self.port = port
        self.token = dashboard_token(data_dir)
        self.access = Access(self.token, port, host.config.dashboard.public_url)
        self.problems = _Problems()
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        """The URL that opens it, token included."""
        return dashboard_url(self.port, self.token)

    def app(self) -> web.Application:
        """The aiohttp application (routes and the access middleware)."""
        app = web.Application(middlewares=[self.access.middleware], client_max_size=1 << 20)
        app.router.add_get("/api/status", self._status_json)
        app.router.add_get("/static/{name}", self.static)
        pages.add_routes(app, self)
        add_memory_routes(app, pages.binder(self))
        add_person_routes(app, pages.binder(self))
        return app

    async def start(self) -> bool:
        """Listen on 127.0.0.1, on the configured port or, when that is taken, the first free
        one of the next :data:`PORTS_TRIED` (said in the log; :attr:`port` and :attr:`url` are
        then the one it listens on). False (logged) when all are taken: the bot runs on."""
        runner = web.AppRunner(self.app(), access_log=None)
        await runner.setup()
        wanted, problem = self.port, ""
        for port in range(wanted, min(wanted + PORTS_TRIED, 65535) + 1):
            site = web.TCPSite(runner, LOOPBACK, port)
            try:
                await site.start()
            except OSError as exc:
                await site.stop()  # not listening: only its registration goes
                problem = problem or exc.strerror or str(exc)
                continue
            self.port = port
            break
        else:
            await runner.cleanup()
            logger.warning(
                "the dashboard cannot listen on %s:%d nor the next %d ports (%s); set "
                "dashboard.port or run with --dashboard-port",
                LOOPBACK,
                wanted,
                PORTS_TRIED,
                problem,
            )
            return False
        self.access.listening_on(self.port)
        self._runner = runner
        record_port(self.data_dir, self.port)  # for `dashboard url` and !memory's links
        logging.getLogger("mindroom").addHandler(self.problems)
        if self.port != wanted:
            logger.warning(
                "port %d is taken; the dashboard is on %d (`mindroom dashboard url` prints "
                "its address)",
                wanted,
                self.port,
            )
        else:
            logger.info(
                "dashboard on http://%s:%d/ (`mindroom dashboard url` prints its address)",
                LOOPBACK,
                self.port,
            )
        return True

    async def stop(self) -> None:
        logging.getLogger("mindroom").removeHandler(self.problems)
        if self._runner is not None:
            forget_port(self.data_dir)
            await self._runner.cleanup()
            self._runner = None

    # -- what every page needs --------------------------------------------------------------------

    @property
    def csrf(self) -> str:
        return self.access.csrf

    async def form(self, request: web.Request) -> dict[str, str]:
        """The posted form, CSRF-checked, as plain strings."""
        posted = await self.access.check_form(request)
        return {k: v for k, v in posted.items() if isinstance(v, str)}

    async def static(self, request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        path = STATIC / name
        if "/" in name or name.startswith(".") or not path.is_file():
            raise web.HTTPNotFound()
        kinds = {".css": "text/css", ".js": "text/javascript"}
        return web.Response(
            body=path.read_bytes(), content_type=kinds.get(path.suffix, "text/plain")
        )

    # -- live status ------------------------------------------------------------------------------

    async def status(self) -> dict[str, Any]:
        """Accounts and their sync state, rooms, the last answers, the latest problems."""
        accounts = account_states(self.host)
        names = room_labels(self.host)  # read on the loop: the accounts' sync changes them
        configured = set(self.host.room_ids.values())
        rooms = [
            {"name": name, "room_id": room_id, "agents": self.host.room_agents(room_id)}
            for name, room_id in sorted(self.host.room_ids.items())
        ] + [
            {"name": name, "room_id": room_id, "agents": self.host.room_agents(room_id)}
            for room_id, name in sorted(names.items(), key=lambda item: item[1])
            if room_id not in configured and name.startswith(DM_LABEL)
        ]
        return {
            "accounts": accounts,
            "rooms": rooms,
            "answers": await asyncio.to_thread(self._answers, names),  # the ledger, off the loop
            "problems": list(self.problems.records),
        }

    def _answers(self, names: dict[str, str]) -> list[dict[str, Any]]:
        """The last handled messages: who asked where, who answered (as the ledger recorded
        it when the answer finished), the outcome and the time from claim to done."""
        database = self.host.config.storage.database
        [rows] = ledger_rows(
            self.data_dir,
            (
                "SELECT room_id, responders, source, status, claimed_at, done_at, answered_by"
                " FROM handled ORDER BY claimed_at DESC LIMIT ?",
                (_ANSWERS_SHOWN,),
            ),
            database=database,
        )
        found = []
        for room_id, responders, source, status, claimed, done, answered_by in rows:
            found.append(
                {
                    "when": time.strftime("%H:%M:%S", time.localtime(claimed)),
                    "room": names.get(room_id, room_id),
                    "sender": (json.loads(source) or {}).get("sender", ""),
                    # rows finished before answered_by was recorded: whom a hand-off named
                    "responders": json.loads(answered_by or responders),
                    "status": status,
                    "latency_ms": None if done is None else round((done - claimed) * 1000),
                }
            )
        return found

    async def _status_json(self, request: web.Request) -> web.Response:
        return web.json_response(await self.status())
