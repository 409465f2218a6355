"""``!config set`` racing a person's editor: the person's save is never overwritten."""

from __future__ import annotations

import json

import pytest

from mindroom.config import store
from mindroom.config.store import ConfigDocument
from tests.support.harness import BotHarness, Human, config_text, unique
from tests.support.scripted_model import ScriptedModel
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


async def test_config_set_in_chat_racing_an_editor_is_refused_and_keeps_the_edit(
    bot: BotHarness, human: Human, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    room = unique("race")
    config = config_text(
        model.base_url,
        {"general": {"rooms": [room]}},
        authorization={"admins": [human.user_id]},
    )
    room_id = await bot.start_in_room(config, room, human)
    path = bot.storage / "config.yaml"
    edited = json.loads(config)
    edited["agents"]["general"]["instructions"] = ["Edited by hand."]
    theirs = json.dumps(edited, indent=4)
    real_set = store.ConfigDocument.set

    def set_while_the_person_saves(self: ConfigDocument, key: str, value: object) -> None:
        real_set(self, key, value)  # read and edited; the person's editor saves just now
        swap = path.with_name("config.yaml.swp")
        swap.write_text(theirs)
        swap.replace(path)

    monkeypatch.setattr(store.ConfigDocument, "set", set_while_the_person_saves)
    raced = await human.send(room_id, "!config set agents.general.role Tells jokes.")
    answer = await human.wait_for_reply(room_id, raced)
    body = answer["content"]["body"]
    assert body.startswith("Refused:"), body
    assert "config.yaml: changed since it was read; run the command again" in body
    assert path.read_text() == theirs  # the person's save, byte for byte
    await wait_until(lambda: bot.bot.config.agents["general"].instructions == ["Edited by hand."])
    assert bot.bot.config.agents["general"].role == ""

    monkeypatch.undo()  # positive control: without a racing editor the same command lands
    again = await human.send(room_id, "!config set agents.general.role Tells jokes.")
    answer = await human.wait_for_reply(room_id, again)
    assert "applied" in answer["content"]["body"]
    assert bot.bot.config.agents["general"].role == "Tells jokes."
    assert bot.bot.config.agents["general"].instructions == ["Edited by hand."]
