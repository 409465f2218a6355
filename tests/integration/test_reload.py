"""Hot reload: edit config.yaml while mindroom runs; bad edits never take it down."""

from __future__ import annotations

import asyncio
import json

import nio
import pytest

from tests.support.harness import BotHarness, Human, config_text, relation, unique
from tests.support.scripted_model import ScriptedModel, system_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


def write(bot: BotHarness, doc: dict) -> None:
    path = bot.storage / "config.yaml"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.replace(path)


async def test_agents_are_added_changed_and_removed_while_running(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("live")
    doc = json.loads(config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await bot.start_in_room(json.dumps(doc), room, human)
    general_account = bot.bot.agents["general"]

    doc["agents"]["coder"] = {"role": "Writes code.", "rooms": [room]}
    write(bot, doc)
    await wait_until(lambda: "coder" in bot.bot.agents)
    coder = bot.bot.agents["coder"].user_id
    await human.wait_for(
        lambda e: (
            e.get("type") == "m.room.member"
            and e.get("state_key") == coder
            and e["content"].get("membership") == "join"
        )
    )
    asked = await human.send(room_id, "@coder hello", mention=[coder])
    reply = await human.wait_for_reply(room_id, asked)
    assert reply["sender"] == coder
    assert bot.bot.agents["general"] is general_account  # untouched agents keep running

    doc["agents"]["general"]["instructions"] = ["Always answer in rhymes."]
    doc["agents"]["general"]["display_name"] = "Poet"
    write(bot, doc)
    await wait_until(
        lambda: bot.bot.config.agents["general"].instructions == ["Always answer in rhymes."]
    )
    general = general_account.user_id
    asked = await human.send(room_id, "@general hi", mention=[general])
    await human.wait_for_reply(room_id, asked)
    assert "Always answer in rhymes." in system_text(model.requests[-1])
    await human.wait_for(
        lambda e: (
            e.get("type") == "m.room.member"
            and e.get("state_key") == general
            and e["content"].get("displayname") == "Poet"
        )
    )

    del doc["agents"]["coder"]
    write(bot, doc)
    await human.wait_for(
        lambda e: (
            e.get("type") == "m.room.member"
            and e.get("state_key") == coder
            and e["content"].get("membership") == "leave"
        )
    )
    assert "coder" not in bot.bot.agents


async def test_invalid_config_keeps_the_bot_answering_until_it_is_fixed(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("live")
    doc = json.loads(config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await bot.start_in_room(json.dumps(doc), room, human)
    path = bot.storage / "config.yaml"

    path.write_text("agents: [this is: not valid")
    await wait_until(lambda: bot.bot.reloader.error is not None)
    asked = await human.send(room_id, "still there?")
    await human.wait_for_reply(room_id, asked)
    status = await human.send(room_id, "!config status")
    shown = await human.wait_for_reply(room_id, status)
    assert "not valid YAML" in shown["content"]["body"]
    assert "config.yaml" in shown["content"]["body"]

    doc["agents"]["general"]["instructions"] = ["Fixed and applied."]
    write(bot, doc)
    await wait_until(lambda: bot.bot.reloader.error is None)
    asked = await human.send(room_id, "and now?")
    await human.wait_for_reply(room_id, asked)
    assert "Fixed and applied." in system_text(model.requests[-1])


async def test_config_set_in_chat_is_for_admins_only(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    room = unique("live")
    config = config_text(
        model.base_url,
        {"general": {"rooms": [room]}},
        authorization={"admins": [human.user_id]},
    )
    room_id = await bot.start_in_room(config, room, human)
    other = await Human.create(synapse)
    try:
        await other.join(room_id)
        refused = await other.send(room_id, "!config set agents.general.role Hacked")
        answer = await other.wait_for_reply(room_id, refused)
        assert "Only admins" in answer["content"]["body"]
        assert bot.bot.config.agents["general"].role == ""

        bad = await human.send(room_id, "!config set agents.general.model nowhere")
        answer = await human.wait_for_reply(room_id, bad)
        assert "Refused" in answer["content"]["body"]

        good = await human.send(room_id, "!config set agents.general.role Tells jokes.")
        answer = await human.wait_for_reply(room_id, good)
        assert "applied" in answer["content"]["body"]
        assert bot.bot.config.agents["general"].role == "Tells jokes."
        assert "Tells jokes." in (bot.storage / "config.yaml").read_text()
        got = await human.send(room_id, "!config get agents.general.role")
        answer = await human.wait_for_reply(room_id, got)
        assert "Tells jokes." in answer["content"]["body"]
        assert relation(answer)["m.in_reply_to"]["event_id"] == got
    finally:
        await other.close()


async def test_config_answers_in_chat_never_show_a_secret(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    secret = "plain-password-42"  # no well-known format: hidden because of its key
    room = unique("live")
    doc = json.loads(
        config_text(
            model.base_url,
            {"general": {"rooms": [room]}},
            authorization={"admins": [human.user_id]},
        )
    )
    doc["models"]["default"]["api_key"] = secret
    room_id = await bot.start_in_room(json.dumps(doc), room, human)

    async def ask(command: str) -> str:
        asked = await human.send(room_id, command)
        answer = await human.wait_for_reply(room_id, asked)
        content = answer["content"]
        return content["body"] + "\n" + content.get("formatted_body", "")

    shown = await ask("!config get models.default.id")  # positive control: values are shown
    assert "scripted" in shown
    shown = await ask("!config get models.default.api_key")
    assert "models.default.api_key" in shown
    assert "redacted" in shown
    assert secret not in shown
    shown = await ask("!config get models.default")
    assert "scripted" in shown
    assert secret not in shown
    shown = await ask("!config get models")
    assert "scripted" in shown
    assert secret not in shown

    # a syntax error whose message quotes the line holding the key
    path = bot.storage / "config.yaml"
    path.write_text(
        f"models:\n  default:\n    id: scripted\n    api_key: {secret} : oops\nagents: {{}}\n"
    )
    await wait_until(lambda: bot.bot.reloader.error is not None)
    assert secret in bot.bot.reloader.error  # the error does quote it
    shown = await ask("!config status")
    assert "not valid YAML" in shown
    assert secret not in shown


async def test_a_reload_whose_new_agent_cannot_log_in_is_not_applied_and_says_so(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    room = unique("live")
    taken = unique("taken")
    fresh = unique("fresh")
    # Someone else owns the account the new agent needs: mindroom cannot register or log in.
    await synapse.register_user(f"mindroom_{taken}", "not-ours-pw")
    doc = json.loads(config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await bot.start_in_room(json.dumps(doc), room, human)
    old_config = bot.bot.config

    async def status() -> str:
        asked = await human.send(room_id, "!config status")
        return (await human.wait_for_reply(room_id, asked))["content"]["body"]

    assert "valid and applied" in await status()  # positive control of the status text

    failing = json.loads(json.dumps(doc))
    failing["agents"][fresh] = {"role": "Starts fine.", "rooms": [room]}
    failing["agents"][taken] = {"role": "Cannot log in.", "rooms": [room]}
    failing["agents"]["general"]["role"] = "Changed by the failed reload."
    write(bot, failing)
    await wait_until(lambda: bot.bot.reloader.error is not None or taken in bot.bot.config.agents)
    await wait_until(lambda: bot.bot.reloader.error is not None, timeout=5.0)

    shown = await status()
    assert "failed" in shown
    assert taken in shown  # which agent
    assert "already exists" in shown  # and why
    assert "previous config is still running" in shown
    assert bot.bot.config is old_config  # nothing of the change was applied
    assert set(bot.bot.agents) == {"general"}  # the agent that did start was stopped again

    general = bot.bot.agents["general"].user_id
    asked = await human.send(room_id, "are you still there?")
    reply = await human.wait_for_reply(room_id, asked)
    assert reply["sender"] == general
    assert "Changed by the failed reload." not in system_text(model.requests[-1])

    fixed = json.loads(json.dumps(failing))
    del fixed["agents"][taken]
    write(bot, fixed)
    await wait_until(lambda: fresh in bot.bot.agents and bot.bot.reloader.error is None)
    shown = await status()
    assert "valid and applied" in shown
    assert "failed" not in shown
    assert bot.bot.config.agents["general"].role == "Changed by the failed reload."
    fresh_id = bot.bot.agents[fresh].user_id
    await human.wait_for(
        lambda e: (
            e.get("type") == "m.room.member"
            and e.get("state_key") == fresh_id
            and e["content"].get("membership") == "join"
        )
    )
    asked = await human.send(room_id, f"@{fresh} hello", mention=[fresh_id])
    assert (await human.wait_for_reply(room_id, asked))["sender"] == fresh_id


async def test_config_set_in_chat_says_when_the_change_could_not_be_applied(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    room = unique("live")
    taken = unique("taken")
    await synapse.register_user(f"mindroom_{taken}", "not-ours-pw")
    config = config_text(
        model.base_url,
        {"general": {"rooms": [room]}},
        authorization={"admins": [human.user_id]},
    )
    room_id = await bot.start_in_room(config, room, human)

    asked = await human.send(room_id, f"!config set agents.{taken}.rooms [{room}]")
    answer = (await human.wait_for_reply(room_id, asked))["content"]["body"]
    assert f"Set `agents.{taken}.rooms`" in answer
    assert "applied" not in answer.replace("not applied", "").replace("reloads applied", "")
    assert "previous config is still running" in answer
    assert taken not in bot.bot.config.agents

    asked = await human.send(room_id, "!config set agents.general.role Still works.")
    answer = (await human.wait_for_reply(room_id, asked))["content"]["body"]
    assert "previous config is still running" in answer  # the file still names the taken agent
    assert bot.bot.config.agents["general"].role == ""


async def test_a_room_that_cannot_be_prepared_after_the_switch_is_reported_and_retried(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("live")
    closed = unique("closed")
    doc = json.loads(config_text(model.base_url, {"general": {"rooms": [room]}}))
    room_id = await bot.start_in_room(json.dumps(doc), room, human)
    # Someone else holds the alias of the new room, in a room the router may not join.
    created = await human.client.room_create(
        alias=closed, name=closed, preset=nio.RoomPreset.private_chat
    )
    assert isinstance(created, nio.RoomCreateResponse), created

    doc["agents"]["general"]["rooms"] = [room, closed]
    doc["agents"]["general"]["role"] = "Lives in two rooms."
    write(bot, doc)
    await wait_until(lambda: bool(bot.bot.reloader.problems))

    asked = await human.send(room_id, "!config status")
    shown = (await human.wait_for_reply(room_id, asked))["content"]["body"]
    assert "is applied" in shown
    assert "preparing rooms failed" in shown
    assert f"#{closed}:" in shown  # which room, and why
    assert "cannot join" in shown
    assert bot.bot.config.agents["general"].role == "Lives in two rooms."
    asked = await human.send(room_id, "still answering?")
    assert (await human.wait_for_reply(room_id, asked))["sender"] == bot.bot.agents[
        "general"
    ].user_id

    invited = await human.client.room_invite(created.room_id, bot.bot.router.user_id)
    assert isinstance(invited, nio.RoomInviteResponse), invited
    write(bot, doc)  # saved again unchanged: the failed step is retried
    await wait_until(lambda: not bot.bot.reloader.problems)
    assert created.room_id in bot.bot.agents["general"].joined_rooms()
    asked = await human.send(room_id, "!config status")
    shown = (await human.wait_for_reply(room_id, asked))["content"]["body"]
    assert "valid and applied" in shown


async def test_an_edit_saved_before_the_watcher_is_armed_is_applied(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    """An edit saved between reading config.yaml at start and arming the file watcher raises
    no file event for the watcher: it is applied all the same, once the watcher is armed."""
    room = unique("early")
    doc = json.loads(config_text(model.base_url, {"general": {"rooms": [room]}}))
    await bot.start_in_room(json.dumps(doc), room, human)
    assert bot.bot is not None
    reloader = bot.bot.reloader
    assert reloader is not None
    await bot.bot.tasks.cancel("config-watch")  # the bot's own watcher would see the write
    doc["agents"]["coder"] = {"role": "Writes code.", "rooms": [room]}
    write(bot, doc)  # saved while no watcher is armed
    stop = asyncio.Event()
    before = reloader.applied
    watching = asyncio.create_task(reloader.watch(stop))
    try:
        await wait_until(lambda: reloader.applied > before, timeout=30)
    finally:
        stop.set()
        await watching
    assert "coder" in bot.bot.agents
