"""nio's compiled schema checks decide as nio's own checks do, on what a real Synapse sends.

An encrypting person and an in-process bot talk in an encrypted DM: every response and event
either nio client parses (syncs, key uploads and queries, to-device Olm messages, room
events) is checked by both the compiled check and nio's jsonschema one, on copies of the same
data, and the two must agree on whether it is valid and on the defaults they fill in.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import nio
import nio.schemas
import pytest
from jsonschema.exceptions import ValidationError

from mindroom.adapters.matrix import nio_checks
from tests.integration.test_e2ee import echo_agent_in_encrypted_dm
from tests.support.harness import BotHarness
from tests.support.scripted_model import ScriptedModel
from tests.unit.test_nio_checks import outcome

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

NAMES = {id(schema): name for name, schema in vars(nio.schemas.Schemas).items()}


async def test_the_compiled_checks_agree_with_nios_on_a_real_encrypted_conversation(
    bot: BotHarness,
    model: ScriptedModel,
    synapse,  # noqa: ANN001
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    nio_checks.install()
    compared: list[tuple[str, str, str]] = []
    differences: list[str] = []

    def both(instance: object, schema: dict[str, Any]) -> None:
        theirs = outcome(nio_checks._original, copy.deepcopy(instance), schema)
        ours = outcome(nio_checks.validate_json, instance, schema)
        name = NAMES.get(id(schema), "?")
        compared.append((name, theirs[0], ours[0]))
        if theirs != ours:
            differences.append(f"{name}: nio {theirs[0]}, compiled {ours[0]} on {instance!r:.300}")
        if ours[0] == "invalid":
            raise ValidationError(f"{name} does not match")

    for module in ("nio.responses", "nio.events.misc", "nio.crypto.olm_machine"):
        monkeypatch.setattr(f"{module}.validate_json", both)

    async with echo_agent_in_encrypted_dm(bot, model, synapse, tmp_path / "keys") as (
        person,
        _,
        room_id,
    ):
        for text in ("the secret word is heliotrope", "and another one"):
            sent = await person.send(room_id, text)
            reply = await person.wait_for_reply(room_id, sent, timeout=40)
            assert reply["content"]["body"] == f"echo: {text}"

    assert differences == []
    # the syncs were checked compiled, after the first few through nio's own check
    assert nio_checks._compiled.get(id(nio.schemas.Schemas.sync)) is not None
    seen = {name for name, _, _ in compared}
    # the conversation went through the checks that matter: syncs, keys, Olm, room events
    assert {"sync", "keys_upload", "keys_query", "olm_event", "room_message"} <= seen, seen
    assert len(compared) > 100
