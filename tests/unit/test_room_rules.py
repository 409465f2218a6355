"""Which rooms count as one person's alone with mindroom, decided by allow-list from
the room's state as its events said it: nio's own room starts as ``invite`` and ``shared``
before any state arrived, which must not read as a closed room. nio's real sync parsing feeds
the account; no homeserver is needed to hand it a sync body."""

from __future__ import annotations

from typing import Any

import nio
import pytest

from mindroom.adapters.matrix.client import MatrixAccount, RoomRulesClient

AGENT, ALICE, EVE = "@mindroom_mind:localhost", "@alice:localhost", "@eve:localhost"
_ids = iter(range(10_000))


def _state(kind: str, content: dict[str, Any], state_key: str = "") -> dict[str, Any]:
    event_id = f"$e{next(_ids)}"
    return {
        "type": kind,
        "state_key": state_key,
        "content": content,
        "sender": ALICE,
        "event_id": event_id,
        "origin_server_ts": 1,
    }


def _member(user: str, membership: str = "join") -> dict[str, Any]:
    return _state("m.room.member", {"membership": membership}, user)


def _room(*extra: dict[str, Any], members: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    events = [
        _state("m.room.create", {"creator": ALICE, "room_version": "10"}),
        *(members or (_member(ALICE), _member(AGENT))),
        *extra,
    ]
    return {"state": {"events": events}, "timeline": {"events": [], "limited": False}}


JOIN_INVITE = _state("m.room.join_rules", {"join_rule": "invite"})
SHARED = _state("m.room.history_visibility", {"history_visibility": "shared"})


@pytest.mark.asyncio
async def test_only_rooms_whose_state_says_invite_only_and_private_history_are_alices_alone() -> (
    None
):
    rooms = {
        "!closed:l": _room(JOIN_INVITE, SHARED),
        "!no_rules:l": _room(),  # no join rule nor history state seen yet
        "!no_history:l": _room(JOIN_INVITE),
        "!old_rule:l": _room(_state("m.room.join_rules", {"join_rule": "private"}), SHARED),
        "!odd_rule:l": _room(_state("m.room.join_rules", {"join_rule": 7}), SHARED),
        "!readable:l": _room(
            JOIN_INVITE,
            _state("m.room.history_visibility", {"history_visibility": "world_readable"}),
        ),
        "!restricted:l": _room(_state("m.room.join_rules", {"join_rule": "restricted"}), SHARED),
        "!eve_invited:l": _room(
            JOIN_INVITE, SHARED, members=(_member(ALICE), _member(AGENT), _member(EVE, "invite"))
        ),
    }
    client = RoomRulesClient("http://127.0.0.1:9", AGENT)
    client.user_id = AGENT
    account = MatrixAccount("mind", client)
    response = nio.SyncResponse.from_dict({"next_batch": "s1", "rooms": {"join": rooms}})
    assert isinstance(response, nio.SyncResponse)
    await account.receive(response)
    closed = {room for room in rooms if account.only_with(room, ALICE, {AGENT})}
    # a later sync opens the closed room to a space: the change counts at once
    opened = _state("m.room.join_rules", {"join_rule": "knock_restricted"})
    later = {"!closed:l": {"timeline": {"events": [opened], "limited": False}}}
    response = nio.SyncResponse.from_dict({"next_batch": "s2", "rooms": {"join": later}})
    assert isinstance(response, nio.SyncResponse)
    await account.receive(response)
    after = account.only_with("!closed:l", ALICE, {AGENT})
    await client.close()

    assert closed == {"!closed:l"}  # the control: the one room the rules allow
    assert account.client.rooms["!no_rules:l"].join_rule == "invite"  # nio's default, not seen
    assert not after
