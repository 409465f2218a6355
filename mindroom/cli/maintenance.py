"""``mindroom maintenance status | tick | config JOB | daemon``: the schedule from the terminal.

Thin: every action first applies config.yaml's jobs to ``mindroom_data/maintenance.db`` (so
what it shows or runs is what config.yaml says now), then reads or changes the database. It
works beside a running bot: ``tick`` and the ``daemon`` claim a job's lease like the bot does,
so a job never runs twice at once. Printing happens here, never in the rest of the package.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any

import click

from mindroom.cli.options import Args, Invocation, invocation, switch, with_storage
from mindroom.config import Config, load_config
from mindroom.config.maintenance_schema import MaintenanceConfig
from mindroom.errors import ConfigError
from mindroom.memory.jobs.maintenance.jobs import Job
from mindroom.memory.jobs.maintenance.loop import MaintenanceLoop, schedule_target
from mindroom.memory.jobs.maintenance.runner import MaintenanceRunner, utc_now
from mindroom.memory.jobs.maintenance.schedule import zone
from mindroom.memory.jobs.maintenance.store import MaintenanceStore

logger = logging.getLogger(__name__)

_DAEMON_GRACE_S = 10.0  # a running job's time to reach its next heartbeat at Ctrl-C / SIGTERM


@click.group(
    "maintenance", help="scheduled memory jobs (consolidation): status, run now, configure"
)
def group() -> None:
    """``mindroom maintenance``."""


class _Seconds(click.ParamType):
    """A number of seconds above 0."""

    name = "seconds"

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if seconds <= 0:
            self.fail(f"{value} is not a number of seconds above 0", param, ctx)
        return seconds


@with_storage
@group.command("status", help="each job: enabled, schedule, next due (local and UTC), last run")
def status(**_: object) -> Invocation:
    """``mindroom maintenance status``."""
    return invocation(run_status)


@with_storage
@group.command("tick", help="run the jobs that are due now, then exit")
@click.option(
    "--job", metavar="JOB", help="run this job now, due or not (never beside a run of it)"
)
def tick(**_: object) -> Invocation:
    """``mindroom maintenance tick``."""
    return invocation(run_tick)


@with_storage
@group.command(
    "config",
    help="change one job's window or switch it on or off "
    "(kept until config.yaml changes that field)\n\n"
    "JOB: job name (memory.maintenance.jobs)",
)
@click.argument("job")
@click.option("--window-start", metavar="HH:MM", help="window start, or 'none'")
@click.option("--window-end", metavar="HH:MM", help="window end, or 'none'")
@click.option("--reset", is_flag=True, help="back to config.yaml's values")
@click.option("--recompute-next", is_flag=True, help="due time afresh from the schedule, from now")
def configure(**_: object) -> Invocation:
    """``mindroom maintenance config``."""
    return invocation(run_config)


configure.params.extend(switch("--enable", "--disable", "enabled", "switch the job on or off"))


@with_storage
@group.command("daemon", help="tick until Ctrl-C or SIGTERM (for when the bot is not running)")
@click.option(
    "--interval-seconds",
    type=_Seconds(),
    help="seconds between ticks (default memory.maintenance.tick_seconds)",
)
def daemon(**_: object) -> Invocation:
    """``mindroom maintenance daemon``."""
    return invocation(run_daemon)


def _open(args: Args) -> tuple[Config, Path, Path, MaintenanceStore, tzinfo]:
    """Config, config file, storage root, the database with config.yaml's jobs applied, and
    the zone of the windows."""
    config_path = Path(args.config).resolve()
    storage = Path(args.storage).resolve() if args.storage else config_path.parent
    config = load_config(config_path)
    tz = zone(config.memory.maintenance.timezone)
    store = MaintenanceStore(schedule_target(storage, config.storage.database))
    store.apply_config(config.memory.maintenance.jobs, utc_now(), tz)
    return config, config_path, storage, store, tz


def run_status(args: Args) -> int:
    """``mindroom maintenance status``."""
    config, _, _, store, tz = _open(args)
    print(render_status(store, config.memory.maintenance, tz, utc_now()))
    return 0


async def run_tick(args: Args) -> int:
    """``mindroom maintenance tick``: 1 when a run failed."""
    from mindroom.memory.registry import MemoryRegistry

    config, config_path, storage, store, tz = _open(args)
    if not config.memory.maintenance.enabled:
        print("maintenance is off (memory.maintenance.enabled: false): nothing run")
        return 0
    job = getattr(args, "job", None)
    if job is not None and store.job(job) is None and job not in config.memory.maintenance.jobs:
        known = ", ".join(sorted(config.memory.maintenance.jobs)) or "none"
        print(f"no maintenance job {job!r} (jobs: {known})")
        return 2
    registry = MemoryRegistry(config, storage, config_path.parent)
    try:
        runner = MaintenanceRunner(store, storage, lambda: config, registry=registry)
        results = [await runner.run_now(job)] if job is not None else await runner.tick()
    finally:
        registry.close()
    for result in results:
        print(f"{result.job}: {result.status}: {result.summary}")
    if not results:
        due = [job for job in store.jobs() if job.enabled]
        first = min(due, key=lambda job: job.next_due_at, default=None)
        later = f"; next: {first.name} at {_when(first.next_due_at, tz)}" if first else ""
        print(f"nothing due{later}")
    return 1 if any(result.status == "failed" for result in results) else 0


def run_config(args: Args) -> int:
    """``mindroom maintenance config JOB ...``."""
    changes: dict[str, Any] = {}
    for field in ("window_start", "window_end"):
        value = getattr(args, field)
        if value is not None:
            changes[field] = None if value.lower() == "none" else value
    if args.enabled is not None:
        changes["enabled"] = args.enabled
    if not (changes or args.reset or args.recompute_next):
        raise ConfigError(
            "nothing to change: give --window-start, --window-end, --enable, --disable, "
            "--reset or --recompute-next"
        )
    _, _, _, store, tz = _open(args)
    before = store.job(args.job)
    job = store.override(
        args.job, changes, utc_now(), tz, recompute=args.recompute_next, reset=args.reset
    )
    print(render_job(job, tz, utc_now()))
    moved = before is not None and before.schedule != job.schedule
    if moved and not args.recompute_next:
        print(
            "  (the next due time is unchanged; add --recompute-next to take it from the new "
            "schedule)"
        )
    return 0


class _ConfigFile:
    """config.yaml, read again when it changes (the last valid one is kept on an error)."""

    def __init__(self, path: Path, on_reload: Any) -> None:
        self.path = path
        self.on_reload = on_reload
        self.config = load_config(path)
        self._stamp = self._mtime()

    def _mtime(self) -> float:
        try:
            return self.path.stat().st_mtime
        except OSError:
            return 0.0

    def __call__(self) -> Config:
        stamp = self._mtime()
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self.config = load_config(self.path)
                self.on_reload(self.config)
            except ConfigError as exc:
                logger.warning("config.yaml not reloaded (keeping the last valid one): %s", exc)
        return self.config


async def run_daemon(args: Args) -> int:
    """``mindroom maintenance daemon``: ticks until Ctrl-C or SIGTERM, then ends cleanly."""
    from mindroom.memory.registry import MemoryRegistry
    from mindroom.tasks import TaskSupervisor

    config, config_path, storage, _, _ = _open(args)
    registry = MemoryRegistry(config, storage, config_path.parent)
    source = _ConfigFile(config_path, lambda c: setattr(registry, "config", c))
    loop = MaintenanceLoop(source, storage, registry, interval_seconds=args.interval_seconds)
    stop = asyncio.Event()
    events = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        events.add_signal_handler(sig, stop.set)
    tasks = TaskSupervisor()
    try:
        loop.start(tasks)
        every = args.interval_seconds or config.memory.maintenance.tick_seconds
        state = "" if config.memory.maintenance.enabled else " (off in config.yaml: idle)"
        print(f"maintenance daemon for {storage}: a tick every {every:g} s{state}; Ctrl-C stops")
        await stop.wait()
        print("maintenance daemon: stopping")
    finally:
        await loop.stop(_DAEMON_GRACE_S)
        await tasks.stop(1.0)
        registry.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            events.remove_signal_handler(sig)
    return 0


# -- what status prints ---------------------------------------------------------------------


def _when(moment: datetime, tz: tzinfo) -> str:
    """``2026-03-27 10:00 CET (09:00 UTC)``: the zone's wall clock, then UTC."""
    local = moment.astimezone(tz).strftime("%Y-%m-%d %H:%M %Z")
    return f"{local} ({moment.strftime('%Y-%m-%d %H:%M')} UTC)"


def render_job(job: Job, tz: tzinfo, now: datetime) -> str:
    """One job's block of ``status``."""
    if job.enabled:
        state = "enabled"
    elif job.in_config:
        state = "disabled"
    else:
        state = "disabled (no longer in config.yaml; its runs are kept)"
    lines = [f"{job.name}  {state}  {job.job_type}, {job.mode}"]
    lines.append(f"  schedule  {job.schedule.describe()}")
    overdue = "  overdue: runs at the next tick" if job.enabled and job.next_due_at <= now else ""
    lines.append(f"  next due  {_when(job.next_due_at, tz)}{overdue}")
    if job.last_run_at is None:
        lines.append("  last run  never")
    else:
        said = f": {job.last_summary}" if job.last_summary else ""
        lines.append(f"  last run  {_when(job.last_run_at, tz)}  {job.last_status}{said}")
    if job.lease_owner and job.lease_expires_at and job.lease_expires_at > now:
        lines.append(
            f"  running   in {job.lease_owner} (lease until {_when(job.lease_expires_at, tz)})"
        )
    for field, value in job.overrides.items():
        configured = (job.configured or {}).get(field)
        lines.append(
            f"  override  {field} {_text(value)} (config.yaml: {_text(configured)}), "
            "until config.yaml changes it"
        )
    return "\n".join(lines)


def _text(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def render_status(
    store: MaintenanceStore, settings: MaintenanceConfig, tz: tzinfo, now: datetime
) -> str:
    """The whole ``status``: a header, then one block per job."""
    state = "on" if settings.enabled else "off (memory.maintenance.enabled: false)"
    zone_name = str(tz) if settings.timezone == "local" else settings.timezone
    header = (
        f"maintenance: {state}; windows in {zone_name} (timezone: {settings.timezone}); "
        f"a running bot checks every {settings.tick_seconds:g} s\n"
        f"database: {store.where}"
    )
    return "\n\n".join([header, *(render_job(job, tz, now) for job in store.jobs())])
