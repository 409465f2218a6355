"""The freshness policy (pure) and the session book (real SQLite)."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest

from mindroom.adapters.agno.turn_types import TurnUsage
from mindroom.config import parse_config
from mindroom.pipeline.turns import TeamSpec, TurnPlan
from mindroom.sessions.book import SessionRecord, rotated_id
from mindroom.sessions.freshness import (
    ConversationKind,
    Freshness,
    last_boundary,
    policy_for,
    stale_reason,
)
from mindroom.store.ledger import Ledger

CONFIG = """
models:
  default: {provider: openai, id: m, base_url: "http://127.0.0.1:9/v1", api_key: x}
agents:
  general: {role: Helps., rooms: [lobby, quiet]}
sessions:
  timezone: Europe/Berlin
  daily_reset: "04:00"
  dm: {idle_minutes: 120}
  group: {daily_reset: null, idle_minutes: 30}
  rooms:
    quiet: {idle_minutes: null}
    "!raw:example.org": {daily_reset: "06:30"}
"""

BERLIN = dt.timezone(dt.timedelta(hours=1))  # November: CET, no daylight saving


def at(day: int, hour: int, minute: int = 0) -> float:
    return dt.datetime(2026, 11, day, hour, minute, tzinfo=BERLIN).timestamp()


def test_policies_resolve_top_level_then_kind_then_room() -> None:
    config = parse_config(CONFIG, "config.yaml")
    dm = policy_for(config, ConversationKind.DM, ["!dm:example.org"])
    assert (dm.daily_reset, dm.idle_minutes) == (dt.time(4, 0), 120)
    group = policy_for(config, ConversationKind.GROUP, ["!lobby:example.org", "lobby"])
    assert (group.daily_reset, group.idle_minutes) == (None, 30)
    quiet = policy_for(config, ConversationKind.GROUP, ["!q:example.org", "quiet"])
    assert quiet.off  # the room turned idle expiry off and the group level the daily reset
    raw = policy_for(config, ConversationKind.GROUP, ["!raw:example.org"])
    assert (raw.daily_reset, raw.idle_minutes) == (dt.time(6, 30), 30)
    assert policy_for(config, ConversationKind.THREAD, ["lobby"]).off  # threads never go stale


def test_the_daily_boundary_is_in_the_configured_zone() -> None:
    policy = Freshness(dt.time(4, 0), None, BERLIN)
    assert stale_reason(at(24, 3, 59), at(24, 4, 1), policy) is not None  # crossed 04:00
    assert stale_reason(at(24, 4, 1), at(24, 23, 0), policy) is None  # same day after 04:00
    assert stale_reason(at(24, 23, 0), at(25, 3, 0), policy) is None  # before the next 04:00
    reason = stale_reason(at(23, 12, 0), at(25, 9, 0), policy)
    assert reason is not None
    assert "04:00" in reason
    moment = dt.datetime.fromtimestamp(at(25, 2, 0), dt.UTC)
    assert last_boundary(moment, dt.time(4, 0), BERLIN) == dt.datetime(
        2026, 11, 24, 4, 0, tzinfo=BERLIN
    )


def test_idle_expiry_counts_from_the_last_activity() -> None:
    policy = Freshness(None, 90, BERLIN)
    assert stale_reason(at(24, 10, 0), at(24, 11, 29), policy) is None
    reason = stale_reason(at(24, 10, 0), at(24, 11, 30), policy)
    assert reason is not None
    assert "idle" in reason


def test_unknown_keys_and_bad_times_are_refused_with_the_key() -> None:
    with pytest.raises(Exception, match="daily_reset"):
        parse_config(CONFIG.replace('"04:00"', '"4 am"'), "config.yaml")
    with pytest.raises(Exception, match="idle_minute"):
        parse_config(CONFIG.replace("idle_minutes: 120", "idle_minute: 120"), "config.yaml")
    with pytest.raises(Exception, match="timezone"):
        parse_config(CONFIG.replace("Europe/Berlin", "Mars/Olympus"), "config.yaml")


def record(key: str = "general:!dm", base: str = "general:!dm") -> SessionRecord:
    return SessionRecord(key, "general", "", "!dm", "", "dm", base, base)


@pytest.mark.asyncio
async def test_a_stale_conversation_rotates_once_even_when_two_messages_race(
    tmp_path: Path,
) -> None:
    ledger = await Ledger.open(tmp_path / "ledger.db")
    try:
        book = ledger.sessions
        first = await book.begin(record(), 1000.0, lambda r: None)
        assert (first.session_id, first.ended) == ("general:!dm", None)
        await book.record_turn("general:!dm", first.session_id, TurnUsage(120, 30, "m"), 1001.0)

        def stale(known: SessionRecord) -> str | None:
            return "idle" if known.last_active_at < 5000 else None

        one, two = await asyncio.gather(
            book.begin(record(), 9000.0, stale), book.begin(record(), 9000.0, stale)
        )
        rotated = [s for s in (one, two) if s.ended is not None]
        assert len(rotated) == 1  # the second message saw the fresh session
        assert one.session_id == two.session_id == rotated_id("general:!dm", 1)
        assert rotated[0].ended == "general:!dm"
        row = await book.get("general:!dm")
        assert row is not None
        assert (row.turns, row.total_tokens, row.previous) == (0, 0, "general:!dm")
        assert row.reason == "idle"
    finally:
        await ledger.close()


@pytest.mark.asyncio
async def test_new_starts_the_book_over_and_usage_is_kept_across_a_restart(
    tmp_path: Path,
) -> None:
    ledger = await Ledger.open(tmp_path / "ledger.db")
    start = await ledger.sessions.begin(record(), 10.0, lambda r: None)
    await ledger.sessions.record_turn("general:!dm", start.session_id, TurnUsage(100, 20, "m"), 11)
    await ledger.sessions.record_turn("general:!dm", start.session_id, TurnUsage(150, 25, "m"), 12)
    await ledger.close()

    ledger = await Ledger.open(tmp_path / "ledger.db")  # a restart
    try:
        row = await ledger.sessions.get("general:!dm")
        assert row is not None
        assert (row.turns, row.input_tokens, row.output_tokens, row.context_tokens) == (
            2,
            250,
            45,
            150,
        )
        # a failed turn's tokens count, the turn does not
        await ledger.sessions.record_turn(
            "general:!dm", start.session_id, TurnUsage(10, 0, "m"), 12.5, answered=False
        )
        failed = await ledger.sessions.get("general:!dm")
        assert failed is not None
        assert (failed.turns, failed.input_tokens) == (2, 260)
        # a turn of a session the conversation has left counts nowhere
        await ledger.sessions.record_turn("general:!dm", "old", TurnUsage(999, 9, "m"), 13)
        again = await ledger.sessions.get("general:!dm")
        assert again is not None
        assert again.turns == 2

        renewed = await ledger.sessions.begin(
            record(base="general:!dm#1"), 20.0, lambda r: "never asked"
        )
        assert renewed.session_id == "general:!dm#1"
        assert renewed.ended == "general:!dm"
        assert renewed.record.reason == "!new"
        assert renewed.record.turns == 0
    finally:
        await ledger.close()


def test_the_conversation_key_ignores_the_generation_but_not_the_person() -> None:
    def plan(session_id: str, requester: str, private: bool, team: TeamSpec | None = None):
        return TurnPlan(
            "general",
            requester,
            "!r",
            None,
            "$e",
            team,
            session_id,
            private,
            True,
            False,
            False,
        )

    assert plan("general:!r#3", "@a:x", False).conversation == "general:!r"
    alice = plan("general:!r#3@a", "@alice:x", True).conversation
    bob = plan("general:!r#3@b", "@bob:x", True).conversation
    assert alice != bob
    assert alice.startswith("general:!r@")
