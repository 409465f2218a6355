"""Flush decisions (pure functions over FlushEntry), claims, the old state file, extraction
helpers."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from mindroom.config.schema import AutoFlushConfig
from mindroom.memory.extraction import ChatLine, bounded_chunk, parse_facts
from mindroom.memory.flush.state import (
    FlushClaim,
    FlushEntry,
    backoff,
    boost_others,
    choose_batch,
    claim_is_dead,
    eligible,
    is_stale,
    load_legacy_state,
    mark_dirty,
    pid_alive,
)
from mindroom.memory.flush.told import heard_by, narrowed
from mindroom.memory.policy.gate import RoomAudience

NOW = 1_000_000.0


def settings(**values: object) -> AutoFlushConfig:
    base: dict[str, object] = {
        "idle_seconds": 120,
        "max_dirty_age_seconds": 600,
        "retry_cooldown_seconds": 30,
        "max_retry_cooldown_seconds": 300,
        "stale_ttl_seconds": 86400,
    }
    base.update(values)
    return AutoFlushConfig.model_validate(base)


def dirty(
    agent: str = "general",
    session: str = "s1",
    *,
    first: float = NOW - 1000,
    seen: float = NOW - 1000,
    **fields: object,
) -> FlushEntry:
    """A dirty entry, first marked at ``first`` and last seen at ``seen``."""
    entry = FlushEntry(agent, session, dirty=True, first_dirty_at=first, last_seen_at=seen)
    return replace(entry, **fields)


# -- mark_dirty -------------------------------------------------------------------------------


def test_mark_dirty_counts_revisions_and_keeps_the_first_dirty_time_while_dirty() -> None:
    entry = FlushEntry("general", "s1")

    first = mark_dirty(entry, 100.0)
    second = mark_dirty(first, 150.0)

    assert (first.dirty, first.dirty_revision, first.first_dirty_at) == (True, 1, 100.0)
    assert (second.dirty, second.dirty_revision) == (True, 2)
    assert second.first_dirty_at == 100.0  # still dirty since the first mark
    assert second.last_seen_at == 150.0


def test_mark_dirty_after_a_flush_starts_a_new_dirty_period() -> None:
    flushed = replace(mark_dirty(FlushEntry("general", "s1"), 100.0), dirty=False)

    again = mark_dirty(flushed, 500.0)

    assert again.first_dirty_at == 500.0
    assert again.dirty_revision == 2


# -- eligible ---------------------------------------------------------------------------------


def test_a_clean_session_is_not_eligible() -> None:
    assert not eligible(FlushEntry("general", "s1", last_seen_at=0.0), NOW, settings())


def test_a_session_in_flight_is_not_eligible() -> None:
    assert not eligible(dirty(in_flight=True), NOW, settings())


def test_a_session_in_its_retry_cooldown_is_not_eligible() -> None:
    assert not eligible(dirty(next_attempt_at=NOW + 5), NOW, settings())
    assert eligible(dirty(next_attempt_at=NOW - 5), NOW, settings())


def test_a_session_idle_long_enough_is_eligible_and_a_recent_one_is_not() -> None:
    config = settings(idle_seconds=120, max_dirty_age_seconds=600)

    assert eligible(dirty(first=NOW - 130, seen=NOW - 120), NOW, config)
    assert not eligible(dirty(first=NOW - 130, seen=NOW - 119), NOW, config)


def test_a_session_dirty_longer_than_max_dirty_age_is_eligible_even_while_active() -> None:
    config = settings(idle_seconds=120, max_dirty_age_seconds=600)

    assert eligible(dirty(first=NOW - 600, seen=NOW - 1), NOW, config)
    assert not eligible(dirty(first=NOW - 599, seen=NOW - 1), NOW, config)


def test_a_boosted_session_is_eligible_while_still_active() -> None:
    config = settings(idle_seconds=120, max_dirty_age_seconds=600)

    assert eligible(dirty(first=NOW - 1, seen=NOW - 1, boosted=True), NOW, config)
    assert not eligible(dirty(first=NOW - 1, seen=NOW - 1), NOW, config)


# -- choose_batch -----------------------------------------------------------------------------


def test_choose_batch_takes_at_most_max_sessions_per_cycle_oldest_first() -> None:
    config = settings(batch={"max_sessions_per_cycle": 2, "max_sessions_per_agent_per_cycle": 5})
    entries = [
        dirty("a", "new", first=NOW - 200),
        dirty("b", "oldest", first=NOW - 900),
        dirty("c", "middle", first=NOW - 500),
    ]

    chosen = choose_batch(entries, NOW, config)

    assert [e.session_id for e in chosen] == ["oldest", "middle"]


def test_choose_batch_caps_the_sessions_of_one_agent_and_fills_up_with_other_agents() -> None:
    config = settings(batch={"max_sessions_per_cycle": 10, "max_sessions_per_agent_per_cycle": 2})
    entries = [dirty("general", f"g{i}", first=NOW - 900 + i) for i in range(4)]
    entries.append(dirty("coder", "c0", first=NOW - 100))

    chosen = choose_batch(entries, NOW, config)

    assert [(e.agent, e.session_id) for e in chosen] == [
        ("general", "g0"),
        ("general", "g1"),
        ("coder", "c0"),
    ]


def test_choose_batch_puts_boosted_sessions_first_then_the_oldest_dirty() -> None:
    config = settings(idle_seconds=0)
    entries = [
        dirty("general", "old", first=NOW - 900),
        dirty("general", "boosted", first=NOW - 10, boosted=True),
        dirty("general", "older", first=NOW - 950),
    ]

    chosen = choose_batch(entries, NOW, config)

    assert [e.session_id for e in chosen] == ["boosted", "older", "old"]


def test_choose_batch_leaves_out_ineligible_sessions() -> None:
    config = settings()
    entries = [
        dirty("general", "ready"),
        dirty("general", "flying", in_flight=True),
        dirty("general", "cooling", next_attempt_at=NOW + 60),
        FlushEntry("general", "clean"),
        dirty("general", "active", first=NOW - 5, seen=NOW - 5),
    ]

    assert [e.session_id for e in choose_batch(entries, NOW, config)] == ["ready"]


# -- boost_others -----------------------------------------------------------------------------


def test_boost_others_boosts_the_agents_other_dirty_sessions_most_recent_first() -> None:
    entries = [
        dirty("general", "prompting", seen=NOW - 1),
        dirty("general", "a", seen=NOW - 300),
        dirty("general", "b", seen=NOW - 100),
        dirty("general", "c", seen=NOW - 200),
        dirty("coder", "x", seen=NOW - 50),
        FlushEntry("general", "clean", last_seen_at=NOW - 10),
    ]

    boosted = boost_others(entries, "general", "prompting", limit=2)

    assert [e.session_id for e in boosted] == ["b", "c"]
    assert all(e.boosted and e.agent == "general" for e in boosted)


def test_boost_others_never_boosts_the_prompting_session_and_respects_a_zero_limit() -> None:
    entries = [dirty("general", "prompting"), dirty("general", "other")]

    assert [e.session_id for e in boost_others(entries, "general", "prompting", 5)] == ["other"]
    assert boost_others(entries, "general", "prompting", 0) == []


# -- backoff / staleness ----------------------------------------------------------------------


def test_backoff_doubles_the_cooldown_up_to_the_max_and_clears_in_flight() -> None:
    config = settings(retry_cooldown_seconds=30, max_retry_cooldown_seconds=100)
    entry = dirty(in_flight=True)
    waits = []
    for _ in range(4):
        entry = backoff(replace(entry, in_flight=True), NOW, config)
        assert not entry.in_flight
        waits.append(entry.next_attempt_at - NOW)

    assert waits == [30, 60, 100, 100]
    assert entry.failures == 4
    assert entry.dirty  # still to be flushed


def test_is_stale_after_stale_ttl_since_last_seen_once_clean() -> None:
    config = settings(stale_ttl_seconds=1000)

    clean = replace(dirty(first=NOW - 2000, seen=NOW - 1001), dirty=False)
    assert is_stale(clean, NOW, config)
    assert not is_stale(replace(clean, last_seen_at=NOW - 999), NOW, config)


def test_a_dirty_session_is_never_stale_so_its_unflushed_facts_are_never_dropped() -> None:
    config = settings(stale_ttl_seconds=1000)

    assert not is_stale(dirty(first=NOW - 99_000, seen=NOW - 99_000), NOW, config)


# -- claims -----------------------------------------------------------------------------------


def claim(pid: int = 42, boot: str = "b1", age: float = 10.0) -> FlushClaim:
    return FlushClaim("c1", pid, boot, NOW - age)


def test_a_recent_claim_of_a_live_process_on_this_boot_is_alive() -> None:
    assert not claim_is_dead(claim(), NOW, boot="b1", max_age=100, alive=lambda pid: True)


def test_a_claim_of_a_process_that_is_gone_is_dead() -> None:
    assert claim_is_dead(claim(), NOW, boot="b1", max_age=100, alive=lambda pid: False)


def test_a_claim_from_before_a_reboot_is_dead_even_if_its_pid_was_reused() -> None:
    assert claim_is_dead(claim(boot="b0"), NOW, boot="b1", max_age=100, alive=lambda pid: True)


def test_on_a_shared_database_a_claim_dies_only_of_age() -> None:
    # another boot id is another machine there: its pid means nothing here
    other = claim(boot="b0")
    assert not claim_is_dead(
        other, NOW, boot="b1", max_age=100, alive=lambda pid: False, shared=True
    )
    old = claim(boot="b0", age=101)
    assert claim_is_dead(old, NOW, boot="b1", max_age=100, alive=lambda pid: True, shared=True)
    # nor by a pid seen from here: containers of one host share its boot id, not their pids
    assert not claim_is_dead(
        claim(), NOW, boot="b1", max_age=100, alive=lambda pid: False, shared=True
    )
    assert claim_is_dead(claim(), NOW, boot="b1", max_age=100, alive=lambda pid: False)  # alone


def test_a_claim_older_than_its_bound_is_dead_even_if_its_owner_lives() -> None:
    old = claim(age=101)
    assert claim_is_dead(old, NOW, boot="b1", max_age=100, alive=lambda pid: True)


def test_pid_alive_tells_this_process_from_one_that_exited() -> None:
    child = subprocess.Popen(["true"])
    child.wait()

    assert pid_alive(os.getpid())
    assert not pid_alive(child.pid)


# -- the state file of earlier versions (moved into the ledger once) --------------------------


def _legacy(path: Path, *entries: FlushEntry, passes: dict[str, int] | None = None) -> None:
    data = {"entries": [asdict(e) for e in entries], "curation_passes": passes or {}}
    path.write_text(json.dumps(data))


def test_an_old_state_file_is_read_including_team_members(tmp_path: Path) -> None:
    path = tmp_path / "memory_flush_state.json"
    solo = dirty("general", "s1", cursor=4, failures=1, next_attempt_at=NOW + 30)
    team = FlushEntry("crew", "t1", "@u:localhost", ("general", "coder"), dirty=True)
    _legacy(path, solo, team, passes={"general|2026-11-22": 1})

    entries, passes = load_legacy_state(path)

    assert entries == [solo, team]
    assert entries[1].team == ("general", "coder")  # a tuple again, not a list
    assert passes == {"general|2026-11-22": 1}


def test_a_missing_state_file_loads_empty(tmp_path: Path) -> None:
    assert load_legacy_state(tmp_path / "nope.json") == ([], {})


@pytest.mark.parametrize(
    "content",
    ['{"entries": [{"agent": "general"', "\xff\xfe garbage", '{"entries": [{"unknown": 1}]}'],
    ids=["truncated", "binary", "wrong-fields"],
)
def test_a_corrupt_state_file_loads_empty(tmp_path: Path, content: str) -> None:
    path = tmp_path / "memory_flush_state.json"
    path.write_bytes(content.encode("latin-1"))

    assert load_legacy_state(path) == ([], {})


@pytest.mark.parametrize("content", ["[]", "null"])
def test_a_state_file_holding_json_of_the_wrong_shape_loads_empty(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "memory_flush_state.json"
    path.write_text(content)

    assert load_legacy_state(path) == ([], {})


# -- extraction helpers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer", ["NO_REPLY", "", "   \n ", "NO_REPLY.", "`NO_REPLY`", '"NO_REPLY"', "- NO_REPLY"]
)
def test_parse_facts_finds_nothing_in_a_no_reply_or_empty_answer(answer: str) -> None:
    assert parse_facts(answer, "NO_REPLY") == []


def test_parse_facts_reads_each_bullet_as_a_fact() -> None:
    answer = "- The user's sister is Maya\n* Likes tea\n• Lives in Berlin\n-   \n"

    assert parse_facts(answer, "NO_REPLY") == [
        "The user's sister is Maya",
        "Likes tea",
        "Lives in Berlin",
    ]


def test_parse_facts_reads_a_single_plain_line_as_one_fact() -> None:
    assert parse_facts("  The user works at Acme  \n", "NO_REPLY") == ["The user works at Acme"]


def test_parse_facts_takes_only_the_bullets_of_mixed_text() -> None:
    answer = "Here is what I found:\n- Works at Acme\nsome chatter\n- Has a cat"

    assert parse_facts(answer, "NO_REPLY") == ["Works at Acme", "Has a cat"]


def test_parse_facts_ignores_several_plain_lines_without_bullets() -> None:
    assert parse_facts("Hmm, let me think.\nNothing much here.", "NO_REPLY") == []


def test_parse_facts_honours_a_custom_token() -> None:
    assert parse_facts("SKIP", "SKIP") == []
    assert parse_facts("NO_REPLY", "SKIP") == ["NO_REPLY"]  # only the configured token is silent


def lines(*texts: str) -> list[ChatLine]:
    return [ChatLine("user" if i % 2 == 0 else "assistant", t) for i, t in enumerate(texts)]


def test_bounded_chunk_stops_at_the_message_cap() -> None:
    assert bounded_chunk(lines(*["hi"] * 30), max_messages=20, max_chars=10_000) == 20


def test_bounded_chunk_stops_before_the_char_cap() -> None:
    chat = lines("a" * 40, "b" * 40, "c" * 40)

    # counted as the transcript writes them: "user: aaa...\n" is 47, "assistant: bbb...\n" 52
    assert bounded_chunk(chat, max_messages=20, max_chars=99) == 2
    assert bounded_chunk(chat, max_messages=20, max_chars=98) == 1


def test_bounded_chunk_takes_at_least_one_message_even_when_it_is_too_long() -> None:
    assert bounded_chunk(lines("x" * 5000, "short"), max_messages=20, max_chars=200) == 1


def test_bounded_chunk_of_nothing_is_nothing() -> None:
    assert bounded_chunk([], max_messages=20, max_chars=200) == 0


def test_the_record_of_who_could_read_a_conversation_only_ever_narrows() -> None:
    """mindroom.memory.flush.told: each turn narrows the record; a room someone joins later,
    or one opened to everyone, never widens it."""
    alice, bob, carol = "@alice:x", "@bob:x", "@carol:x"
    lobby = RoomAudience.shared(frozenset({alice, bob}))  # anyone may read it
    alice_dm = RoomAudience.private_to(alice, "!dm:x")
    both = RoomAudience.shared(frozenset({alice, bob}), closed=True)
    alice_carol = RoomAudience.shared(frozenset({alice, carol}), closed=True)
    unknown = RoomAudience.shared(frozenset({alice, bob}), rules_known=False)

    assert narrowed(None, None) is None  # nothing known: nothing recorded
    assert json.loads(narrowed(None, lobby) or "") == {"open": True}
    assert json.loads(narrowed(narrowed(None, lobby), lobby) or "") == {"open": True}
    assert json.loads(narrowed(narrowed(None, lobby), both) or "") == {"readers": [alice, bob]}
    assert json.loads(narrowed(narrowed(None, alice_dm), both) or "") == {"readers": [alice]}
    assert json.loads(narrowed(narrowed(None, both), lobby) or "") == {"readers": [alice, bob]}
    assert json.loads(narrowed(narrowed(None, both), alice_carol) or "") == {"readers": [alice]}
    assert json.loads(narrowed(None, unknown) or "") == {"readers": [alice, bob]}
    assert narrowed('{"readers": ["@alice:x"]}', None) == '{"readers": ["@alice:x"]}'

    assert heard_by(None, both) == both  # nothing recorded: the room as it is now
    assert heard_by('{"open": true}', both) == both
    assert heard_by('{"readers": ["@alice:x"]}', lobby) == RoomAudience.private_to(alice)
    assert heard_by('{"readers": ["@alice:x", "@bob:x"]}', alice_carol).readers == {alice}
    unreadable = heard_by("not json", lobby)  # read as nobody, never as everyone
    assert unreadable.closed
    assert unreadable.readers == frozenset()
