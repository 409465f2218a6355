"""When a maintenance job is due: pure functions over a schedule, a zone and a clock value."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from mindroom.memory.jobs.maintenance.schedule import (
    Schedule,
    due_after_run,
    first_due,
    local_zone,
    zone,
)

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")


def at(text: str, tz: object = UTC) -> datetime:
    """An aware time from ``YYYY-MM-DD HH:MM`` read in ``tz``, as UTC."""
    naive = datetime.fromisoformat(text)
    return naive.replace(tzinfo=tz).astimezone(UTC)  # type: ignore[arg-type]


DAILY_10 = Schedule("daily", window_start="10:00")


def test_a_new_daily_job_is_due_at_the_next_window_start() -> None:
    assert first_due(DAILY_10, at("2026-03-02 09:00"), UTC) == at("2026-03-02 10:00")
    assert first_due(DAILY_10, at("2026-03-02 10:30"), UTC) == at("2026-03-03 10:00")
    assert first_due(DAILY_10, at("2026-03-02 10:00"), UTC) == at("2026-03-02 10:00")


def test_after_a_run_the_next_due_time_is_the_next_window_start_after_now() -> None:
    assert due_after_run(DAILY_10, at("2026-03-02 10:00"), UTC) == at("2026-03-03 10:00")
    assert due_after_run(DAILY_10, at("2026-03-02 10:07"), UTC) == at("2026-03-03 10:00")


def test_a_catch_up_after_days_of_downtime_is_one_run_then_the_next_window() -> None:
    # due Monday 10:00; the machine slept until Thursday 08:00: one run now, then Thursday 10:00
    woke = at("2026-03-05 08:00")
    assert due_after_run(DAILY_10, woke, UTC) == at("2026-03-05 10:00")
    # woke after Thursday's window: the next is Friday's
    assert due_after_run(DAILY_10, at("2026-03-05 18:00"), UTC) == at("2026-03-06 10:00")


def test_a_window_with_an_end_makes_a_new_job_due_at_once_inside_it() -> None:
    schedule = Schedule("daily", window_start="10:00", window_end="12:00")
    assert first_due(schedule, at("2026-03-02 11:00"), UTC) == at("2026-03-02 11:00")
    assert first_due(schedule, at("2026-03-02 12:00"), UTC) == at("2026-03-03 10:00")  # end open
    assert due_after_run(schedule, at("2026-03-02 11:00"), UTC) == at("2026-03-03 10:00")


def test_a_window_crossing_midnight_is_open_after_midnight_too() -> None:
    schedule = Schedule("daily", window_start="22:00", window_end="06:00")
    assert first_due(schedule, at("2026-03-02 03:00"), UTC) == at("2026-03-02 03:00")
    assert first_due(schedule, at("2026-03-02 07:00"), UTC) == at("2026-03-02 22:00")
    assert first_due(schedule, at("2026-03-02 23:00"), UTC) == at("2026-03-02 23:00")
    assert due_after_run(schedule, at("2026-03-02 03:00"), UTC) == at("2026-03-02 22:00")


def test_weekly_is_due_on_its_weekday_at_the_window_start() -> None:
    schedule = Schedule("weekly", weekday="sunday", window_start="03:00")
    # 2026-03-04 is a Wednesday
    assert first_due(schedule, at("2026-03-04 12:00"), UTC) == at("2026-03-08 03:00")
    assert due_after_run(schedule, at("2026-03-08 03:00"), UTC) == at("2026-03-15 03:00")
    # a catch-up on Sunday at 02:00, a week late: the next is an hour later (the next start)
    assert due_after_run(schedule, at("2026-03-15 02:00"), UTC) == at("2026-03-15 03:00")


def test_weekly_without_a_weekday_is_monday() -> None:
    schedule = Schedule("weekly", window_start="08:00")
    assert first_due(schedule, at("2026-03-04 12:00"), UTC) == at("2026-03-09 08:00")


def test_no_window_is_the_whole_day() -> None:
    daily = Schedule("daily")
    assert first_due(daily, at("2026-03-02 15:00"), UTC) == at("2026-03-02 15:00")
    assert due_after_run(daily, at("2026-03-02 15:00"), UTC) == at("2026-03-03 00:00")
    weekly = Schedule("weekly", weekday="friday")
    assert first_due(weekly, at("2026-03-04 15:00"), UTC) == at("2026-03-06 00:00")
    assert first_due(weekly, at("2026-03-06 15:00"), UTC) == at("2026-03-06 15:00")


def test_interval_runs_every_n_minutes_from_the_last_run() -> None:
    schedule = Schedule("interval", interval_minutes=90)
    assert first_due(schedule, at("2026-03-02 15:00"), UTC) == at("2026-03-02 15:00")
    assert due_after_run(schedule, at("2026-03-02 15:00"), UTC) == at("2026-03-02 16:30")


def test_interval_inside_a_window_waits_for_the_next_window_when_it_falls_outside() -> None:
    schedule = Schedule("interval", interval_minutes=60, window_start="09:00", window_end="17:00")
    assert due_after_run(schedule, at("2026-03-02 12:00"), UTC) == at("2026-03-02 13:00")
    assert due_after_run(schedule, at("2026-03-02 16:30"), UTC) == at("2026-03-03 09:00")
    assert first_due(schedule, at("2026-03-02 20:00"), UTC) == at("2026-03-03 09:00")
    # a window start without an end is open until midnight
    evening = Schedule("interval", interval_minutes=60, window_start="20:00")
    assert due_after_run(evening, at("2026-03-02 22:30"), UTC) == at("2026-03-02 23:30")
    assert due_after_run(evening, at("2026-03-02 23:30"), UTC) == at("2026-03-03 20:00")


def test_windows_are_wall_clock_times_of_the_zone_across_dst() -> None:
    # Europe/Berlin moves to summer time on 2026-03-29 (02:00 -> 03:00): 10:00 stays 10:00
    before = at("2026-03-28 10:00", BERLIN)
    after = due_after_run(DAILY_10, before, BERLIN)
    assert after == at("2026-03-29 10:00", BERLIN)
    assert after - before == timedelta(hours=23)
    assert after.astimezone(BERLIN).hour == 10
    # and back on 2026-10-25 (03:00 -> 02:00): a 25-hour day
    autumn = due_after_run(DAILY_10, at("2026-10-24 10:00", BERLIN), BERLIN)
    assert autumn.astimezone(BERLIN).hour == 10
    assert autumn - at("2026-10-24 10:00", BERLIN) == timedelta(hours=25)


def test_a_window_start_in_the_spring_gap_runs_once_just_after_the_gap() -> None:
    schedule = Schedule("daily", window_start="02:30")
    due = due_after_run(schedule, at("2026-03-28 02:30", BERLIN), BERLIN)
    # 02:30 does not exist on 2026-03-29: due at 03:30 summer time (01:30 UTC), once
    assert due == datetime(2026, 3, 29, 1, 30, tzinfo=UTC)
    assert due_after_run(schedule, due, BERLIN) == at("2026-03-30 02:30", BERLIN)


def test_a_window_start_in_the_repeated_autumn_hour_runs_once() -> None:
    schedule = Schedule("daily", window_start="02:30")
    first = due_after_run(schedule, at("2026-10-24 02:30", BERLIN), BERLIN)
    assert first == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # the first 02:30 (summer time)
    second = due_after_run(schedule, first, BERLIN)
    assert second == at("2026-10-26 02:30", BERLIN)  # not the repeated 02:30 an hour later


def test_weekly_across_dst_in_new_york_keeps_the_wall_clock_time() -> None:
    schedule = Schedule("weekly", weekday="sunday", window_start="03:00")
    # New York springs forward on 2026-03-08 at 02:00
    due = due_after_run(schedule, at("2026-03-01 03:00", NEW_YORK), NEW_YORK)
    assert due.astimezone(NEW_YORK).replace(tzinfo=None) == datetime(2026, 3, 8, 3, 0)


def test_zone_names() -> None:
    assert zone("UTC") is UTC
    assert zone("Europe/Berlin") == BERLIN
    assert zone("local") == local_zone()
    offset = local_zone().utcoffset(datetime(2026, 1, 1))
    assert offset is not None


def test_local_zone_follows_tz(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    assert local_zone() == ZoneInfo("Asia/Tokyo")


def test_schedules_describe_themselves_for_status() -> None:
    assert DAILY_10.describe() == "daily 10:00"
    assert Schedule("daily").describe() == "daily (any time of day)"
    assert Schedule(
        "weekly", weekday="sunday", window_start="03:00", window_end="05:00"
    ).describe() == ("weekly sunday 03:00-05:00")
    assert Schedule("interval", interval_minutes=90).describe() == "every 90 min"
    assert Schedule("interval", interval_minutes=90, window_start="20:00").describe() == (
        "every 90 min, 20:00-24:00"
    )
