"""nio's compiled schema checks decide as nio's own do, and fill in the same defaults.

The same checks run against a real Synapse in ``tests/integration/test_nio_checks.py``.
"""

from __future__ import annotations

import copy
import importlib.util
from typing import Any

import fastjsonschema
import nio
import nio.schemas
import pytest
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


def pristine_schemas() -> dict[str, dict[str, Any]]:
    """nio's schemas as its source writes them, loaded afresh: nio's own check fills its
    schemas' default objects as it uses them, so the ones in ``nio.schemas`` depend on what
    this process parsed before."""
    spec = importlib.util.spec_from_file_location("pristine_nio_schemas", nio.schemas.__file__)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {n: v for n, v in vars(module.Schemas).items() if isinstance(v, dict)}


def compare(name: str, instance: object) -> tuple[str, object]:
    """Both checks on fresh copies of ``instance`` and of nio's schema ``name``; they must
    decide alike and fill in the same defaults. What they made of it."""
    schema = pristine_schemas()[name]
    theirs = outcome(nio_checks._original, copy.deepcopy(instance), copy.deepcopy(schema))
    check = nio_checks.compiled(copy.deepcopy(schema))
    assert check is not None, name

    def ours_check(data: object, _: object) -> None:
        try:
            check(data)
        except fastjsonschema.JsonSchemaValueException as exc:
            raise ValidationError(exc.message) from None

    ours = outcome(ours_check, copy.deepcopy(instance), schema)
    assert ours == theirs, (name, instance, theirs, ours)
    return ours


STATE_EVENT = {"type": "m.room.power_levels", "sender": "@a:localhost", "state_key": ""}


def test_defaults_inside_defaults_are_filled_as_nio_fills_them() -> None:
    verdict, synced = compare("sync", {"next_batch": "s1"})
    assert verdict == "valid"
    assert isinstance(synced, dict)
    assert synced["rooms"] == {"invite": {}, "join": {}, "leave": {}}  # not just {}
    assert synced["to_device"] == {"events": []}
    verdict, levels = compare("room_power_levels", {**STATE_EVENT, "content": {}})
    assert verdict == "valid"
    assert isinstance(levels, dict)
    assert levels["content"]["notifications"] == {"room": 50}
    joined = {"timeline": {"events": []}}
    room = {"rooms": {"join": {"!r:localhost": joined}}, "next_batch": "s2"}
    _, synced = compare("sync", room)
    assert isinstance(synced, dict)
    assert synced["rooms"]["join"]["!r:localhost"]["state"] == {"events": []}
    assert synced["rooms"]["invite"] == {}


def test_invalid_data_is_invalid_to_both() -> None:
    good = {
        "type": "m.room.message",
        "sender": "@a:localhost",
        "event_id": "$e",
        "origin_server_ts": 1,
        "content": {"msgtype": "m.text", "body": "hi"},
    }
    cases = [
        ("room_message", {"type": "m.room.message", "content": {"body": "no msgtype"}}),
        ("room_message", good),
        ("room_event", good),
        ("room_event", {**good, "sender": "not-a-user-id"}),
        ("sync", {"next_batch": 5}),
        ("sync", {}),
        ("sync", []),
        ("login", {"user_id": "@a:b", "access_token": "t", "device_id": "D"}),
        ("login", {"user_id": "a", "access_token": "t", "device_id": "D"}),
        ("room_power_levels", {**STATE_EVENT, "content": {"ban": "fifty"}}),
    ]
    verdicts = [compare(name, instance)[0] for name, instance in cases]
    assert verdicts.count("invalid") >= 5  # the control: both verdicts occur
    assert verdicts.count("valid") >= 3


def test_every_nio_schema_compiles_but_one_and_decides_alike_on_empty_data() -> None:
    schemas = pristine_schemas()
    left_to_nio = [n for n, schema in schemas.items() if nio_checks.compiled(schema) is None]
    assert left_to_nio == ["delete_devices"]  # its own check stays
    for name in schemas:
        if name not in left_to_nio:
            for instance in ({}, [], "text", {"type": 1}):
                compare(name, instance)


def test_nio_parses_through_the_installed_check() -> None:
    nio_checks.install()
    assert nio.responses.validate_json is nio_checks.validate_json
    assert nio.events.misc.validate_json is nio_checks.validate_json
    parsed = nio.SyncResponse.from_dict({"next_batch": "s1"})
    assert isinstance(parsed, nio.SyncResponse)
    assert parsed.rooms.join == {}
    assert isinstance(nio.SyncResponse.from_dict({"next_batch": 5}), nio.SyncError)


def test_a_schema_is_compiled_only_once_it_is_used_often(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nio_checks, "_uses", {})
    monkeypatch.setattr(nio_checks, "_compiled", {})
    schema = nio.schemas.Schemas.room_message
    event = {"type": "m.room.message", "content": {"msgtype": "m.text", "body": "hi"}}
    for _ in range(nio_checks.COMPILE_AFTER - 1):  # nio's own check, nothing compiled yet
        nio_checks.validate_json(copy.deepcopy(event), schema)
    assert id(schema) not in nio_checks._compiled
    nio_checks.validate_json(copy.deepcopy(event), schema)
    assert nio_checks._compiled[id(schema)] is not None
    with pytest.raises(ValidationError):  # and the compiled check refuses what nio's refuses
        nio_checks.validate_json({"type": "m.room.message", "content": {}}, schema)
    foreign = {"type": "object", "required": ["x"]}  # not nio's: never compiled or kept
    for _ in range(nio_checks.COMPILE_AFTER + 1):
        nio_checks.validate_json({"x": 1}, foreign)
    assert id(foreign) not in nio_checks._compiled
