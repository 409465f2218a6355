"""The map of a person's data (mindroom/people/data.py) is complete by construction: every
module that opens a database or writes a JSONL file is claimed by a store of the map, or
named in NOT_PERSONAL with the reason it holds nothing of a person. A store added without
registering itself fails here. Also: the SQLite helpers erase bytes, not only rows, and a
person's own download holds of shared memories only what their direct chat could show them."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

import mindroom
from mindroom.config import parse_config
from mindroom.config.schema import Config
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords, db_path
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.audit import person_export
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.policy.view import AgentView
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.search.session_index import SessionIndex, TranscriptMessage
from mindroom.people.data import (
    NOT_PERSONAL,
    STORES,
    Person,
    delete_owned_rows,
    forget_person,
    replace_text,
)

PACKAGE = Path(mindroom.__file__).parent
# how a module opens a store of its own
OPENS_A_STORE = re.compile(
    r"open_database\(|open_store\(|sqlite3\.connect\(|SqliteDb\b|create_async_engine\(|sqlite_engine\("
    r"|\.jsonl\b|aiosqlite\.connect\(|history_db_path|audiences\.json\""
)


def modules_opening_stores() -> set[str]:
    found = set()
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "people" / "data.py":  # the map itself names every store
            continue
        if OPENS_A_STORE.search(path.read_text(encoding="utf-8")):
            relative = path.relative_to(PACKAGE.parent).with_suffix("")
            found.add(".".join(relative.parts).removesuffix(".__init__"))
    return found


def test_every_module_that_opens_a_store_is_in_the_map_of_a_persons_data() -> None:
    claimed = {module for store in STORES for module in store.modules}
    opening = modules_opening_stores()
    assert opening  # the scan finds the stores it is there to find (positive control)
    assert "mindroom.memory.policy.consent" in opening
    assert "mindroom.memory.policy.audience" in opening  # audiences.json: readers' IDs
    unregistered = sorted(opening - claimed - set(NOT_PERSONAL))
    assert not unregistered, (
        f"modules that open a store the map of a person's data does not know: {unregistered}; "
        "register each in mindroom/people/data.py (STORES: how to list, export and erase a "
        "person's part) or, if it can hold nothing of a person, in NOT_PERSONAL with why"
    )


def _bytes_of(path: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (path, Path(f"{path}-wal")) if p.exists())


def test_erasing_rows_leaves_no_bytes_in_the_file_its_wal_or_fts_segments(tmp_path: Path) -> None:
    path = tmp_path / "store.db"
    db = sqlite3.connect(path)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE runs (id INTEGER PRIMARY KEY, user_id TEXT, text TEXT)")
    db.execute("CREATE VIRTUAL TABLE search USING fts5(text, tokenize='porter unicode61')")
    for user, word in (("@alice:x", "alicesecret7731"), ("@bob:x", "bobsecret8842")):
        db.execute("INSERT INTO runs (user_id, text) VALUES (?, ?)", (user, f"{word} said"))
        db.execute("INSERT INTO search (text) VALUES (?)", (f"{word} said",))
    db.commit()
    db.close()
    assert b"alicesecret7731" in _bytes_of(path)  # positive control

    removed = delete_owned_rows(path, Person("@alice:x"))
    replace_text(path, {"alicesecret7731 said"}, "[forgotten]")

    assert removed == 1
    assert b"alicesecret7731" not in _bytes_of(path)
    assert b"bobsecret8842" in _bytes_of(path)
    with sqlite3.connect(path) as check:
        assert check.execute("SELECT count(*) FROM search WHERE search MATCH 'bobsecret8842'")
        assert not check.execute(
            "SELECT * FROM search WHERE search MATCH 'alicesecret7731'"
        ).fetchall()


ALICE, BOB, CAROL = "@alice:example.org", "@bob:example.org", "@carol:example.org"
GENERAL = "models: {default: {id: x}}\nagents:\n  general: {}\nmemory:\n  embedder: none\n"


@pytest.fixture
def general(tmp_path: Path) -> Iterator[tuple[Config, Path, MemoryRegistry, FileMemory]]:
    """A config with one shared agent, general, and its memory: (config, storage, registry,
    memory)."""
    config = parse_config(GENERAL, "test")
    storage = tmp_path / "storage"
    registry = MemoryRegistry(config, storage, config_dir=tmp_path)
    memory = registry.for_agent("general")
    assert isinstance(memory, FileMemory)
    try:
        yield config, storage, registry, memory
    finally:
        registry.close()


def _shared_part(data: dict[str, object], store: str = "shared_memory") -> str:
    stores = data["stores"]
    assert isinstance(stores, dict)
    return json.dumps(stores[store], ensure_ascii=False)


def test_a_persons_own_download_holds_only_the_shared_memory_they_could_be_shown(
    general: tuple[Config, Path, MemoryRegistry, FileMemory],
) -> None:
    config, storage, registry, memory = general

    def told_in(room: RoomAudience, text: str) -> str:
        view = AgentView(memory, CategoryAccess.of(config, "general"), room=room)
        return view.add_sync(text, actor="tool").id

    lobby = RoomAudience.shared(frozenset({ALICE, BOB}), room_id="!lobby:x")
    ours = RoomAudience.shared(frozenset({ALICE, BOB}), closed=True, room_id="!plans:x")
    theirs = RoomAudience.shared(frozenset({BOB, CAROL}), closed=True, room_id="!games:x")
    told_in(RoomAudience.private_to(BOB, "!bob-dm:x"), f"{ALICE} was fired for embezzlement")
    told_in(theirs, f"{ALICE} is getting a surprise party")
    quiet = told_in(lobby, f"{ALICE} likes quiet mornings")
    told_in(RoomAudience.private_to(ALICE, "!alice-dm:x"), f"{ALICE} sleeps badly")
    told_in(ours, f"{ALICE} plans the trip with Bob")
    early = told_in(lobby, f"{ALICE} gets up at six")
    loud = told_in(
        RoomAudience.private_to(BOB, "!bob-dm:x"),
        "Bob likes loud mornings after his night shifts at the clinic",
    )
    records = ConsolidationRecords(db_path(memory.scope.state_dir))
    try:
        records.record("conflict", quiet, loud, "opposite morning habits", {"b": "shifts"})
        records.record("duplicate", quiet, early, "both about her mornings", {})
    finally:
        records.close()

    admin = _shared_part(person_export(config, registry, storage, ALICE))
    own = _shared_part(person_export(config, registry, storage, ALICE, for_person=True))

    # what her own direct chat could show her: public, her DM, a closed room she read
    for shown in ("quiet mornings", "sleeps badly", "plans the trip", "both about her"):
        assert shown in own, shown
    # learned where she could not read, or a record quoting such an entry
    for hidden in ("embezzlement", "surprise party", "night shifts", "opposite morning"):
        assert hidden not in own, hidden
    # an admin's export (mindroom memory export --user) is complete, as before
    for kept in ("embezzlement", "surprise party", "opposite morning", "quiet mornings"):
        assert kept in admin, kept

    forget_person(config, storage, registry, ALICE)  # forget-me still erases it all
    left = "\n".join(e.text for e in memory.list_sync())
    assert "Bob likes loud mornings" in left  # the control: not hers, kept
    assert ALICE not in left


def test_a_persons_own_download_holds_only_the_conversations_they_could_be_shown(
    general: tuple[Config, Path, MemoryRegistry, FileMemory],
) -> None:
    config, storage, registry, memory = general
    index = SessionIndex(memory.scope.state_dir / "transcripts.db")
    try:
        for session, text, audience in (
            ("bob-dm", f"how do I tell {ALICE} about the layoffs", f"dm:{BOB}"),
            ("lobby", f"{ALICE} brings the cake on Friday", "public"),
            ("alice-dm", f"I am {ALICE} and I hate cake", f"dm:{ALICE}"),
        ):
            said = TranscriptMessage("user", text, BOB if session != "alice-dm" else ALICE, 1)
            index.append(session, [said], start=0, audience=audience)
    finally:
        index.close()

    admin = _shared_part(person_export(config, registry, storage, ALICE), "session_index")
    own = _shared_part(
        person_export(config, registry, storage, ALICE, for_person=True), "session_index"
    )

    assert "brings the cake" in own  # a public room: she could be shown it
    assert "I hate cake" in own  # her own DM
    assert "layoffs" not in own  # Bob's DM that names her
    assert "layoffs" in admin  # an admin's export is complete, as before
