"""The audience rule on every read path: a table of (entry audience, room) pairs, on real files.

One shared agent's memory holds, for each entry audience below, an entry in every place a read
path looks: ``MEMORY.md`` (the entrypoint), a ``context: all`` category (always in context),
today's daily file (recent), an older file (related), an entry changed after a thread's first
turn (the delta header), an entry linked to a hit (linked entries), a conflict with a public
entry (open conflicts) and a past conversation. Every read is made from each room below under
each policy, and each result is compared with the truth table written out here (never
computed by the module under test). A public entry is in every read: the positive control
that makes an empty result fail.

Entry audiences (the ``audience=`` word of the entry):

* ``unset``: none written, the scope's default (a shared agent: everyone it talks to);
* ``public``; ``dmalice`` / ``dmbob``: told in Alice's / Bob's DM;
* ``teamab``: told in the closed room ``!team`` when only Alice and Bob read it;
* ``trioabc``: told in the closed room ``!trio`` of Alice, Bob and Carol;
* ``unknown``: a ``room:`` key ``audiences.json`` does not hold.

Rooms: the open ``lobby`` (Alice, Bob, Carol), Alice's and Bob's DMs, ``closed-ab`` (another
closed room of Alice and Bob), ``team-abc`` (``!team`` now that Carol joined it),
``encrypted-ab`` (a closed encrypted room of Alice and Bob) and no room (the CLI).

Then the writes: where what is written is told, an update or a delete by id only where the
entry may be read, and a conflict offered in a person's DM only when both entries may be read
there, at the offer and at the answer.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import replace
from functools import partial
from pathlib import Path

import pytest

from mindroom.config import parse_config
from mindroom.config.schema import Config
from mindroom.errors import MemoryStoreError
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.lines import HIDDEN
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.files.restore import set_fields_sync
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.consolidate.offers import answer_conflict, conflicts_to_offer
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords, db_path
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.audience import AudienceBook, narrower
from mindroom.memory.policy.consent import Person
from mindroom.memory.policy.gate import RoomAudience, StoredEntry, may_read
from mindroom.memory.policy.view import AgentView
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.delta import ThreadRevisions
from mindroom.memory.search.recall import RecallSettings, build_recall
from mindroom.memory.search.relations import Relations, RelationSettings
from mindroom.memory.search.session_index import TranscriptMessage, transcript_path
from mindroom.memory.search.session_source import close_all, index_transcript
from mindroom.memory.search.structured_query import Asker, QueryRequest, run_query
from mindroom.memory.tools import ScopeTools

ALICE, BOB, CAROL = "@alice:x", "@bob:x", "@carol:x"
TEAM_KEY, TRIO_KEY, UNKNOWN_KEY = "room:0000aaaa", "room:0000bbbb", "room:deadbeef"
BOOK = {  # the scope's audiences.json, as a person could write it
    TEAM_KEY: {"room": "!team:x", "kind": "private", "name": "team", "readers": [ALICE, BOB]},
    TRIO_KEY: {
        "room": "!trio:x",
        "kind": "private",
        "name": "trio",
        "readers": [ALICE, BOB, CAROL],
    },
}
WORDS: dict[str, str | None] = {  # an entry audience's word (None: none written)
    "unset": None,
    "public": "public",
    "dmalice": f"dm:{ALICE}",
    "dmbob": f"dm:{BOB}",
    "teamab": TEAM_KEY,
    "trioabc": TRIO_KEY,
    "unknown": UNKNOWN_KEY,
}
ROOMS: dict[str, RoomAudience | None] = {
    "lobby": RoomAudience.shared(frozenset({ALICE, BOB, CAROL}), room_id="!lobby:x"),
    "dm-alice": RoomAudience.private_to(ALICE, "!dma:x"),
    "dm-bob": RoomAudience.private_to(BOB, "!dmb:x"),
    "closed-ab": RoomAudience.shared(frozenset({ALICE, BOB}), closed=True, room_id="!ab:x"),
    "team-abc": RoomAudience.shared(frozenset({ALICE, BOB, CAROL}), closed=True, room_id="!team:x"),
    "encrypted-ab": RoomAudience.shared(
        frozenset({ALICE, BOB}), closed=True, room_id="!secret:x", encrypted=True
    ),
    "no room": None,
}

# The truth under ``strict``: Y shown, - not shown. Columns in the order of ROOMS.
#                lobby  dm-alice  dm-bob  closed-ab  team-abc  encrypted-ab  no room
STRICT_TABLE = {
    "unset": "    Y        Y        Y         Y         Y           Y          Y",
    "public": "   Y        Y        Y         Y         Y           Y          Y",
    "dmalice": "  -        Y        -         -         -           -          Y",
    "dmbob": "    -        -        Y         -         -           -          Y",
    "teamab": "   -        Y        Y         Y         -           Y          Y",
    "trioabc": "  -        Y        Y         Y         Y           Y          Y",
    "unknown": "  -        -        -         -         -           -          Y",
}
STRICT = {
    (entry, room): mark == "Y"
    for entry, row in STRICT_TABLE.items()
    for room, mark in zip(ROOMS, row.split(), strict=True)
}
# ``room``: also in the very room it was learned in, whoever reads it now
ROOM = {**STRICT, ("teamab", "team-abc"): True}
SHARED = dict.fromkeys(STRICT, True)  # ``shared``: every entry everywhere
TRUTH: dict[str, dict[tuple[str, str], bool]] = {"strict": STRICT, "room": ROOM, "shared": SHARED}


def sessions_truth(policy: str, entry: str, room: str) -> bool:
    """Past conversations: as entries, except that a conversation whose audience was never
    recorded has no scope default (its words were said somewhere): only with no room (or
    under ``shared``)."""
    if entry == "unset":
        return room == "no room" or policy == "shared"
    return TRUTH[policy][(entry, room)]


NOW = dt.datetime(2026, 11, 25, 12)
TODAY = "memory/2026-11-25.md"
OLDER = "memory/2026-01-05.md"
THREAD = "thread-1"
LINKS = RelationSettings(top_k=2, link_min=0.3)
ASKER = Asker("general", None, frozenset({"general"}))
ACCESS = CategoryAccess.of(  # "notes": no cap on the entries recall shows of it
    Config.model_validate(
        {"memory": {"categories": {"custom": [{"name": "notes", "rag_length": 50}]}}}
    ),
    None,
)


def fields(entry: str, **more: str) -> EntryFields:
    return EntryFields(audience=WORDS[entry], **more)  # type: ignore[arg-type]


def said(text: str) -> list[TranscriptMessage]:
    return [
        TranscriptMessage("user", text, ALICE, 1e9),
        TranscriptMessage("assistant", "ok", None, 1e9 + 1),
    ]


class Planted:
    """The shared memory, the ids of what was planted in it, and one small memory per entry
    audience for the paths that show only a few entries (linked entries: two; the delta
    header: three)."""

    def __init__(self, memory: FileMemory) -> None:
        self.memory = memory
        self.older: dict[str, str] = {}  # entry audience -> id of its older-file entry
        self.side: dict[str, FileMemory] = {}  # entry audience -> its small memory


def new_memory(base: Path) -> FileMemory:
    state = base / "state"
    state.mkdir(parents=True)
    (state / "audiences.json").write_text(json.dumps(BOOK))
    return FileMemory(MemoryScope("agent_general", base / "workspace", state))


def start_thread(memory: FileMemory) -> None:
    """The thread's first turn: its revision starts here."""
    revisions = ThreadRevisions(memory)
    try:
        revisions.take(THREAD, AgentView(memory, ACCESS))
    finally:
        revisions.close()


def plant_side(memory: FileMemory, label: str) -> None:
    """A public hit linked to a public control and to the entry; a public control and the
    entry changed after the thread's first turn."""
    add = memory.add_sync
    source = add("Linksource numbat", actor="cli", path=OLDER, fields=fields("public"))
    ctl = add(f"Linked linkctl{label}", actor="cli", path=OLDER, fields=fields("public"))
    target = add(f"Linked linked{label}", actor="cli", path=OLDER, fields=fields(label))
    relations = Relations(memory)
    try:
        relations.link(source.id, [(ctl.id, 0.9), (target.id, 0.8)])
    finally:
        relations.close()
    changed = [
        add(f"Delta deltactl{label}", actor="cli", path=OLDER, fields=fields("public")),
        add(f"Delta delta{label}", actor="cli", path=OLDER, fields=fields(label)),
    ]
    start_thread(memory)
    for entry in changed:
        memory.update_sync(entry.id, f"{entry.text} changed", actor="cli")


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Planted]:
    base = tmp_path_factory.mktemp("audience")
    memory = new_memory(base / "shared")
    plant = Planted(memory)
    add = memory.add_sync
    records = ConsolidationRecords(db_path(memory.scope.state_dir))
    control = add("Long-term epcontrol", actor="cli", path="MEMORY.md", fields=fields("public"))
    try:
        for label in WORDS:
            ep = add(f"Long-term ep{label}", actor="cli", path="MEMORY.md", fields=fields(label))
            records.record("conflict", control.id, ep.id, f"clash{label}", {})
            add(
                f"Profile always{label}",
                actor="cli",
                path="people.md",
                fields=fields(label, category="profile"),
            )
            add(
                f"Recent recent{label} quokka{label}",
                actor="cli",
                path=TODAY,
                fields=fields(label, category="notes"),
            )
            plant.older[label] = add(
                f"Older older{label} wombat{label} zorblax",
                actor="cli",
                path=OLDER,
                fields=fields(label, category="notes"),
            ).id
            index_transcript(
                memory,
                f"s-{label}",
                said(f"pangolin talk{label}"),
                min_new=1,
                audience=WORDS[label],
            )
            plant.side[label] = side = new_memory(base / label)
            plant_side(side, label)
        other = add(
            "Long-term epcontroltwo", actor="cli", path="MEMORY.md", fields=fields("public")
        )
        records.record("conflict", control.id, other.id, "clashcontrol", {})
    finally:
        records.close()
    yield plant
    close_all()
    for side in plant.side.values():
        side.close()
    memory.close()


def view(memory: FileMemory, room: str, policy: str, **more: object) -> AgentView:
    return AgentView(
        memory,
        ACCESS,
        room=ROOMS[room],
        policy=policy,  # type: ignore[arg-type]
        **more,  # type: ignore[arg-type]
    )


def section(block: str, title: str) -> str:
    """The section of a recall block that starts with ``title`` ('' when there is none)."""
    found = [part for part in block.split("\n\n") if part.startswith(title)]
    return found[0] if found else ""


def check(text: str, mark: str, policy: str, room: str, truth: object = None) -> None:
    """Each entry audience's ``mark`` is in ``text`` exactly when the table shows it; the
    public one (the positive control) always is."""
    assert f"{mark}public" in text, text  # the control: this read shows what it may
    for entry in WORDS:
        expected = (
            TRUTH[policy][(entry, room)] if truth is None else sessions_truth(policy, entry, room)
        )
        assert (f"{mark}{entry}" in text) == expected, (mark, entry, room, policy, text)


CASES = [(room, policy) for policy in TRUTH for room in ROOMS]
IDS = [f"{policy}-{room}" for room, policy in CASES]


def recall(memory: FileMemory, room: str, policy: str, query: str) -> str:
    return build_recall(
        memory,
        query,
        RecallSettings(hits=20, max_recent_lines=40),
        now=NOW,
        count=False,
        access=ACCESS,
        relations=LINKS,
        room=ROOMS[room],
        policy=policy,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize(("room", "policy"), CASES, ids=IDS)
def test_recall_sections_show_an_entry_only_where_its_audience_may_read(
    planted: Planted, room: str, policy: str
) -> None:
    query = " ".join(f"quokka{e} wombat{e}" for e in WORDS)
    block = recall(planted.memory, room, policy, query)
    check(section(block, "### Long-term memory: MEMORY.md"), "ep", policy, room)
    check(section(block, "### Always in context"), "always", policy, room)
    check(section(block, "### Recent (today and yesterday)"), "recent", policy, room)
    check(section(block, "### Related memories"), "older", policy, room)
    conflicts = section(block, "### Open conflicts")
    assert "clashcontrol" in conflicts, block  # the control: two public sides
    for entry in WORDS:
        assert (f"clash{entry}" in conflicts) == TRUTH[policy][(entry, room)], (entry, conflicts)


@pytest.mark.parametrize(("room", "policy"), CASES, ids=IDS)
def test_linked_entries_show_only_where_their_audience_may_read(
    planted: Planted, room: str, policy: str
) -> None:
    for entry, memory in planted.side.items():  # a public hit, linked to a control and the entry
        linked = section(recall(memory, room, policy, "numbat"), "### Linked to these")
        assert f"linkctl{entry}" in linked, linked  # the control
        assert (f"linked{entry}" in linked) == TRUTH[policy][(entry, room)], (entry, linked)


@pytest.mark.parametrize(("room", "policy"), CASES, ids=IDS)
def test_the_tools_show_an_entry_only_where_its_audience_may_read(
    planted: Planted, room: str, policy: str
) -> None:
    seen = view(planted.memory, room, policy)
    hits = seen.search_sync("zorblax", 50)
    check("\n".join(h.entry.text for h in hits), "older", policy, room)
    check("\n".join(e.text for e in seen.list_sync(500)), "older", policy, room)
    check("\n".join(e.text for e in seen.list_sync(500)), "recent", policy, room)
    query = run_query(seen, QueryRequest(query="zorblax", top_k=50), ASKER)
    check(query, "older", policy, room)
    read = seen.read_file_sync(OLDER, 1, 500)
    check(read, "older", policy, room)
    hidden = sum(not TRUTH[policy][(e, room)] for e in WORDS)
    assert read.count(HIDDEN) == hidden, read  # hidden lines are placeholders
    for entry, entry_id in planted.older.items():
        if TRUTH[policy][(entry, room)]:
            assert f"older{entry}" in seen.get_sync(entry_id).text
        else:
            with pytest.raises(MemoryStoreError, match="no memory with id"):
                seen.get_sync(entry_id)


@pytest.mark.parametrize(("room", "policy"), CASES, ids=IDS)
def test_the_delta_header_names_a_change_only_where_its_audience_may_read(
    planted: Planted, room: str, policy: str
) -> None:
    for entry, memory in planted.side.items():  # a public control and the entry changed
        revisions = ThreadRevisions(memory)
        try:
            header = revisions.take(THREAD, view(memory, room, policy), advance=False).render()
        finally:
            revisions.close()
        assert f"deltactl{entry} changed" in header, header  # the control
        assert (f"delta{entry} changed" in header) == TRUTH[policy][(entry, room)], header


@pytest.mark.parametrize(("room", "policy"), CASES, ids=IDS)
def test_past_conversations_show_only_where_their_audience_may_read(
    planted: Planted, room: str, policy: str
) -> None:
    seen = view(planted.memory, room, policy, sessions=True)
    found = "\n".join(h.entry.text for h in seen.search_sync("pangolin", 50))
    check(found, "talk", policy, room, truth=sessions_truth)
    for entry in WORDS:
        path = transcript_path(f"s-{entry}")
        if sessions_truth(policy, entry, room):
            assert f"talk{entry}" in seen.read_file_sync(path)
        else:
            with pytest.raises(MemoryStoreError, match="no session transcript"):
                seen.read_file_sync(path)


@pytest.mark.parametrize(("room", "policy"), CASES, ids=IDS)
def test_the_sql_filter_holds_and_the_gate_agree_with_the_table(
    planted: Planted, room: str, policy: str
) -> None:
    seen = view(planted.memory, room, policy)
    only = seen.reading()
    memory = planted.memory
    everything = memory.list_sync(1000)
    by_sql = {e.id for e in memory.index.select(only.where(), 1000)}
    by_holds = {e.id for e in everything if only.holds(e)}
    by_gate = {e.id for e in everything if may_read(seen.reader(), StoredEntry.of(e))}
    label = {w: e for e, w in WORDS.items()}
    by_table = {e.id for e in everything if TRUTH[policy][(label[e.fields.audience], room)]}
    assert planted.older["public"] in by_table  # the control
    assert by_sql == by_holds == by_gate == by_table


# -- writes ---------------------------------------------------------------------------------


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[FileMemory]:
    mem = FileMemory(MemoryScope("agent_general", tmp_path / "workspace", tmp_path / "state"))
    yield mem
    mem.close()


def book_of(memory: FileMemory) -> dict[str, dict[str, object]]:
    return json.loads((memory.scope.state_dir / "audiences.json").read_text())


def test_an_entry_written_in_a_room_carries_that_rooms_audience(memory: FileMemory) -> None:
    def told(room: str, text: str) -> str | None:
        added = view(memory, room, "strict").add_sync(text, actor="tool")
        return memory.get_sync(added.id).fields.audience

    assert told("dm-alice", "Alice likes figs") == f"dm:{ALICE}"
    assert told("lobby", "The lobby plant is a fern") == "public"
    assert told("no room", "Written from the CLI") is None
    key = told("encrypted-ab", "Alice and Bob share a secret")
    assert key is not None
    assert key.startswith("room:")
    recorded = book_of(memory)[key]
    assert recorded["readers"] == [ALICE, BOB]
    assert recorded["room"] == "!secret:x"
    assert recorded["kind"] == "encrypted"
    again = told("closed-ab", "Alice and Bob plan a trip")
    assert again is not None
    assert again != key
    assert book_of(memory)[again]["readers"] == [ALICE, BOB]


def test_an_update_from_a_room_narrows_the_entrys_audience(memory: FileMemory) -> None:
    entry = memory.add_sync("The team meets on Mondays", actor="cli", fields=fields("public"))
    control = memory.add_sync("The lobby has a fern", actor="cli", fields=fields("public"))
    view(memory, "dm-alice", "strict").update_sync(
        entry.id, "The team meets on Mondays; Alice will be late", actor="tool"
    )
    assert memory.get_sync(entry.id).fields.audience == f"dm:{ALICE}"
    lobby = "\n".join(
        h.entry.text for h in view(memory, "lobby", "strict").search_sync("team lobby", 10)
    )
    assert "The lobby has a fern" in lobby  # the control
    assert "Alice will be late" not in lobby
    assert memory.get_sync(control.id).fields.audience == "public"


def test_a_merge_takes_the_narrower_audience_of_its_sources(memory: FileMemory) -> None:
    state = memory.scope.state_dir
    state.mkdir(parents=True, exist_ok=True)
    (state / "audiences.json").write_text(json.dumps(BOOK))
    book = AudienceBook(state)
    assert narrower([None, None], book) is None  # both the scope's default
    assert narrower(["public", None], book) == "public"
    assert narrower(["public", f"dm:{ALICE}"], book) == f"dm:{ALICE}"
    assert narrower([TRIO_KEY, f"dm:{BOB}"], book) == f"dm:{BOB}"
    both = narrower([TEAM_KEY, TRIO_KEY], book)  # Alice and Bob: a room of the two
    assert both is not None
    assert both.startswith("room:")
    assert sorted(book_of(memory)[both]["readers"]) == [ALICE, BOB]  # type: ignore[arg-type]
    team = narrower([TEAM_KEY, "public"], book)  # the team room's readers, and its room
    assert team is not None
    assert team.startswith("room:")
    assert book_of(memory)[team]["readers"] == [ALICE, BOB]
    assert book_of(memory)[team]["room"] == "!team:x"
    nobody = narrower([UNKNOWN_KEY, "public"], book)  # unresolvable: nobody could read it
    assert nobody is not None
    assert nobody.startswith("room:")
    assert book_of(memory)[nobody]["readers"] == []


def test_a_hand_edit_of_the_audiences_takes_effect_at_the_next_read(memory: FileMemory) -> None:
    state = memory.scope.state_dir
    state.mkdir(parents=True, exist_ok=True)
    path = state / "audiences.json"
    path.write_text(json.dumps(BOOK))
    trio = memory.add_sync("The trio plays on Fridays", actor="cli", fields=fields("trioabc"))
    memory.add_sync("The lobby has a fern", actor="cli", fields=fields("public"))

    def in_carols_room() -> str:
        seen = AgentView(
            memory,
            ACCESS,
            room=RoomAudience.shared(frozenset({BOB, CAROL}), closed=True, room_id="!bc:x"),
        )
        return "\n".join(e.text for e in seen.list_sync(50))

    before = in_carols_room()
    edited = json.loads(path.read_text())
    edited[TRIO_KEY]["readers"] = [ALICE, BOB]  # a person takes Carol out
    path.write_text(json.dumps(edited))
    after = in_carols_room()
    assert "The trio plays on Fridays" in before
    assert "The lobby has a fern" in after  # the control
    assert "The trio plays on Fridays" not in after
    assert memory.get_sync(trio.id).fields.audience == TRIO_KEY  # the entry did not change


@pytest.mark.parametrize(("room", "policy"), CASES, ids=IDS)
def test_an_entry_is_changed_or_deleted_by_id_only_where_its_audience_may_read(
    tmp_path: Path, room: str, policy: str
) -> None:
    """An update or a delete by id answers an entry the room may not show as an id that does
    not exist, as a read does, and leaves it as it was; the entries the table shows (the
    public one in every room: the control) are changed and deleted."""
    memory = new_memory(tmp_path)
    seen = view(memory, room, policy)
    try:
        for entry in WORDS:
            kept = memory.add_sync(f"Change change{entry}", actor="cli", fields=fields(entry))
            gone = memory.add_sync(f"Delete delete{entry}", actor="cli", fields=fields(entry))
            if TRUTH[policy][(entry, room)]:
                seen.update_sync(kept.id, f"Changed change{entry}", actor="tool")
                assert seen.delete_sync(gone.id, actor="tool").text == f"Delete delete{entry}"
                assert memory.get_sync(kept.id).text == f"Changed change{entry}"
                assert memory.lookup(gone.id) is None
                continue
            with pytest.raises(MemoryStoreError, match="no memory with id"):
                seen.update_sync(kept.id, f"Changed change{entry}", actor="tool")
            with pytest.raises(MemoryStoreError, match="no memory with id"):
                seen.delete_sync(gone.id, actor="tool")
            assert memory.get_sync(kept.id).text == f"Change change{entry}"
            assert memory.get_sync(gone.id).text == f"Delete delete{entry}"
    finally:
        memory.close()


@pytest.mark.asyncio
async def test_a_delete_tool_in_the_lobby_neither_removes_nor_quotes_an_entry_told_in_a_dm(
    memory: FileMemory,
) -> None:
    """The leak this closes: the lobby's tools refused to read Alice's DM entry by id, yet
    deleted it and quoted its text in the answer. Now they answer as for an id that does not
    exist; Alice's own DM deletes it (the control)."""
    told = fields("dmalice")
    combination = memory.add_sync("Alice's safe combination is 31-07-88", actor="cli", fields=told)
    lawyer = memory.add_sync("Alice is seeing a divorce lawyer", actor="cli", fields=told)
    lobby = ScopeTools(memory, room=ROOMS["lobby"])
    unknown = await lobby.get(combination.id)
    assert unknown.startswith("error: no memory with id")
    assert await lobby.delete(combination.id) == unknown
    assert (await lobby.update(lawyer.id, "nothing")).startswith("error: no memory with id")
    text = memory.scope.entrypoint.read_text()
    assert "31-07-88" in text
    assert "divorce lawyer" in text
    in_her_dm = await ScopeTools(memory, room=ROOMS["dm-alice"]).delete(combination.id)
    assert in_her_dm.startswith("deleted ")
    assert "31-07-88" in in_her_dm
    assert "31-07-88" not in memory.scope.entrypoint.read_text()


def test_an_expired_entry_told_elsewhere_is_not_said_to_exist(memory: FileMemory) -> None:
    """An entry TTL expired is named as expired only where its audience may read it: in
    Bob's DM (the control), not in Alice's."""
    expired = EntryFields(audience=f"dm:{BOB}", state="soft_deleted", purge=dt.date(2027, 1, 1))
    entry = memory.add_sync("Bob's old password hint", actor="cli", fields=expired)
    with pytest.raises(MemoryStoreError, match="expired"):
        view(memory, "dm-bob", "strict").delete_sync(entry.id, actor="tool")
    for verb in ("get", "delete"):
        seen = view(memory, "dm-alice", "strict")
        act = seen.get_sync if verb == "get" else partial(seen.delete_sync, actor="tool")
        with pytest.raises(MemoryStoreError, match="no memory with id"):
            act(entry.id)


# -- conflicts offered in a person's DM -----------------------------------------------------

OFFERING = "models: {default: {id: x}}\nagents:\n  general: {}\nmemory:\n  embedder: none\n"


@pytest.fixture
def offering(tmp_path: Path) -> Iterator[tuple[Config, MemoryRegistry, FileMemory]]:
    """The config of a shared ``general``, its registry and its memory."""
    config = parse_config(OFFERING, "test")
    registry = MemoryRegistry(config, tmp_path / "storage", config_dir=tmp_path)
    memory = registry.for_agent("general")
    assert isinstance(memory, FileMemory)
    yield config, registry, memory
    registry.close()


def conflict_of(memory: FileMemory, first: MemoryEntry, second: MemoryEntry) -> str:
    """``first`` and ``second`` recorded as an open conflict, as consolidation's judge does."""
    records = ConsolidationRecords(db_path(memory.scope.state_dir))
    try:
        meta = {"a": {"id": first.id}, "b": {"id": second.id}}
        conflict = records.record("conflict", first.id, second.id, "not both", meta)
        assert conflict is not None
        return conflict.id
    finally:
        records.close()


def retold(memory: FileMemory, entry: MemoryEntry, label: str) -> None:
    """``entry`` with the audience ``label`` (as ``mindroom memory set --audience`` does)."""
    set_fields_sync(memory, entry.id, replace(entry.fields, audience=WORDS[label]), actor="cli")


def test_a_conflict_is_offered_in_a_dm_only_when_that_dm_may_show_both_entries(
    offering: tuple[Config, MemoryRegistry, FileMemory],
) -> None:
    """An entry told in Bob's DM that names Alice is not quoted to her in a conflict offer,
    until its audience says she may read it; a conflict with an entry told in her own DM is
    offered to her (the control)."""
    config, registry, memory = offering
    add = memory.add_sync
    work = add("Alice works at Acme", actor="cli", fields=fields("public"))
    fired = add("Alice was fired from Acme for embezzlement", actor="cli", fields=fields("dmbob"))
    monday = add("Alice plays chess on Mondays", actor="cli", fields=fields("public"))
    friday = add("Alice plays chess on Fridays", actor="cli", fields=fields("dmalice"))
    bobs = conflict_of(memory, work, fired)
    hers = conflict_of(memory, monday, friday)

    def offered() -> dict[str, str]:
        found = conflicts_to_offer(config, registry, "general", Person(ALICE))
        return {conflict.id: text for conflict, text in found}

    before = offered()
    assert "> Alice plays chess on Fridays" in before[hers]  # the control
    assert bobs not in before
    assert "embezzlement" not in "".join(before.values())
    retold(memory, fired, "public")  # read as it is now: offered once she may read it
    assert "embezzlement" in offered()[bobs]


def test_an_answer_to_a_conflict_offer_asks_the_gate_again(
    offering: tuple[Config, MemoryRegistry, FileMemory],
) -> None:
    """An entry whose audience narrowed after the offer (now Bob's DM alone) is neither
    archived by Alice's answer nor quoted in it; a conflict both of whose entries she may
    still read is settled (the control)."""
    config, registry, memory = offering
    add = memory.add_sync
    old = add("Alice plays chess on Mondays", actor="cli", fields=fields("public"))
    new = add("Alice plays chess on Fridays", actor="cli", fields=fields("public"))
    narrowed = conflict_of(memory, old, new)
    tea = add("Alice drinks tea", actor="cli", fields=fields("public"))
    coffee = add("Alice drinks coffee", actor="cli", fields=fields("public"))
    control = conflict_of(memory, tea, coffee)
    offered = {c.id for c, _ in conflicts_to_offer(config, registry, "general", Person(ALICE))}
    assert offered == {narrowed, control}
    retold(memory, old, "dmbob")
    retold(memory, new, "dmbob")

    def answer(conflict_id: str, keep_newer: bool) -> str:
        return answer_conflict(
            config, registry, "general", ALICE, conflict_id, keep_newer=keep_newer, actor=ALICE
        )

    refused = f"Nothing done: no conflict {narrowed!r} waiting for you."
    assert answer(narrowed, keep_newer=True) == refused
    assert answer(narrowed, keep_newer=False) == refused
    assert memory.lookup(old.id) is not None
    assert memory.lookup(new.id) is not None
    assert answer(control, keep_newer=True).startswith("Kept: Alice drinks coffee")
    assert memory.lookup(tea.id) is None
    records = ConsolidationRecords(db_path(memory.scope.state_dir))
    try:
        assert [c.id for c in records.conflicts() if c.status == "open"] == [narrowed]
    finally:
        records.close()
