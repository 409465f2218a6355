"""``/healthz`` and ``/metrics`` for whoever runs mindroom (a container's probes, Prometheus).

Served by ``mindroom run`` when ``ops.port`` (or ``--ops-port``) is set, on ``ops.host``
(127.0.0.1 unless a container needs ``0.0.0.0``), apart from the dashboard and without its
token: they tell nothing but names and numbers.

- ``/healthz``: 200 while every account has synced within :data:`HEALTHY_SYNC_AGE_S` and
  none reports a failing sync; 503 otherwise (also while starting), with the reasons as JSON.
- ``/metrics``: :data:`mindroom.dashboard.metrics.METRICS` (replies by outcome, the reply-time
  histogram, model errors), then gauges read now: the flush queue's depth (dirty sessions)
  and the sessions whose flush keeps failing, and each account's sync age.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aiohttp import web

from mindroom.adapters.matrix.client import SYNC_TIMEOUT_MS
from mindroom.dashboard.ledger_reads import ledger_rows
from mindroom.dashboard.metrics import CONTENT_TYPE, METRICS, Gauge

if TYPE_CHECKING:
    from mindroom.dashboard.server import HealthHost

logger = logging.getLogger(__name__)

# a healthy account's long poll returns every 30 s at the latest: three of them missed is not
HEALTHY_SYNC_AGE_S = 3 * SYNC_TIMEOUT_MS / 1000


def account_states(host: HealthHost) -> list[dict[str, Any]]:
    """Each running account (the router first) and its sync state."""
    now = time.time()
    named = [("router", host.router)] if host.router else []
    return [
        {
            "name": name,
            "user_id": account.user_id,
            "device_id": account.client.device_id,
            "synced_ago_s": None if account.synced_at is None else now - account.synced_at,
            "problem": account.sync_problem,
            "rooms": len(account.joined_rooms()),
        }
        for name, account in [*named, *host.agents.items()]
        if account is not None
    ]


def health(host: HealthHost) -> tuple[bool, dict[str, Any]]:
    """Whether mindroom is healthy, and why (or why not)."""
    if not host.running:  # its cluster and appservice are not chosen yet
        problems = {"mindroom": "starting: no account is running yet"}
        return False, {"status": "failing", "problems": problems, "accounts": {}}
    accounts = account_states(host)
    problems = {}
    service = host.appservice  # appservice mode: no sync loops, the homeserver pushes events
    if service is not None and service.server is None:
        problems["appservice"] = "starting: the transaction endpoint is not listening yet"
    for state in accounts:
        age = state["synced_ago_s"]
        if service is not None:  # quiet rooms send nothing: well once its first sync was
            if age is None:
                problems[state["name"]] = "not synced yet"
        elif state["problem"]:
            problems[state["name"]] = f"sync failing: {state['problem']}"
        elif age is None or age > HEALTHY_SYNC_AGE_S:
            problems[state["name"]] = (
                "not synced yet" if age is None else f"last sync {age:.0f} s ago"
            )
    cluster = host.cluster
    if not accounts and (cluster is None or not cluster.serving):
        problems["mindroom"] = "starting: no account is running yet"
    body: dict[str, Any] = {
        "status": "failing" if problems else "ok",
        "problems": problems,
        "accounts": {s["name"]: s["synced_ago_s"] for s in accounts},
    }
    if cluster is not None:  # a process with none is a stand-by, and well
        body["leases"] = sorted(cluster.held)
    return not problems, body


def flush_gauges(data_dir: Path, database: str | None = None) -> list[Gauge]:
    """The flush queue, read from the ledger (read-only)."""
    [rows] = ledger_rows(
        data_dir,
        (
            "SELECT coalesce(sum(dirty), 0),"
            " coalesce(sum(CASE WHEN failures > 0 THEN 1 ELSE 0 END), 0) FROM flush_sessions",
            (),
        ),
        database=database,
    )
    dirty, failing = rows[0] if rows else (0, 0)
    return [
        Gauge(
            "mindroom_flush_queue_depth", "Sessions waiting for their memory flush.", [({}, dirty)]
        ),
        Gauge(
            "mindroom_flush_failing_sessions", "Sessions whose last flush failed.", [({}, failing)]
        ),
    ]


class OpsServer:
    """The health and metrics listener of one process."""

    def __init__(self, host: HealthHost, data_dir: Path, bind: str, port: int) -> None:
        self.host, self.data_dir, self.bind, self.port = host, data_dir, bind, port
        self._runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._metrics)
        return app

    async def start(self) -> bool:
        """Listen; False (logged) when the address is taken: the bot runs on."""
        runner = web.AppRunner(self.app(), access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.bind, self.port).start()
        except OSError as exc:
            await runner.cleanup()
            logger.warning(
                "/healthz and /metrics cannot listen on %s:%d (%s)",
                self.bind,
                self.port,
                exc.strerror,
            )
            return False
        self._runner = runner
        logger.info("/healthz and /metrics on http://%s:%d", self.bind, self.port)
        return True

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _healthz(self, request: web.Request) -> web.Response:
        healthy, body = health(self.host)
        return web.json_response(body, status=200 if healthy else 503)

    async def _metrics(self, request: web.Request) -> web.Response:
        ages: list[tuple[Mapping[str, str], float]] = [
            ({"account": s["name"]}, -1 if s["synced_ago_s"] is None else s["synced_ago_s"])
            for s in account_states(self.host)
        ]
        gauges = [
            *await asyncio.to_thread(
                flush_gauges, self.data_dir, self.host.config.storage.database
            ),
            Gauge(
                "mindroom_account_sync_age_seconds",
                "Seconds since each account's last sync (-1: not synced yet).",
                ages,
            ),
        ]
        return web.Response(
            text=METRICS.render(gauges),
            headers={"Content-Type": CONTENT_TYPE, "X-Content-Type-Options": "nosniff"},
        )
