"""When a conversation outside a thread goes stale (``sessions`` in config.yaml). Pure.

:func:`policy_for` resolves the policy of one conversation (the top level, then ``dm`` or
``group``, then ``rooms``); :func:`stale_reason` decides, from when the session was last
active and the time now, whether the next message starts a fresh session, and says why in
words the agent and ``!status`` can use.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from mindroom.config.schema import Config
from mindroom.config.sessions_schema import FreshnessConfig
from mindroom.memory.jobs.maintenance.schedule import zone


class ConversationKind(StrEnum):
    """Where a conversation happens, for the freshness policy."""

    THREAD = "thread"  # one thread: one session until !new
    DM = "dm"  # a direct chat answered in the timeline
    GROUP = "group"  # a group room answered in the timeline (thread_mode: room)


@dataclass(frozen=True)
class Freshness:
    """The resolved policy of one conversation (None: that rule is off)."""

    daily_reset: dt.time | None
    idle_minutes: float | None
    tz: dt.tzinfo

    @property
    def off(self) -> bool:
        """True when the conversation never goes stale."""
        return self.daily_reset is None and self.idle_minutes is None


NEVER = Freshness(None, None, dt.UTC)


def _apply(
    level: FreshnessConfig, daily: str | None, idle: float | None
) -> tuple[str | None, float | None]:
    if level.given("daily_reset"):
        daily = level.daily_reset
    if level.given("idle_minutes"):
        idle = level.idle_minutes
    return daily, idle


def policy_for(config: Config, kind: ConversationKind, room_keys: Iterable[str]) -> Freshness:
    """The freshness policy of a conversation of ``kind`` in the room known by ``room_keys``
    (its ID and its configured names); threads never go stale."""
    if kind is ConversationKind.THREAD:
        return NEVER
    settings = config.sessions
    daily, idle = settings.daily_reset, settings.idle_minutes
    level = settings.dm if kind is ConversationKind.DM else settings.group
    daily, idle = _apply(level, daily, idle)
    for key in room_keys:
        if key in settings.rooms:
            daily, idle = _apply(settings.rooms[key], daily, idle)
            break
    clock = None
    if daily is not None:
        hours, minutes = daily.split(":")
        clock = dt.time(int(hours), int(minutes))
    return Freshness(clock, idle, zone(settings.timezone))


def last_boundary(now: dt.datetime, at: dt.time, tz: dt.tzinfo) -> dt.datetime:
    """The most recent daily boundary ``at`` (in ``tz``) at or before ``now``."""
    local = now.astimezone(tz)
    boundary = dt.datetime.combine(local.date(), at, tzinfo=tz)
    if boundary > local:
        boundary = dt.datetime.combine(local.date() - dt.timedelta(days=1), at, tzinfo=tz)
    return boundary


def stale_reason(last_active: float, now: float, policy: Freshness) -> str | None:
    """Why a session last active at ``last_active`` (epoch seconds) is stale at ``now``, in a
    few words; None while it is fresh."""
    if policy.idle_minutes is not None and now - last_active >= policy.idle_minutes * 60:
        idle = (now - last_active) / 60
        spell = f"{idle / 60:.1f} hours" if idle >= 90 else f"{idle:.0f} minutes"
        return f"idle for {spell} (the limit is {policy.idle_minutes:g} minutes)"
    if policy.daily_reset is not None:
        moment = dt.datetime.fromtimestamp(now, dt.UTC)
        boundary = last_boundary(moment, policy.daily_reset, policy.tz)
        if last_active < boundary.timestamp():
            return f"a new day began at {policy.daily_reset.strftime('%H:%M')} (daily reset)"
    return None
