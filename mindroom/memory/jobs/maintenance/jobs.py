"""A job as the schedule keeps it, and how config.yaml and ``maintenance config`` combine.

config.yaml (``memory.maintenance.jobs``) defines the jobs. ``mindroom maintenance config``
overrides a field of one job (its window, enabled) in the database, and the override holds
until config.yaml changes that same field: the database remembers what config.yaml said when
it was last applied, so a restart or a reload of an unchanged config.yaml keeps the override,
while an edit of that field in config.yaml replaces it. Pure functions over plain data; the
database is :mod:`mindroom.memory.jobs.maintenance.store`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from mindroom.config.maintenance_schema import MaintenanceJobConfig
from mindroom.errors import ConfigError
from mindroom.memory.jobs.maintenance.schedule import Schedule

# The fields a job takes from config.yaml (MaintenanceJobConfig's, by name)
FIELDS = (
    "type",
    "mode",
    "cadence",
    "interval_minutes",
    "weekday",
    "window_start",
    "window_end",
    "enabled",
    "llm_command",
)
SCHEDULE_FIELDS = ("cadence", "interval_minutes", "weekday", "window_start", "window_end")


def config_values(job: MaintenanceJobConfig) -> dict[str, Any]:
    """The fields of a configured job as plain JSON values."""
    return job.model_dump(mode="json", include=set(FIELDS))


def merge(
    desired: Mapping[str, Any], last_config: Mapping[str, Any] | None, overrides: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(effective values, overrides still in force)`` after applying config.yaml's ``desired``.

    An override stays while config.yaml's value of its field is what it was when the override
    was made (``last_config``); ``last_config`` None (a new job, or one that was removed from
    config.yaml and is back) drops every override. An override that no longer fits the rest
    (config.yaml removed the window it moved) is dropped too.
    """
    kept = {
        name: value
        for name, value in overrides.items()
        if last_config is not None and last_config.get(name) == desired.get(name)
    }
    effective = {**desired, **kept}
    if kept:
        try:
            validate(effective)
        except ConfigError:
            return dict(desired), {}
    return effective, kept


def validate(values: Mapping[str, Any]) -> MaintenanceJobConfig:
    """``values`` as a job config; ConfigError with the schema's reason when they do not fit."""
    try:
        return MaintenanceJobConfig.model_validate(dict(values))
    except ValidationError as exc:
        reasons = "; ".join(error["msg"].removeprefix("Value error, ") for error in exc.errors())
        raise ConfigError(reasons) from None


def schedule_of(values: Mapping[str, Any]) -> Schedule:
    """The :class:`Schedule` of a job's effective values."""
    return Schedule(
        values["cadence"],
        values.get("interval_minutes"),
        values.get("weekday"),
        values.get("window_start"),
        values.get("window_end"),
    )


@dataclass(frozen=True)
class Job:
    """One job of ``maintenance_jobs``: its effective settings and its state.

    ``settings`` is what the job runs with (config.yaml plus the overrides in ``overrides``);
    ``configured`` is what config.yaml said when last applied (None: no longer in config.yaml,
    so the job is disabled and kept for its runs).
    """

    name: str
    settings: MaintenanceJobConfig
    next_due_at: datetime
    last_run_at: datetime | None = None
    last_status: str | None = None
    last_summary: str | None = None
    configured: Mapping[str, Any] | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    lease_owner: str | None = None
    lease_run_id: str | None = None
    lease_expires_at: datetime | None = None

    @property
    def job_type(self) -> str:
        return self.settings.type

    @property
    def mode(self) -> str:
        return self.settings.mode

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    @property
    def llm_command(self) -> list[str] | None:
        return self.settings.llm_command

    @property
    def in_config(self) -> bool:
        return self.configured is not None

    @property
    def schedule(self) -> Schedule:
        return schedule_of(self.settings.model_dump())
