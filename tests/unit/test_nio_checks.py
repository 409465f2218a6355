"""nio's compiled schema checks: invalid data is invalid to both, defaults are filled alike.

The same checks run against a real Synapse in ``tests/integration/test_nio_checks.py``.
"""

from __future__ import annotations

import copy
from typing import Any

import nio
import nio.schemas
from jsonschema.exceptions import ValidationError

from mindroom.adapters.matrix import nio_checks


def outcome(check: Any, instance: object, schema: dict[str, Any]) -> tuple[str, object]:  # noqa: ANN401
    """What ``check`` made of ``instance``: ``("valid", the instance with its defaults)`` or
    ``("invalid", None)`` (nio parses nothing of an invalid one but its error fields)."""
    try:
        check(instance, schema)
    except ValidationError:
        return "invalid", None
    return "valid", instance


def test_invalid_data_is_invalid_to_both_and_defaults_are_filled_alike() -> None:
    nio_checks.install()
    message = {"type": "m.room.message", "content": {"body": "no msgtype"}}  # invalid
    good = {
        "type": "m.room.message",
        "sender": "@a:localhost",
        "event_id": "$e",
        "origin_server_ts": 1,
        "content": {"msgtype": "m.text", "body": "hi"},
    }
    bad_sender = {**good, "sender": "not-a-user-id"}
    cases = [
        (message, nio.schemas.Schemas.room_message),
        (good, nio.schemas.Schemas.room_message),
        (good, nio.schemas.Schemas.room_event),
        (bad_sender, nio.schemas.Schemas.room_event),
        ({"next_batch": "s1"}, nio.schemas.Schemas.sync),  # defaults fill in the rest
        ({"next_batch": 5}, nio.schemas.Schemas.sync),
        ({}, nio.schemas.Schemas.sync),
        ([], nio.schemas.Schemas.sync),
        ({"user_id": "@a:b", "access_token": "t", "device_id": "D"}, nio.schemas.Schemas.login),
        ({"user_id": "a", "access_token": "t", "device_id": "D"}, nio.schemas.Schemas.login),
    ]
    verdicts = []
    for instance, schema in cases:
        theirs = outcome(nio_checks._original, copy.deepcopy(instance), schema)
        ours = outcome(nio_checks.validate_json, copy.deepcopy(instance), schema)
        assert ours == theirs, (instance, theirs, ours)
        verdicts.append(ours[0])
    # the control: both kinds of verdict occur, and the defaults were really filled in
    assert verdicts.count("invalid") >= 4
    assert verdicts.count("valid") >= 3
    filled = outcome(nio_checks.validate_json, {"next_batch": "s1"}, nio.schemas.Schemas.sync)[1]
    assert isinstance(filled, dict)
    assert "rooms" in filled
    assert nio.responses.validate_json is nio_checks.validate_json  # what nio calls now
    assert isinstance(nio.SyncResponse.from_dict({"next_batch": "s1"}), nio.SyncResponse)
