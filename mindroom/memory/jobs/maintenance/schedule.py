"""When a maintenance job is due: pure functions of a schedule, a time zone and "now".

Windows are wall-clock times of the zone ``memory.maintenance.timezone`` (``local``: the
machine's zone, ``UTC``, or an IANA name), computed day by day on the calendar of that zone,
so a job "daily at 10:00" stays at 10:00 across a daylight-saving change (the day before the
change is 23 or 25 hours long). Two edge cases of such a change, resolved the way
:mod:`zoneinfo` resolves them: a start inside the spring gap (02:30 on a day the clocks jump from
02:00 to 03:00) means the moment just after the gap (03:30 summer time), and a start inside the
repeated autumn hour means its first occurrence. Either way the job is due once that day.

A window is ``[window_start, window_end)``:

* no ``window_start``: the whole day (for ``weekly``, the whole weekday);
* a start without an end: for ``daily`` and ``weekly`` a moment (the job is due then); for
  ``interval`` the window lasts until midnight;
* an end at or before the start: the window crosses midnight (``22:00``-``06:00``).

Two functions decide due times; both return aware UTC datetimes:

* :func:`first_due`: a job that has no due time yet (new, or ``--recompute-next``) is due at
  once when ``now`` is inside one of its windows, else at the next window start;
* :func:`due_after_run`: after a run that started at ``now``, the next window start after
  ``now`` (``interval``: ``now`` plus the interval, moved to the next window start when that
  falls outside the window).

A job whose due time passed while the machine slept runs once when it wakes, wherever that
falls, and :func:`due_after_run` then points at the next window: one catch-up, not one per
missed day. This module does no I/O except reading the machine's zone in :func:`local_zone`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

Cadence = Literal["daily", "weekly", "interval"]
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_SEARCH_DAYS = 16  # enough to find the next window of any cadence (weekly: 7 days, DST aside)


@dataclass(frozen=True)
class Schedule:
    """When a job may run: its cadence and optional window (``HH:MM`` strings)."""

    cadence: Cadence
    interval_minutes: int | None = None
    weekday: str | None = None  # weekly only; None is monday
    window_start: str | None = None
    window_end: str | None = None

    def describe(self) -> str:
        """``daily 10:00``, ``weekly sunday 03:00-05:00``, ``every 90 min``, for people."""
        if self.cadence == "interval":
            what = f"every {self.interval_minutes} min"
        elif self.cadence == "weekly":
            what = f"weekly {self.weekday or 'monday'}"
        else:
            what = "daily"
        if self.window_start is None:
            return what if self.cadence == "interval" else f"{what} (any time of day)"
        if self.cadence == "interval":
            return f"{what}, {self.window_start}-{self.window_end or '24:00'}"
        span = f"{self.window_start}-{self.window_end}" if self.window_end else self.window_start
        return f"{what} {span}"


def zone(name: str) -> tzinfo:
    """The zone of ``memory.maintenance.timezone``: ``local``, ``UTC`` or an IANA name."""
    if name == "UTC":
        return UTC
    if name == "local":
        return local_zone()
    return ZoneInfo(name)


def local_zone() -> tzinfo:
    """The machine's zone with its daylight-saving rules: ``$TZ``, else ``/etc/localtime``.

    A fixed offset (no DST rules) only when neither can be read.
    """
    name = os.environ.get("TZ", "").removeprefix(":")
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    real = os.path.realpath("/etc/localtime")
    if "/zoneinfo/" in real:
        try:
            return ZoneInfo(real.split("/zoneinfo/", 1)[1])
        except (ZoneInfoNotFoundError, ValueError):
            pass
    try:
        with open("/etc/localtime", "rb") as handle:
            return ZoneInfo.from_file(handle, key="localtime")
    except (OSError, ValueError):
        pass
    fixed = datetime.now().astimezone().tzinfo
    return fixed if fixed is not None else UTC


def _clock(text: str) -> time:
    hours, minutes = text.split(":")
    return time(int(hours), int(minutes))


def _at(day: date, clock: time, tz: tzinfo) -> datetime:
    """``day`` at wall-clock ``clock`` in ``tz``, as UTC (fold 0: see the module docstring)."""
    return datetime.combine(day, clock, tzinfo=tz).astimezone(UTC)


def _windows(schedule: Schedule, tz: tzinfo, now: datetime) -> Iterator[tuple[datetime, datetime]]:
    """Each window ``(opens, closes)`` in UTC, in order, from the day before ``now`` on.

    A moment (a start without an end, daily or weekly) has ``closes == opens``.
    """
    start = _clock(schedule.window_start) if schedule.window_start else time(0, 0)
    weekday = WEEKDAYS.index(schedule.weekday or "monday")
    first = now.astimezone(tz).date() - timedelta(days=1)  # a window from yesterday may be open
    for offset in range(_SEARCH_DAYS):
        day = first + timedelta(days=offset)
        if schedule.cadence == "weekly" and day.weekday() != weekday:
            continue
        opens = _at(day, start, tz)
        if schedule.window_start is None:
            closes = _at(day + timedelta(days=1), time(0, 0), tz)
        elif schedule.window_end is None:
            midnight = _at(day + timedelta(days=1), time(0, 0), tz)
            closes = midnight if schedule.cadence == "interval" else opens
        else:
            end = _clock(schedule.window_end)
            closes = _at(day + timedelta(days=0 if end > start else 1), end, tz)
        yield opens, closes


def first_due(schedule: Schedule, now: datetime, tz: tzinfo) -> datetime:
    """When a job without a due time is due: ``now`` inside a window, else the next start."""
    for opens, closes in _windows(schedule, tz, now):
        if opens <= now < closes:
            return now
        if opens >= now:
            return opens
    raise AssertionError("no window found")  # pragma: no cover - every schedule has windows


def due_after_run(schedule: Schedule, now: datetime, tz: tzinfo) -> datetime:
    """When a job that ran at ``now`` is due next (see the module docstring)."""
    if schedule.cadence == "interval":
        assert schedule.interval_minutes is not None
        candidate = now + timedelta(minutes=schedule.interval_minutes)
        return first_due(schedule, candidate, tz)
    for opens, _ in _windows(schedule, tz, now):
        if opens > now:
            return opens
    raise AssertionError("no window found")  # pragma: no cover - every schedule has windows


def day_start(now: datetime, tz: tzinfo) -> datetime:
    """Midnight of ``now``'s day in ``tz``, as UTC: where "today" of a day budget begins."""
    return _at(now.astimezone(tz).date(), time(0, 0), tz)
