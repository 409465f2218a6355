"""``memory.maintenance``: the jobs the bot runs on its own (memory consolidation) and when.

The schedule lives in SQLite (see :mod:`mindroom.memory.jobs.maintenance`); this section fills it.
A job
whose due time passed while the machine slept runs at the next chance, so there is no cron.
Jobs given here are merged over the defaults by name: writing one default job's
``enabled: false`` turns only that one off.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from mindroom.config.strict import Strict as _Strict

Weekday = Literal["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_CLOCK = re.compile(r"^([01]\d|2[0-3]):[0-5]\d$")


def check_zone(value: str) -> str:
    """``value`` when it names a timezone: ``local``, ``UTC`` or an IANA name."""
    if value in ("local", "UTC"):
        return value
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(value)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(
            f"unknown timezone {value!r} (use local, UTC or e.g. Europe/Berlin)"
        ) from exc
    return value


def clock(value: str | None) -> str | None:
    if value is not None and not _CLOCK.match(value):
        raise ValueError(f"{value!r} is not a time of day as HH:MM (00:00 to 23:59)")
    return value


class MaintenanceJobConfig(_Strict):
    """One scheduled job.

    ``mode`` ``light`` consolidates without any model call (exact and near-exact duplicates,
    promotion); ``deep`` adds the model's synthesis of mid-similarity pairs and its conflict
    checks, within the consolidation budget. ``window_start``/``window_end`` (HH:MM in
    ``memory.maintenance.timezone``) bound when a run may start; a run missed while the bot was
    down starts at once when it is back, and the next one is due at the next window.
    """

    type: Literal["consolidation", "lifecycle"] = Field(
        default="consolidation", description="`consolidation` or `lifecycle` (TTL)"
    )
    mode: Literal["light", "deep"] = Field(
        default="light",
        description="`light`: no model call; `deep`: the model synthesises and checks conflicts, "
        "within budget",
    )
    cadence: Literal["daily", "weekly", "interval"] = Field(
        default="daily", description="`daily`, `weekly` or `interval`"
    )
    interval_minutes: int | None = Field(
        default=None, ge=1, description="with cadence `interval`: minutes between runs"
    )
    weekday: Weekday | None = None  # weekly: the day of the window (default monday)
    window_start: str | None = Field(
        default=None,
        description="a run may start from this time of day (HH:MM, in "
        "`memory.maintenance.timezone`)",
    )
    window_end: str | None = Field(default=None, description="...until this one")
    enabled: bool = Field(default=True, description="`false` turns this job off")
    # a command that answers the model's prompts instead of the configured model: the prompt
    # on stdin, the answer on stdout (run without a shell)
    llm_command: list[str] | None = Field(default=None, min_length=1)

    @field_validator("window_start", "window_end")
    @classmethod
    def _time_of_day(cls, value: str | None) -> str | None:
        return clock(value)

    @model_validator(mode="after")
    def _cadence_fits(self) -> MaintenanceJobConfig:
        if self.cadence == "interval" and self.interval_minutes is None:
            raise ValueError("cadence 'interval' needs interval_minutes")
        if self.cadence != "interval" and self.interval_minutes is not None:
            raise ValueError(
                f"interval_minutes is only for cadence 'interval', not {self.cadence!r}"
            )
        if self.weekday is not None and self.cadence != "weekly":
            raise ValueError(f"weekday is only for cadence 'weekly', not {self.cadence!r}")
        if self.window_end is not None and self.window_start is None:
            raise ValueError("window_end needs a window_start")
        return self


DEFAULT_JOBS: dict[str, dict[str, Any]] = {
    # the light daily pass: duplicates and promotion, no model
    "consolidation_daily": {"mode": "light", "cadence": "daily", "window_start": "10:00"},
    # the weekly deep pass: the model merges paraphrases and checks conflicts, within budget
    "consolidation_weekly": {
        "mode": "deep",
        "cadence": "weekly",
        "weekday": "sunday",
        "window_start": "03:00",
    },
    # TTL: expire unused memory, purge what expired long enough ago (no model)
    "memory_lifecycle": {"type": "lifecycle", "cadence": "daily", "window_start": "04:00"},
}


class ConsolidationConfig(_Strict):
    """How a consolidation pass finds duplicates and conflicts, and what it may spend.

    Similarity bands: at or above ``merge_similarity`` two entries are one
    fact and merge without a model; from ``synthesis_similarity`` the model decides (deep
    runs); below, they are left alone unless they share a subject and reach
    ``conflict_similarity``, when the model checks them for a contradiction.
    """

    min_age_days: float = Field(default=1, ge=0)  # daily entries younger are left to settle
    recent_days: float = Field(default=3, ge=0)  # ...unless changed this recently
    frequent_retrievals: int = Field(default=3, ge=1)  # ...or recalled this often
    merge_similarity: float = Field(
        default=0.90,
        gt=0,
        le=1,
        description="at or above this similarity two entries are one fact and merge without a "
        "model",
    )
    synthesis_similarity: float = Field(
        default=0.75, gt=0, le=1, description="from this similarity the model decides (deep runs)"
    )
    conflict_similarity: float = Field(
        default=0.5,
        ge=0,
        le=1,
        description="entries about one subject this similar are checked for a contradiction",
    )
    lexical_merge: float = Field(default=0.85, gt=0, le=1)  # word overlap that counts as merge
    time_window_days: float = Field(default=7, ge=0)  # entries this close are more likely one fact
    promotion_confidence: float = Field(
        default=0.70,
        ge=0,
        le=1,
        description="the confidence a fact needs to be promoted to MEMORY.md",
    )
    max_model_calls_per_run: int = Field(
        default=20, ge=0, description="model calls one run may make"
    )
    max_model_calls_per_day: int = Field(default=60, ge=0, description="model calls a day")
    pairs_per_call: int = Field(
        default=8, ge=1, le=20, description="entry pairs judged in one model call"
    )
    recheck_days: float = Field(default=14, ge=0)  # a judged pair is not asked again this long
    model: str | None = Field(default=None, min_length=1)  # a key of models; unset: defaults

    @model_validator(mode="after")
    def _bands_ordered(self) -> ConsolidationConfig:
        if not self.conflict_similarity <= self.synthesis_similarity <= self.merge_similarity:
            raise ValueError(
                "similarities must be ordered: conflict_similarity <= synthesis_similarity "
                "<= merge_similarity"
            )
        return self


class MaintenanceConfig(_Strict):
    """``memory.maintenance``: scheduled memory jobs (see the module docstring)."""

    enabled: bool = Field(default=True, description="run the scheduled memory jobs")
    tick_seconds: float = Field(default=900, gt=0)  # how often a running bot checks for due jobs
    # the zone of the windows: "local" (the machine's), "UTC" or an IANA name
    timezone: str = "local"
    jobs: dict[str, MaintenanceJobConfig] = Field(
        default_factory=lambda: {k: MaintenanceJobConfig(**v) for k, v in DEFAULT_JOBS.items()}
    )
    consolidation: ConsolidationConfig = Field(default_factory=ConsolidationConfig)

    @field_validator("jobs", mode="before")
    @classmethod
    def _over_defaults(cls, value: object) -> object:
        if not isinstance(value, dict):
            return value
        merged: dict[str, Any] = {k: dict(v) for k, v in DEFAULT_JOBS.items()}
        for name, job in value.items():
            if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9_][a-z0-9_-]*", name):
                raise ValueError(f"job name {name!r}: use lowercase letters, digits, _ and -")
            if isinstance(job, dict) and name in merged:
                merged[name] = {**merged[name], **job}
            else:
                merged[name] = job
        return merged

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        return check_zone(value)
