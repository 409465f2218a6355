"""The schedule's database, ``mindroom_data/maintenance.db`` (or ``storage.database``): jobs,
leases and the run audit.

``maintenance_jobs`` holds each job (from config.yaml, see
:mod:`mindroom.memory.jobs.maintenance.jobs`)
with its ``next_due_at`` and last run; ``maintenance_runs`` one row per run (``running``,
``completed`` or ``failed``, with its stats, e.g. ``model_calls``, and its error). Timestamps are
UTC ISO 8601 text (``2026-03-02T10:00:00+00:00``, to the second).

Never two runs of one job at once, across processes too: a run starts by claiming the job's
lease in one write transaction (SQLite's ``BEGIN IMMEDIATE`` lets one writer in at a time;
on PostgreSQL an advisory lock does the same, :class:`mindroom.store.database.SyncDatabase`) that
checks
the job is due and its lease free or expired, records the run and writes the lease (owner,
run, expiry). The runner extends the lease while it works (:meth:`MaintenanceStore.heartbeat`)
and clears it when the run ends. A runner that died leaves a lease that expires; the next claim
or :meth:`MaintenanceStore.reap` marks its ``running`` run ``failed`` and the job, still due,
runs again. Every method opens its own short connection, so any thread (or process) may call it.

Control state, not user data: deleting the file forgets the audit and the due times (the jobs
come back from config.yaml, due at their next window).
"""

from __future__ import annotations

import contextlib
import json
import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any

from mindroom.config.maintenance_schema import MaintenanceJobConfig
from mindroom.errors import ConfigError
from mindroom.memory.jobs.maintenance.jobs import (
    SCHEDULE_FIELDS,
    Job,
    config_values,
    merge,
    schedule_of,
    validate,
)
from mindroom.memory.jobs.maintenance.schedule import due_after_run, first_due
from mindroom.store.database import SyncConnection, SyncDatabase, statements
from mindroom.store.migrations import open_store
from mindroom.store.schemas import MAINTENANCE, MAINTENANCE_SCRIPT

logger = logging.getLogger(__name__)

_WRITE_LOCK = 0x6D61696E  # "main": the advisory lock of the schedule's writes on PostgreSQL

_COLUMNS = {  # MaintenanceJobConfig field -> column (llm_command lives in metadata_json)
    "type": "job_type",
    "mode": "mode",
    "cadence": "cadence",
    "interval_minutes": "interval_minutes",
    "weekday": "weekday",
    "window_start": "window_start",
    "window_end": "window_end",
    "enabled": "enabled",
}


def _postgres_schema() -> str:
    """The schedule's tables in PostgreSQL: the SQLite schema with a ``seq`` column."""
    return MAINTENANCE_SCRIPT.replace(
        "error_message TEXT\n", "error_message TEXT,\n    seq BIGSERIAL\n"
    )


def iso(moment: datetime) -> str:
    """``moment`` as the stored text: UTC ISO 8601 to the second."""
    return moment.astimezone(UTC).isoformat(timespec="seconds")


def _time(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


@dataclass(frozen=True)
class Run:
    """One row of ``maintenance_runs``."""

    id: str
    job_id: str
    owner: str
    status: str
    started_at: datetime
    completed_at: datetime | None
    summary: str | None
    stats: dict[str, Any]
    error_message: str | None


@dataclass(frozen=True)
class Claim:
    """The outcome of :meth:`MaintenanceStore.claim`: the run started, or why not (``reason``)."""

    job: Job
    run_id: str | None
    reason: str = ""
    started_at: datetime | None = None


class MaintenanceStore:
    """Synchronous access to the schedule (call it from a worker thread in async code):
    ``maintenance.db``, or ``storage.database`` (PostgreSQL) when ``target`` is its URL."""

    def __init__(self, target: Path | str) -> None:
        self.target = target
        self.path = target if isinstance(target, Path) else None  # the SQLite file, if one
        self.db = SyncDatabase(target, _WRITE_LOCK)
        if isinstance(target, Path):  # WAL, and the versioned schema (mindroom.store.migrations)
            with contextlib.closing(open_store(target, MAINTENANCE)):
                pass
        else:  # PostgreSQL has no rowid: the runs' insertion order is a column there
            self.db.script(statements(_postgres_schema()))
        sqlite = self.db.dialect == "sqlite"  # the same questions in each dialect
        self._order = "rowid" if sqlite else "seq"
        pg_calls = "CAST(CAST(r.stats_json AS json)->>'model_calls' AS NUMERIC)"
        self._calls = "json_extract(r.stats_json, '$.model_calls')" if sqlite else pg_calls

    def _connect(self) -> contextlib.AbstractContextManager[SyncConnection]:
        return self.db.read()

    def _write(self) -> contextlib.AbstractContextManager[SyncConnection]:
        """One transaction: no other writer of the schedule until it commits."""
        return self.db.write()

    @property
    def where(self) -> str:
        """The file, or PostgreSQL (never its URL: it may carry a password)."""
        return str(self.path) if self.path else "storage.database (PostgreSQL)"

    def close(self) -> None:
        self.db.close()

    # -- jobs ---------------------------------------------------------------------------------

    def jobs(self) -> list[Job]:
        """Every job, by name."""
        with self._connect() as db:
            rows = db.execute("SELECT * FROM maintenance_jobs ORDER BY id").fetchall()
        return [_job(row) for row in rows]

    def job(self, name: str) -> Job | None:
        """Job ``name``, or None."""
        with self._connect() as db:
            return _read_job(db, name)

    def earliest_due(self) -> datetime | None:
        """When an enabled job can run next (None: no enabled job): its ``next_due_at``, or
        for a job leased now, when the lease runs out (its holder may still finish first)."""
        with self._connect() as db:
            row = db.execute(
                "SELECT MIN(CASE WHEN lease_expires_at > next_due_at THEN lease_expires_at"
                " ELSE next_due_at END) AS due FROM maintenance_jobs WHERE enabled = 1"
            ).fetchone()
        return _time(row["due"])

    def apply_config(
        self, configured: Mapping[str, MaintenanceJobConfig], now: datetime, tz: tzinfo
    ) -> None:
        """Make the jobs what config.yaml says (see :mod:`mindroom.memory.jobs.maintenance.jobs`).

        A new job is due at its first window (:func:`first_due`); a job whose schedule changed,
        or that was just enabled, is due afresh, except that a job already overdue stays
        overdue (its catch-up is kept). A job no longer configured is disabled, its runs kept.
        """
        with self._write() as db:
            for name, job_config in configured.items():
                desired = config_values(job_config)
                old = _read_job(db, name)
                if old is None:
                    due = first_due(schedule_of(desired), now, tz)
                    _insert(db, name, desired, due, now)
                    logger.info("maintenance job %s added, due %s", name, iso(due))
                    continue
                effective, overrides = merge(desired, old.configured, old.overrides)
                self._update(db, old, effective, overrides, desired, now, tz)
            for old in [_job(row) for row in db.execute("SELECT * FROM maintenance_jobs")]:
                if old.name not in configured and old.in_config:
                    values = {**config_values(old.settings), "enabled": False}
                    self._update(db, old, values, {}, None, now, tz)
                    logger.info("maintenance job %s is no longer configured: disabled", old.name)

    def override(
        self,
        name: str,
        changes: Mapping[str, Any],
        now: datetime,
        tz: tzinfo,
        *,
        recompute: bool = False,
        reset: bool = False,
    ) -> Job:
        """``mindroom maintenance config``: set fields of job ``name`` until config.yaml
        changes them (``reset``: drop every override first); ``recompute``: due afresh."""
        with self._write() as db:
            old = _read_job(db, name)
            if old is None or not old.in_config:
                jobs = [_job(row) for row in db.execute("SELECT * FROM maintenance_jobs")]
                known = ", ".join(j.name for j in jobs if j.in_config) or "none"
                raise ConfigError(
                    f"no maintenance job {name!r} in config.yaml (memory.maintenance.jobs: {known})"
                )
            assert old.configured is not None
            overrides = {} if reset else dict(old.overrides)
            for key, value in changes.items():
                if old.configured.get(key) == value:
                    overrides.pop(key, None)  # back to config.yaml's value: no override
                else:
                    overrides[key] = value
            effective = {**old.configured, **overrides}
            validate(effective)  # refused with the schema's reason
            # a job switched on is due at its next window, not at once for its time off
            recompute = recompute or (bool(effective["enabled"]) and not old.enabled)
            self._update(db, old, effective, overrides, dict(old.configured), now, tz, recompute)
            job = _read_job(db, name)
        assert job is not None
        return job

    def _update(
        self,
        db: SyncConnection,
        old: Job,
        effective: Mapping[str, Any],
        overrides: Mapping[str, Any],
        configured: Mapping[str, Any] | None,
        now: datetime,
        tz: tzinfo,
        recompute: bool | None = None,
    ) -> None:
        """Write ``effective``; ``recompute`` None: due afresh when the schedule moved (and the
        job is not overdue) or the job was just enabled (config.yaml's changes)."""
        before = config_values(old.settings)
        moved = any(before.get(f) != effective.get(f) for f in SCHEDULE_FIELDS)
        enabled = bool(effective["enabled"]) and not old.enabled
        due = old.next_due_at
        if recompute is None:
            recompute = enabled or (moved and due > now)
        if recompute:
            due = first_due(schedule_of(effective), now, tz)
        meta = {"config": configured, "overrides": dict(overrides)}
        meta["llm_command"] = effective.get("llm_command")
        if before == dict(effective) and due == old.next_due_at and _meta(old) == meta:
            return
        assignments = ", ".join(f"{column} = ?" for column in _COLUMNS.values())
        db.execute(
            f"UPDATE maintenance_jobs SET {assignments}, next_due_at = ?, metadata_json = ?,"
            " updated_at = ? WHERE id = ?",
            (*_row_values(effective), iso(due), json.dumps(meta), iso(now), old.name),
        )

    # -- leases and runs ------------------------------------------------------------------------

    def claim(
        self, name: str, owner: str, now: datetime, lease_seconds: float, *, due: bool = True
    ) -> Claim:
        """Start a run of job ``name`` as ``owner`` when it is enabled, due (unless ``due`` is
        False: a run asked for now) and not leased."""
        with self._write() as db:
            job = _read_job(db, name)
            if job is None:
                raise KeyError(name)
            if not job.enabled:
                return Claim(job, None, "disabled")
            if due and job.next_due_at > now:
                return Claim(job, None, "not due")
            if job.lease_owner and job.lease_expires_at and job.lease_expires_at > now:
                until = iso(job.lease_expires_at)
                return Claim(job, None, f"running in {job.lease_owner} (lease until {until})")
            if job.lease_run_id:
                _fail_stale(db, job, now)
            run_id = uuid.uuid4().hex
            db.execute(
                "INSERT INTO maintenance_runs (id, job_id, owner, status, started_at, stats_json)"
                " VALUES (?, ?, ?, 'running', ?, '{}')",
                (run_id, name, owner, iso(now)),
            )
            db.execute(
                "UPDATE maintenance_jobs SET lease_owner = ?, lease_run_id = ?,"
                " lease_expires_at = ? WHERE id = ?",
                (owner, run_id, iso(now + timedelta(seconds=lease_seconds)), name),
            )
            return Claim(job, run_id, started_at=now)

    def heartbeat(self, claim: Claim, owner: str, now: datetime, lease_seconds: float) -> bool:
        """Extend the lease of ``claim``; False when it is no longer ``owner``'s (taken over)."""
        with self._write() as db:
            cursor = db.execute(
                "UPDATE maintenance_jobs SET lease_expires_at = ?"
                " WHERE id = ? AND lease_owner = ? AND lease_run_id = ?",
                (iso(now + timedelta(seconds=lease_seconds)), claim.job.name, owner, claim.run_id),
            )
            return cursor.rowcount == 1

    def finish(
        self,
        claim: Claim,
        owner: str,
        now: datetime,
        tz: tzinfo,
        *,
        status: str,
        summary: str | None = None,
        stats: Mapping[str, Any] | None = None,
        error: str | None = None,
        advance: bool = True,
    ) -> None:
        """Record how the run of ``claim`` ended and release its lease.

        ``advance``: the job is due next at :func:`due_after_run` of the run's start; without,
        it stays due (an interrupted run: shutdown, a lost lease). A runner whose lease was
        taken over records its run and leaves the job to the new holder.
        """
        name, started = claim.job.name, claim.started_at or now
        with self._write() as db:
            job = _read_job(db, name)
            held = job is not None and (job.lease_owner, job.lease_run_id) == (owner, claim.run_id)
            if not held:
                error = f"{error + '; ' if error else ''}its lease was taken over meanwhile"
            db.execute(
                "UPDATE maintenance_runs SET status = ?, completed_at = ?, summary = ?,"
                " stats_json = ?, error_message = ? WHERE id = ?",
                (status, iso(now), summary, json.dumps(dict(stats or {})), error, claim.run_id),
            )
            if not held or job is None:
                return
            due = due_after_run(job.schedule, started, tz) if advance else job.next_due_at
            db.execute(
                "UPDATE maintenance_jobs SET lease_owner = NULL, lease_run_id = NULL,"
                " lease_expires_at = NULL, last_run_at = ?, last_status = ?, last_summary = ?,"
                " next_due_at = ?, updated_at = ? WHERE id = ?",
                (iso(started), status, summary or error, iso(due), iso(now), name),
            )

    def reap(self, now: datetime) -> int:
        """Mark the run of every expired lease ``failed`` and free the lease; returns how many."""
        with self._write() as db:
            rows = db.execute(
                "SELECT * FROM maintenance_jobs WHERE lease_run_id IS NOT NULL"
                " AND lease_expires_at <= ?",
                (iso(now),),
            ).fetchall()
            for row in rows:
                job = _job(row)
                _fail_stale(db, job, now)
                db.execute(
                    "UPDATE maintenance_jobs SET lease_owner = NULL, lease_run_id = NULL,"
                    " lease_expires_at = NULL, last_status = 'failed', updated_at = ? WHERE id = ?",
                    (iso(now), job.name),
                )
            return len(rows)

    def runs(self, name: str | None = None, limit: int = 100) -> list[Run]:
        """The latest runs (of job ``name``), oldest first."""
        where, args = ("WHERE job_id = ?", (name,)) if name else ("", ())
        with self._connect() as db:
            rows = db.execute(
                f"SELECT * FROM maintenance_runs {where} ORDER BY started_at DESC,"
                f" {self._order} DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
        return [_run(row) for row in reversed(rows)]

    def model_calls_since(self, job_type: str, since: datetime) -> int:
        """``stats.model_calls`` summed over the runs of every ``job_type`` job since ``since``
        (the day budget is shared by the jobs of one type)."""
        with self._connect() as db:
            row = db.execute(
                f"SELECT COALESCE(SUM({self._calls}), 0) AS calls"
                " FROM maintenance_runs r JOIN maintenance_jobs j ON r.job_id = j.id"
                " WHERE j.job_type = ? AND r.started_at >= ?",
                (job_type, iso(since)),
            ).fetchone()
        return int(row["calls"])


def _row_values(values: Mapping[str, Any]) -> tuple[Any, ...]:
    return tuple(int(values[f]) if f == "enabled" else values.get(f) for f in _COLUMNS)


def _insert(
    db: SyncConnection, name: str, values: Mapping[str, Any], due: datetime, now: datetime
) -> None:
    columns = ", ".join(_COLUMNS.values())
    meta = {"config": dict(values), "overrides": {}, "llm_command": values.get("llm_command")}
    db.execute(
        f"INSERT INTO maintenance_jobs (id, {columns}, next_due_at, metadata_json, created_at,"
        f" updated_at) VALUES (?, {', '.join('?' * len(_COLUMNS))}, ?, ?, ?, ?)",
        (name, *_row_values(values), iso(due), json.dumps(meta), iso(now), iso(now)),
    )


def _fail_stale(db: SyncConnection, job: Job, now: datetime) -> None:
    """The run of ``job``'s expired lease: its runner stopped (a crash, a kill) unfinished."""
    expired = iso(job.lease_expires_at) if job.lease_expires_at else "?"
    db.execute(
        "UPDATE maintenance_runs SET status = 'failed', completed_at = ?, error_message = ?"
        " WHERE id = ? AND status = 'running'",
        (
            iso(now),
            f"its runner {job.lease_owner} stopped without finishing (lease expired {expired})",
            job.lease_run_id,
        ),
    )
    logger.warning(
        "maintenance job %s: the run of %s was abandoned (lease expired %s)",
        job.name,
        job.lease_owner,
        expired,
    )


def _meta(job: Job) -> dict[str, Any]:
    return {
        "config": None if job.configured is None else dict(job.configured),
        "overrides": dict(job.overrides),
        "llm_command": job.llm_command,
    }


def _read_job(db: SyncConnection, name: str) -> Job | None:
    row = db.execute("SELECT * FROM maintenance_jobs WHERE id = ?", (name,)).fetchone()
    return _job(row) if row else None


def _job(row: Any) -> Job:
    meta = json.loads(row["metadata_json"])
    values = {field: row[column] for field, column in _COLUMNS.items()}
    values["enabled"] = bool(values["enabled"])
    values["llm_command"] = meta.get("llm_command")
    due = _time(row["next_due_at"])
    assert due is not None
    return Job(
        name=row["id"],
        settings=MaintenanceJobConfig.model_construct(**values),
        next_due_at=due,
        last_run_at=_time(row["last_run_at"]),
        last_status=row["last_status"],
        last_summary=row["last_summary"],
        configured=meta.get("config"),
        overrides=meta.get("overrides") or {},
        lease_owner=row["lease_owner"],
        lease_run_id=row["lease_run_id"],
        lease_expires_at=_time(row["lease_expires_at"]),
    )


def _run(row: Any) -> Run:
    started = _time(row["started_at"])
    assert started is not None
    return Run(
        id=row["id"],
        job_id=row["job_id"],
        owner=row["owner"],
        status=row["status"],
        started_at=started,
        completed_at=_time(row["completed_at"]),
        summary=row["summary"],
        stats=json.loads(row["stats_json"]),
        error_message=row["error_message"],
    )
