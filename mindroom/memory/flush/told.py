"""Who could read a conversation while it was held: the audience of what its flush learns.

The flush runs after a conversation goes quiet, or much later (a back-off, a restart). By
then its room may have changed: Alice's DM became a room with Bob in it, a closed room took
in a newcomer. What was said before was said to fewer people, and what the flush learns from
it must be recalled only where all of them could read (``memory.audience: strict``). So every
turn narrows a record of the readers the conversation has had (in the flush's row of the
ledger), and the flush uses the narrower of that record and the room as it is now.

A record is JSON: ``{"open": true}`` while every turn was in a room anyone can read, else
``{"readers": [...]}``, the people who could read every turn (a room whose rules were never
seen counts as closed to its people, as :func:`mindroom.memory.policy.audience.told_in`
reads it). It only ever narrows: someone who joins later never widens it.
"""

from __future__ import annotations

import json

from mindroom.memory.policy.gate import RoomAudience


def _closed_readers(room: RoomAudience) -> frozenset[str] | None:
    """The readers of a room nobody else can read; None for a room anyone can read."""
    if room.closed or not room.rules_known:
        return room.readers
    return None


def _readers(told: str | None) -> frozenset[str] | None:
    """The readers a record names; None when it names none (open, or nothing recorded)."""
    if not told:
        return None
    try:
        found = json.loads(told).get("readers")
    except (ValueError, AttributeError):  # unreadable: read as nobody, never as everyone
        return frozenset()
    return None if found is None else frozenset(str(r) for r in found)


def narrowed(told: str | None, room: RoomAudience | None) -> str | None:
    """The record after a turn in ``room`` (None: not known, the record stays)."""
    if room is None:
        return told
    before, now = _readers(told), _closed_readers(room)
    if before is None and now is None:
        return told if told else json.dumps({"open": True})
    if before is None:
        readers = now
    elif now is None:
        readers = before
    else:
        readers = before & now
    return json.dumps({"readers": sorted(readers or ())})


def heard_by(told: str | None, room: RoomAudience) -> RoomAudience:
    """``room`` (as it is now) narrowed to the readers the record names: who could read the
    whole conversation."""
    before = _readers(told)
    if before is None:
        return room
    now = _closed_readers(room)
    readers = before if now is None else before & now
    if len(readers) == 1:
        return RoomAudience.private_to(next(iter(readers)), room.room_id)
    return RoomAudience.shared(
        readers, closed=True, room_id=room.room_id, encrypted=room.encrypted, name=room.name
    )
