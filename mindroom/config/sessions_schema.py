"""``sessions``: when a conversation outside a thread starts afresh (freshness policy).

A thread is one conversation until someone says ``!new``. A direct chat, or a room whose agent
answers in the timeline (``thread_mode: room``), has no such natural end, so its session goes
stale and the next message starts a fresh one (the old one is flushed to memory first):

* at the daily boundary ``daily_reset`` (HH:MM in ``timezone``; default 04:00): a session last
  active before the most recent boundary is stale;
* after ``idle_minutes`` without a message (default: never).

``dm`` and ``group`` override both for direct chats and for group rooms; ``rooms`` overrides
them for one room, by its configured name (``lobby``) or its ID (``!abc:example.org``). A key
left out of an override keeps the value of the level above; ``null`` turns that rule off.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from mindroom.config.maintenance_schema import check_zone, clock
from mindroom.config.strict import Strict as _Strict


class FreshnessConfig(_Strict):
    """One level of the freshness policy; a key not given inherits from the level above."""

    daily_reset: str | None = Field(
        default=None, description="overrides `sessions.daily_reset` (HH:MM; null turns it off)"
    )
    idle_minutes: float | None = Field(
        default=None, gt=0, description="overrides `sessions.idle_minutes`"
    )

    @field_validator("daily_reset")
    @classmethod
    def _time_of_day(cls, value: str | None) -> str | None:
        return clock(value)

    def given(self, key: str) -> bool:
        """True when this level sets ``key`` itself (``null`` included)."""
        return key in self.model_fields_set


class SessionsConfig(_Strict):
    """``sessions``: the freshness policy of conversations outside threads."""

    timezone: str = "local"  # the zone of daily_reset: "local", "UTC" or an IANA name
    daily_reset: str | None = Field(
        default="04:00",
        description="a session last active before this time of day (HH:MM) is stale; null: no "
        "daily reset",
    )
    idle_minutes: float | None = Field(
        default=None, gt=0, description="a session idle this long is stale; unset: never"
    )
    # tell the agent, in the first turn of a fresh session, that the earlier one ended
    notify: bool = True
    dm: FreshnessConfig = Field(default_factory=FreshnessConfig)
    group: FreshnessConfig = Field(default_factory=FreshnessConfig)
    rooms: dict[str, FreshnessConfig] = Field(default_factory=dict)

    @field_validator("daily_reset")
    @classmethod
    def _time_of_day(cls, value: str | None) -> str | None:
        return clock(value)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        return check_zone(value)

    @model_validator(mode="after")
    def _room_keys(self) -> SessionsConfig:
        for key in self.rooms:
            if not key.strip():
                raise ValueError("sessions.rooms: a room key is empty")
        return self
