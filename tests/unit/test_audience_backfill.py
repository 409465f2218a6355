"""Entries written from a conversation before audiences were recorded get the audience of the
room they were learned in, as the rooms are now; hand-written lines and entries of no known
room keep the scope's default."""

from __future__ import annotations

import json
from pathlib import Path

from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.audience import BACKFILL_MARK, AudienceBook, backfill
from mindroom.memory.policy.gate import RoomAudience

ALICE_DM = "general:!dm:hs"
TEAM_ROOM = "general:!team:hs:$thread"
LEFT_ROOM = "general:!left:hs"


def rooms(run: str) -> RoomAudience | None:
    """The rooms as the bot sees them now: Alice's DM, a closed room of two, one it left."""
    if run == ALICE_DM:
        return RoomAudience.private_to("@alice:hs", "!dm:hs")
    if run == TEAM_ROOM:
        return RoomAudience.shared(
            frozenset({"@alice:hs", "@bob:hs"}), closed=True, room_id="!team:hs"
        )
    return None


def test_old_entries_get_the_audience_of_the_room_their_conversation_was_in(
    file_memory: FileMemory, root: Path
) -> None:
    salary = file_memory.add_sync("Alice earns 91k", actor="flush", run=ALICE_DM)
    plan = file_memory.add_sync("The team ships in May", actor="flush", run=TEAM_ROOM)
    gone = file_memory.add_sync("Carol likes jazz", actor="flush", run=LEFT_ROOM)
    cli = file_memory.add_sync("The office is in Lyon", actor="cli")
    (root / "MEMORY.md").write_text((root / "MEMORY.md").read_text() + "- written by hand\n")

    assert backfill(file_memory, rooms, actor="audience") == 2

    by_text = {e.text: e for e in file_memory.list_sync(100)}
    assert by_text[salary.text].fields.audience == "dm:@alice:hs"
    key = by_text[plan.text].fields.audience
    assert key is not None
    told = AudienceBook(file_memory.scope.state_dir).resolve(key)
    assert told is not None
    assert told.readers == {"@alice:hs", "@bob:hs"}
    assert by_text[gone.text].fields.audience is None  # its room is not known now
    assert by_text[cli.text].fields.audience is None  # no conversation: the scope's default
    assert by_text["written by hand"].fields.audience is None
    assert backfill(file_memory, rooms, actor="audience") == 0  # once is enough


def test_a_scope_left_with_nothing_to_give_reads_no_history_at_the_next_start(
    file_memory: FileMemory,
) -> None:
    mark = file_memory.scope.state_dir / BACKFILL_MARK
    file_memory.add_sync("Alice earns 91k", actor="flush", run=ALICE_DM)
    gone = file_memory.add_sync("Carol likes jazz", actor="flush", run=LEFT_ROOM)

    assert backfill(file_memory, rooms, actor="audience") == 1
    assert json.loads(mark.read_text()) == {"done": False, "left": 1}  # Carol's room unknown

    def rejoined(run: str) -> RoomAudience | None:  # the bot is back in the room it left
        if run == LEFT_ROOM:
            return RoomAudience.private_to("@carol:hs", "!left:hs")
        return rooms(run)

    assert backfill(file_memory, rejoined, actor="audience") == 1  # tried again
    assert _audience(file_memory, gone.text) == "dm:@carol:hs"
    assert json.loads(mark.read_text()) == {"done": True, "left": 0}

    # An entry of a conversation without an audience, after the mark: a start that read the
    # history would give it one; this one does not read it.
    late = file_memory.add_sync("Alice plays chess", actor="flush", run=ALICE_DM)
    assert backfill(file_memory, rooms, actor="audience") == 0
    assert _audience(file_memory, late.text) is None

    mark.unlink()  # the control: without the mark, the history is read and it is given one
    assert backfill(file_memory, rooms, actor="audience") == 1
    assert _audience(file_memory, late.text) == "dm:@alice:hs"


def _audience(memory: FileMemory, text: str) -> str | None:
    [entry] = [e for e in memory.list_sync(100) if e.text == text]
    return entry.fields.audience
