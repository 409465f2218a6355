"""Team memory: mirrored into every member's folder, repaired, keyed per requester if private."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from mindroom.config import parse_config
from mindroom.errors import ConfigError, MemoryStoreError
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.markdown import parse_entries
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.policy.view import AgentView
from mindroom.memory.private import PRIVATE_DIR, requester_key
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.team import TeamMemory, mirror_root

SCOPE = "team_a+b"


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    return tmp_path / "storage"


@pytest.fixture
def open_team(storage: Path) -> Iterator[Callable[..., TeamMemory]]:
    opened: list[TeamMemory] = []

    def make(members: list[str] | None = None, via: str | None = None) -> TeamMemory:
        memory = TeamMemory(storage, members or ["b", "a"], via=via)
        opened.append(memory)
        return memory

    yield make
    for memory in opened:
        memory.close()


def copy_of(storage: Path, member: str, relative: str = "MEMORY.md") -> Path:
    return storage / "agents" / member / "memory_files" / SCOPE / relative


def ids_in(path: Path, relative: str = "MEMORY.md") -> list[str]:
    return [e.id for e in parse_entries(path.read_text(encoding="utf-8"), relative)]


def set_mtime(path: Path, seconds: float) -> None:
    os.utime(path, (seconds, seconds))


# -- mirroring ----------------------------------------------------------------------------------


def test_team_mirrors_live_under_each_members_folder(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(["b", "a"])

    assert team.scope_id == SCOPE
    assert team.members == ["a", "b"]
    assert team.mirrors == {
        "a": storage / "agents" / "a" / "memory_files" / SCOPE,
        "b": storage / "agents" / "b" / "memory_files" / SCOPE,
    }
    assert team.scope.root in team.mirrors.values()


def test_added_entry_is_mirrored_to_every_member_with_the_same_id(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(["b", "a"])

    entry = team.add_sync("The release is on Friday", actor="test")

    a_copy, b_copy = copy_of(storage, "a"), copy_of(storage, "b")
    assert ids_in(a_copy) == [entry.id]
    assert ids_in(b_copy) == [entry.id]
    assert a_copy.read_bytes() == b_copy.read_bytes()
    assert "The release is on Friday" in a_copy.read_text()


def test_daily_file_entry_is_mirrored_too(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(["b", "a"])
    daily = "memory/2026-01-01.md"

    entry = team.add_sync("Stand-up moved to 10:00", actor="test", path=daily)

    assert entry.path == daily
    a_copy, b_copy = copy_of(storage, "a", daily), copy_of(storage, "b", daily)
    assert ids_in(a_copy, daily) == [entry.id]
    assert ids_in(b_copy, daily) == [entry.id]
    assert a_copy.read_bytes() == b_copy.read_bytes()
    assert not copy_of(storage, "a").exists()  # nothing invented in MEMORY.md


def test_append_unique_is_mirrored_and_skips_a_duplicate(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(via="b")

    first = team.append_unique_sync("Uses tabs", actor="test", path="MEMORY.md")
    again = team.append_unique_sync("uses   TABS", actor="test", path="MEMORY.md")

    assert first is not None
    assert again is None
    assert ids_in(copy_of(storage, "a")) == [first.id]
    assert ids_in(copy_of(storage, "b")) == [first.id]


def test_update_through_another_member_reaches_both_copies(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    via_a, via_b = open_team(via="a"), open_team(via="b")
    entry = via_a.add_sync("Deploys happen on Tuesday", actor="test")

    updated = via_b.update_sync(entry.id, "Deploys happen on Thursday", actor="test")

    assert updated.id == entry.id
    a_copy, b_copy = copy_of(storage, "a"), copy_of(storage, "b")
    assert a_copy.read_bytes() == b_copy.read_bytes()
    assert "Thursday" in a_copy.read_text()
    assert "Tuesday" not in a_copy.read_text()
    assert via_a.find(entry.id).text == "Deploys happen on Thursday"


def test_delete_through_another_member_reaches_both_copies(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    via_a, via_b = open_team(via="a"), open_team(via="b")
    keep = via_a.add_sync("Keep this one", actor="test")
    gone = via_a.add_sync("Forget this one", actor="test")

    via_b.delete_sync(gone.id, actor="test")

    a_copy, b_copy = copy_of(storage, "a"), copy_of(storage, "b")
    assert a_copy.read_bytes() == b_copy.read_bytes()
    assert ids_in(a_copy) == [keep.id]
    with pytest.raises(MemoryStoreError):
        via_a.find(gone.id)


def test_restore_through_a_member_reaches_both_copies(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    via_a, via_b = open_team(via="a"), open_team(via="b")
    entry = via_a.add_sync("Coffee machine is on floor 3", actor="test")
    via_b.delete_sync(entry.id, actor="test")

    restored = via_b.restore_sync(entry.id, actor="test")

    assert restored.id == entry.id
    assert ids_in(copy_of(storage, "a")) == [entry.id]
    assert ids_in(copy_of(storage, "b")) == [entry.id]


def test_entry_added_via_one_member_is_found_via_the_other(
    open_team: Callable[..., TeamMemory],
) -> None:
    via_a, via_b = open_team(via="a"), open_team(via="b")
    assert via_a.scope.root != via_b.scope.root

    entry = via_a.add_sync("The staging password rotates monthly", actor="test")

    assert via_b.find(entry.id).text == "The staging password rotates monthly"
    assert [e.id for e in via_b.list_sync()] == [entry.id]
    hits = asyncio.run(via_b.search("staging password"))
    assert [h.entry.id for h in hits] == [entry.id]


# -- repair -------------------------------------------------------------------------------------


def test_deleted_copy_is_restored_from_the_other_on_the_next_list(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(via="a")
    entry = team.add_sync("Lunch at noon", actor="test")
    original = copy_of(storage, "b").read_bytes()
    copy_of(storage, "b").unlink()

    assert [e.id for e in team.list_sync()] == [entry.id]

    assert copy_of(storage, "b").read_bytes() == original
    assert copy_of(storage, "a").read_bytes() == original


def test_deleted_primary_copy_is_restored_before_find(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(via="a")
    entry = team.add_sync("Lunch at noon", actor="test")
    copy_of(storage, "a").unlink()

    assert team.find(entry.id).text == "Lunch at noon"

    assert copy_of(storage, "a").read_bytes() == copy_of(storage, "b").read_bytes()


def test_deleted_daily_copy_is_restored_by_search(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(via="b")
    daily = "memory/2026-01-01.md"
    entry = team.add_sync("Retro notes: fewer meetings", actor="test", path=daily)
    copy_of(storage, "a", daily).unlink()

    hits = asyncio.run(team.search("retro meetings"))

    assert [h.entry.id for h in hits] == [entry.id]
    assert copy_of(storage, "a", daily).read_bytes() == copy_of(storage, "b", daily).read_bytes()


@pytest.mark.parametrize(("edited", "via"), [("a", "b"), ("b", "a"), ("a", "a"), ("b", "b")])
def test_later_hand_edit_of_one_copy_wins_in_both(
    storage: Path, open_team: Callable[..., TeamMemory], edited: str, via: str
) -> None:
    team = open_team(via=via)
    entry = team.add_sync("Meeting room: Orion", actor="test")
    other = "b" if edited == "a" else "a"
    edited_text = copy_of(storage, edited).read_text().replace("Orion", "Vega")
    copy_of(storage, edited).write_text(edited_text, encoding="utf-8")
    set_mtime(copy_of(storage, other), 1_700_000_000)
    set_mtime(copy_of(storage, edited), 1_700_000_100)

    assert team.find(entry.id).text == "Meeting room: Vega"

    assert copy_of(storage, "a").read_text() == edited_text
    assert copy_of(storage, "b").read_text() == edited_text


def test_two_diverged_hand_edits_are_merged_and_neither_is_overwritten(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(via="a")
    team.add_sync("Build server: jenkins", actor="test")
    newest = copy_of(storage, "b").read_text().replace("jenkins", "buildkite")
    copy_of(storage, "b").write_text(newest + "- Standup at ten\n", encoding="utf-8")
    stale = copy_of(storage, "a").read_text().replace("jenkins", "travis")
    copy_of(storage, "a").write_text(stale, encoding="utf-8")
    set_mtime(copy_of(storage, "a"), 1_700_000_000)
    set_mtime(copy_of(storage, "b"), 1_700_000_500)

    texts = sorted(e.text for e in team.list_sync())

    assert texts == ["Build server: buildkite", "Build server: travis", "Standup at ten"]
    assert copy_of(storage, "a").read_text() == copy_of(storage, "b").read_text()


ALICE, BOB = "@alice:example.org", "@bob:example.org"
ALICE_DM = RoomAudience.private_to(ALICE, "!alice-dm:example.org")
LOBBY = RoomAudience.shared(frozenset({ALICE, BOB}), room_id="!lobby:example.org")


def shown_in(team: TeamMemory, room: RoomAudience) -> list[str]:
    view = AgentView(team, CategoryAccess.everything(), room=room)
    return sorted(e.text for e in view.list_sync())


def test_two_edits_of_one_dm_entry_keep_its_marker_in_both_texts(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(via="a")
    fields = EntryFields(category="tasks", type="episodic")
    AgentView(team, CategoryAccess.everything(), room=ALICE_DM).add_sync(
        "Alice owes the casino 40000 euros", actor="tool", fields=fields
    )
    for member, old, new in (("a", "40000", "40,000"), ("b", "euros", "EUR")):
        text = copy_of(storage, member).read_text().replace(old, new)
        copy_of(storage, member).write_text(text, encoding="utf-8")

    team.repair()

    both = ["Alice owes the casino 40,000 euros", "Alice owes the casino 40000 EUR"]
    assert shown_in(team, ALICE_DM) == both  # both sides' words are kept, in her DM
    assert shown_in(team, LOBBY) == []
    entries = parse_entries(copy_of(storage, "b").read_text(), "MEMORY.md")
    assert sorted(e.text for e in entries) == both
    assert len({e.id for e in entries}) == 2
    for entry in entries:
        assert (entry.fields.audience, entry.fields.category, entry.fields.type) == (
            f"dm:{ALICE}",
            "tasks",
            "episodic",
        )
    assert copy_of(storage, "a").read_text() == copy_of(storage, "b").read_text()


def narrowed_by_hand(storage: Path, mirror: str, entry_id: str, audience: str) -> None:
    """A person gives entry ``entry_id`` the audience ``audience`` in ``mirror``'s copy."""
    copy = copy_of(storage, mirror)
    text = copy.read_text().replace(f"{entry_id} ", f"{entry_id} audience={audience} ")
    copy.write_text(text, encoding="utf-8")


def test_two_sides_that_disagree_on_an_entrys_audience_keep_the_narrower(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(via="a")
    entry = AgentView(team, CategoryAccess.everything(), room=LOBBY).add_sync(
        "Team offsite in Lisbon", actor="tool"
    )
    assert shown_in(team, LOBBY) == ["Team offsite in Lisbon"]
    a_text = copy_of(storage, "a").read_text().replace("Lisbon", "Porto")
    copy_of(storage, "a").write_text(a_text, encoding="utf-8")
    narrowed_by_hand(storage, "b", entry.id, f"dm:{ALICE}")

    team.repair()

    assert shown_in(team, ALICE_DM) == ["Team offsite in Lisbon", "Team offsite in Porto"]
    assert shown_in(team, LOBBY) == []


def test_an_audience_narrowed_in_one_mirror_survives_an_edit_of_the_other(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(via="a")
    entry = AgentView(team, CategoryAccess.everything(), room=LOBBY).add_sync(
        "Alice's salary is 5000", actor="tool"
    )
    with copy_of(storage, "a").open("a", encoding="utf-8") as handle:
        handle.write("- Standup at ten\n")
    narrowed_by_hand(storage, "b", entry.id, f"dm:{ALICE}")

    team.repair()

    assert shown_in(team, ALICE_DM) == ["Alice's salary is 5000", "Standup at ten"]
    assert shown_in(team, LOBBY) == ["Standup at ten"]
    assert copy_of(storage, "a").read_text() == copy_of(storage, "b").read_text()


def test_a_hand_deletion_in_one_copy_and_an_addition_in_the_other_both_apply(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(via="a")
    gone = team.add_sync("Old wifi password hint", actor="test")
    team.add_sync("Lunch at noon", actor="test")
    b_text = copy_of(storage, "b").read_text()
    copy_of(storage, "b").write_text(
        "".join(line + "\n" for line in b_text.splitlines() if gone.id not in line),
        encoding="utf-8",
    )
    with copy_of(storage, "a").open("a", encoding="utf-8") as handle:
        handle.write("- Fire drill on Friday\n")

    texts = [e.text for e in team.list_sync()]

    assert texts == ["Lunch at noon", "Fire drill on Friday"]
    assert copy_of(storage, "a").read_text() == copy_of(storage, "b").read_text()


def test_a_flush_write_and_a_tool_write_at_once_reach_every_copy(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    via_a, via_b = open_team(via="a"), open_team(via="b")  # as the flush and a turn open it
    errors: list[BaseException] = []

    def flush() -> None:
        try:
            for n in range(25):
                via_a.append_unique_sync(f"flush fact {n}", actor="flush", path="MEMORY.md")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    def tool() -> None:
        try:
            for n in range(25):
                via_b.add_sync(f"tool fact {n}", actor="tool")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=flush), threading.Thread(target=tool)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    wanted = {f"flush fact {n}" for n in range(25)} | {f"tool fact {n}" for n in range(25)}
    for member in ("a", "b"):
        texts = [e.text for e in parse_entries(copy_of(storage, member).read_text(), "MEMORY.md")]
        assert sorted(texts) == sorted(wanted), member


def test_a_hand_edit_of_one_mirror_survives_a_concurrent_tool_write(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(via="a")
    team.add_sync("first tool fact", actor="tool")
    done = threading.Event()
    errors: list[BaseException] = []

    def tool() -> None:
        try:
            for n in range(30):
                team.add_sync(f"tool fact {n}", actor="tool")
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            done.set()

    worker = threading.Thread(target=tool)
    worker.start()
    deadline = time.monotonic() + 30
    while copy_of(storage, "b").read_text().count("tool fact") < 6:  # writes are under way
        assert time.monotonic() < deadline
        time.sleep(0.005)
    with copy_of(storage, "b").open("a", encoding="utf-8") as handle:  # a person appends
        handle.write("- hand fact written in b\n")
    worker.join()
    assert errors == []
    team.list_sync()

    for member in ("a", "b"):
        texts = [e.text for e in parse_entries(copy_of(storage, member).read_text(), "MEMORY.md")]
        assert "hand fact written in b" in texts, member
        assert {f"tool fact {n}" for n in range(30)} <= set(texts), member


def test_repairs_are_recorded_in_the_history_as_repair(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(via="a")
    team.add_sync("Office closes at six", actor="test")
    before = copy_of(storage, "a").read_text()
    copy_of(storage, "b").unlink()

    team.list_sync()

    repairs = [r for r in team.history_of() if r.actor == "repair"]
    assert len(repairs) == 1
    assert repairs[0].op == "repair"
    assert repairs[0].path == "b:MEMORY.md"
    assert repairs[0].old is None
    assert repairs[0].new == before


def test_history_records_a_repair_of_a_divergent_copy_with_old_and_new_text(
    storage: Path, open_team: Callable[..., TeamMemory]
) -> None:
    team = open_team(via="b")
    team.add_sync("Printer: 2nd floor", actor="test")
    old = copy_of(storage, "b").read_text()
    new = old.replace("2nd", "3rd")
    copy_of(storage, "a").write_text(new, encoding="utf-8")
    set_mtime(copy_of(storage, "b"), 1_700_000_000)
    set_mtime(copy_of(storage, "a"), 1_700_000_100)

    assert team.repair() == ["b:MEMORY.md"]

    repairs = [r for r in team.history_of() if r.actor == "repair"]
    assert [(r.path, r.old, r.new) for r in repairs] == [("b:MEMORY.md", old, new)]


def test_consistent_copies_need_no_repair_and_record_none(
    open_team: Callable[..., TeamMemory],
) -> None:
    team = open_team()
    team.add_sync("All good", actor="test")

    assert team.repair() == []
    team.list_sync()

    assert [r for r in team.history_of() if r.actor == "repair"] == []


# -- MemoryRegistry.for_team --------------------------------------------------------------------

SHARED_CONFIG = "models: {default: {id: x}}\nagents: {a: {}, b: {}}\n"
MIXED_CONFIG = """
models: {default: {id: x}}
memory: {embedder: none}
agents:
  a: {}
  mind:
    private: {per: user}
"""


@pytest.fixture
def registry_for(tmp_path: Path) -> Iterator[Callable[[str], MemoryRegistry]]:
    registries: list[MemoryRegistry] = []

    def make(text: str) -> MemoryRegistry:
        registry = MemoryRegistry(parse_config(text, "test"), tmp_path / "storage", tmp_path)
        registries.append(registry)
        return registry

    yield make
    for registry in registries:
        registry.close()


def test_registry_team_memory_of_shared_members_lives_in_a_member_mirror(
    registry_for: Callable[[str], MemoryRegistry], storage: Path
) -> None:
    registry = registry_for(SHARED_CONFIG)

    memory = registry.for_team(["b", "a"])

    assert isinstance(memory, TeamMemory)
    assert memory.scope_id == SCOPE
    assert memory.scope.root in {mirror_root(storage, m, SCOPE) for m in ("a", "b")}
    assert registry.for_team(["a", "b"]) is memory
    via_b = registry.for_team(["a", "b"], via="b")
    assert via_b is not None
    try:
        assert via_b.scope.root == mirror_root(storage, "b", SCOPE)
    finally:
        via_b.close()


def test_registry_team_memory_writes_reach_every_member_folder(
    registry_for: Callable[[str], MemoryRegistry], storage: Path
) -> None:
    registry = registry_for(SHARED_CONFIG)
    memory = registry.for_team(["a", "b"])
    assert memory is not None

    entry = memory.add_sync("Shared fact", actor="test")

    assert ids_in(copy_of(storage, "a")) == [entry.id]
    assert ids_in(copy_of(storage, "b")) == [entry.id]


def test_registry_team_memory_honours_memory_file_path_with_and_without_via(
    registry_for: Callable[[str], MemoryRegistry], storage: Path
) -> None:
    registry = registry_for(SHARED_CONFIG + "memory: {file: {path: mem}}\n")
    default = registry.for_team(["a", "b"])
    via_b = registry.for_team(["a", "b"], via="b")
    assert default is not None
    assert via_b is not None
    try:
        entry = default.add_sync("Shared fact", actor="test")

        assert default.scope.root == mirror_root(storage, "a", SCOPE, "mem")
        assert via_b.find(entry.id).text == "Shared fact"
    finally:
        via_b.close()


def test_registry_team_with_a_private_member_is_keyed_by_the_requester(
    registry_for: Callable[[str], MemoryRegistry], storage: Path
) -> None:
    registry = registry_for(MIXED_CONFIG)
    alice_id, bob_id = "@alice:example.org", "@bob:example.org"

    alice = registry.for_team(["a", "mind"], requester=alice_id)
    bob = registry.for_team(["mind", "a"], requester=bob_id)

    assert alice is not None
    assert bob is not None
    assert alice is not bob
    assert alice.scope.root != bob.scope.root
    assert alice.scope.scope_id != bob.scope.scope_id
    private_root = storage / PRIVATE_DIR
    assert alice.scope.root.is_relative_to(private_root / requester_key(alice_id))
    assert bob.scope.root.is_relative_to(private_root / requester_key(bob_id))
    assert registry.for_team(["mind", "a"], requester=alice_id) is alice

    entry = alice.add_sync("Alice's team secret", actor="test")
    assert asyncio.run(bob.search("secret")) == []
    with pytest.raises(MemoryStoreError):
        bob.find(entry.id)
    assert not (storage / "agents").exists()  # nothing mirrored into shared folders


def test_registry_team_with_a_private_member_has_no_memory_without_a_requester(
    registry_for: Callable[[str], MemoryRegistry], storage: Path
) -> None:
    registry = registry_for(MIXED_CONFIG)

    assert registry.for_team(["a", "mind"]) is None
    assert registry.for_team(["a", "mind"], requester=None, via="a") is None
    assert not storage.exists()


def test_registry_has_no_team_memory_when_memory_is_off(
    registry_for: Callable[[str], MemoryRegistry],
) -> None:
    registry = registry_for(SHARED_CONFIG + "memory: none\n")

    assert registry.for_team(["a", "b"]) is None


# -- config validation --------------------------------------------------------------------------


def test_configured_team_with_a_private_member_is_refused() -> None:
    text = MIXED_CONFIG + "teams: {crew: {agents: [a, mind]}}\n"

    with pytest.raises(ConfigError, match="private") as caught:
        parse_config(text, "test")

    assert "mind" in str(caught.value)


def test_configured_team_with_an_unknown_member_is_refused() -> None:
    text = SHARED_CONFIG + "teams: {crew: {agents: [a, ghost]}}\n"

    with pytest.raises(ConfigError, match="ghost") as caught:
        parse_config(text, "test")

    assert "not a configured agent" in str(caught.value)


def test_team_named_like_an_agent_is_refused() -> None:
    text = SHARED_CONFIG + "teams: {a: {agents: [a, b]}}\n"

    with pytest.raises(ConfigError, match=r"teams\.a") as caught:
        parse_config(text, "test")

    assert "differ from every agent" in str(caught.value)


def test_team_named_router_is_refused() -> None:
    text = SHARED_CONFIG + "teams: {router: {agents: [a, b]}}\n"

    with pytest.raises(ConfigError, match=r"teams\.router"):
        parse_config(text, "test")


def test_team_listing_a_member_twice_is_refused() -> None:
    text = SHARED_CONFIG + "teams: {crew: {agents: [a, a]}}\n"

    with pytest.raises(ConfigError, match="twice"):
        parse_config(text, "test")


def test_valid_team_of_shared_agents_is_accepted() -> None:
    config = parse_config(SHARED_CONFIG + "teams: {crew: {agents: [a, b]}}\n", "test")

    assert config.teams["crew"].agents == ["a", "b"]
    assert config.teams_of("a") == ["crew"]
