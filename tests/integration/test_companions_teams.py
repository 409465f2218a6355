"""End to end: a private companion for two people, configured and ad hoc teams."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from nio import RoomCreateResponse

from mindroom.adapters.agno.probe import model_fix
from mindroom.config.load import load_config
from mindroom.memory.files.markdown import parse_entries
from tests.support.harness import BotHarness, Human, answers, config_text, joined, relation, unique
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall, last_user_text, system_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


def tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def has_tool_result(request: dict) -> bool:
    return any(m["role"] == "tool" for m in request["messages"])


def remember_colors(request: dict) -> Reply | str:
    """Stores 'favorite color is X' through add_memory, answers everything else."""
    if has_tool_result(request):
        return "Noted."
    text = last_user_text(request)
    if "my favorite color is" in text:
        color = text.rsplit(" ", 1)[-1]
        return Reply(tool_calls=[ToolCall("add_memory", {"text": f"Favorite color: {color}"})])
    return "Let me think about colors."


async def test_private_companion_keeps_each_persons_memory_apart(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    room = unique("mind")
    template = bot.storage / "tpl"
    (template / "memory").mkdir(parents=True)
    (template / "MEMORY.md").write_text("# About you\n")
    (template / "memory" / "notes.md").write_text("# Notes\n")
    config = config_text(
        model.base_url,
        {"mind": {"rooms": [room], "private": {"per": "user", "template_dir": "tpl"}}},
    )
    model.set_handler(remember_colors)
    bob = await Human.create(synapse)
    try:
        room_id = await bot.start_in_room(config, room, human)
        await bob.join(room_id)
        assert bot.bot is not None
        mind = bot.bot.agents["mind"].user_id
        dms = {}
        for person, color in ((human, "blue"), (bob, "green")):  # each in their own DM
            created = await person.client.room_create(invite=[mind], is_direct=True)
            assert isinstance(created, RoomCreateResponse), created
            await person.wait_for(joined(mind, created.room_id))
            dms[person.user_id] = created.room_id
            told = await person.send(created.room_id, f"my favorite color is {color}")
            await person.wait_for_reply(created.room_id, told)

        asked = {}
        for person in (human, bob):
            model.clear()
            model.set_handler(remember_colors)
            event = await person.send(dms[person.user_id], "what is my favorite color?")
            await person.wait_for_reply(dms[person.user_id], event)
            asked[person.user_id] = system_text(model.requests[-1])
        model.clear()
        model.set_handler(remember_colors)
        event = await human.send(room_id, "what is my favorite color?")  # the shared room
        await human.wait_for_reply(room_id, event)
        in_shared_room = system_text(model.requests[-1])
    finally:
        await bob.close()

    assert "Favorite color" not in in_shared_room  # Bob reads that room: no private memory
    assert "Favorite color: blue" in asked[human.user_id]
    assert "green" not in asked[human.user_id]
    assert "Favorite color: green" in asked[bob.user_id]
    assert "blue" not in asked[bob.user_id]
    roots = sorted((bot.storage / "private_instances").glob("*/mind_data"))
    assert len(roots) == 2
    texts = [(root / "MEMORY.md").read_text() for root in roots]
    assert all(t.startswith("# About you\n") for t in texts)  # scaffolded from the template
    assert all((root / "memory" / "notes.md").exists() for root in roots)
    assert sorted("blue" in t for t in texts) == [False, True]
    assert not (bot.storage / "agents" / "mind" / "workspace" / "MEMORY.md").exists()


def team_leader(delegate: str, arguments: dict) -> object:
    def handle(request: dict) -> Reply | str:
        names = tool_names(request)
        if delegate in names:
            results = [m["content"] for m in request["messages"] if m["role"] == "tool"]
            if results:
                return "Team answer: " + " | ".join(str(r) for r in results)
            return Reply(tool_calls=[ToolCall(delegate, arguments)])
        return "member reporting"

    return handle


def team_config(model: ScriptedModel, room: str, mode: str) -> str:
    return config_text(
        model.base_url,
        {
            "general": {"role": "Helps with anything.", "rooms": [room]},
            "coder": {"role": "Writes code.", "rooms": [room]},
        },
        teams={"crew": {"agents": ["general", "coder"], "mode": mode, "rooms": [room]}},
    )


async def test_configured_team_in_coordinate_mode_delegates_and_answers_once(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("team")
    room_id = await bot.start_in_room(team_config(model, room, "coordinate"), room, human)
    model.set_handler(
        team_leader("delegate_task_to_member", {"member_id": "coder", "task": "write hello"})
    )
    crew = bot.bot.agents["crew"].user_id

    asked = await human.send(room_id, "@crew please write hello world", mention=[crew])
    reply = await human.wait_for_reply(room_id, asked, timeout=40)
    await bot.settle(human, room_id)

    assert reply["sender"] == crew
    assert reply["content"]["body"].startswith("Team answer:")
    assert "member reporting" in reply["content"]["body"]
    member_requests = [
        r
        for r in model.requests
        if not tool_names(r) or "delegate_task_to_member" not in tool_names(r)
    ]
    assert len(member_requests) == 1  # the leader picked one member
    assert "Writes code." in system_text(member_requests[0])
    answers = [e for e in human.messages(room_id) if relation(e).get("event_id") == asked]
    assert len(answers) == 1


async def test_configured_team_in_collaborate_mode_asks_every_member(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("team")
    room_id = await bot.start_in_room(team_config(model, room, "collaborate"), room, human)
    model.set_handler(team_leader("delegate_task_to_members", {"task": "say hello"}))
    crew = bot.bot.agents["crew"].user_id

    asked = await human.send(room_id, "@crew everyone say hello", mention=[crew])
    reply = await human.wait_for_reply(room_id, asked, timeout=40)

    assert reply["sender"] == crew
    assert reply["content"]["body"].startswith("Team answer:")
    member_requests = [r for r in model.requests if "delegate_task_to_members" not in tool_names(r)]
    roles = {
        ("Writes code." in system_text(r), "Helps with anything." in system_text(r))
        for r in member_requests
    }
    assert roles == {(True, False), (False, True)}  # both members answered


async def test_mentioning_two_agents_gets_one_team_answer(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("team")
    config = json.loads(team_config(model, room, "coordinate"))
    del config["teams"]
    room_id = await bot.start_in_room(json.dumps(config), room, human)
    model.set_handler(
        team_leader("delegate_task_to_member", {"member_id": "general", "task": "answer"})
    )
    general = bot.bot.agents["general"].user_id
    coder = bot.bot.agents["coder"].user_id

    asked = await human.send(
        room_id, "@general and @coder, what do you think?", mention=[general, coder]
    )
    reply = await human.wait_for_reply(room_id, asked, timeout=40)
    await bot.settle(human, room_id)

    assert reply["sender"] == general  # the first member in config order posts
    assert reply["content"]["body"].startswith("Team answer:")
    answers = [
        e
        for e in human.posted(room_id, general) + human.posted(room_id, coder)
        if relation(e).get("event_id") == asked
    ]
    assert len(answers) == 1
    ledger = sqlite3.connect(bot.storage / "mindroom_data" / "ledger.db")
    [(answered_by,)] = ledger.execute(
        "SELECT answered_by FROM handled WHERE event_id = ?", (asked,)
    ).fetchall()
    ledger.close()
    assert json.loads(answered_by) == ["general + coder"]  # the dashboard's "Answered by"


def mirror(storage: Path, member: str) -> Path:
    return storage / "agents" / member / "memory_files" / "team_coder+general" / "MEMORY.md"


async def test_team_memory_is_mirrored_to_every_member_with_one_id(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("team")
    room_id = await bot.start_in_room(team_config(model, room, "coordinate"), room, human)

    def leader_remembers(request: dict) -> Reply | str:
        if "delegate_task_to_member" not in tool_names(request):
            return "member reporting"
        if has_tool_result(request):
            return "Noted for the whole team."
        return Reply(tool_calls=[ToolCall("add_memory", {"text": "The release is on Friday"})])

    model.set_handler(leader_remembers)
    crew = bot.bot.agents["crew"].user_id
    asked = await human.send(room_id, "@crew remember: the release is on Friday", mention=[crew])
    await human.wait_for_reply(room_id, asked, timeout=40)

    copies = [
        parse_entries(mirror(bot.storage, m).read_text(), "MEMORY.md") for m in ("general", "coder")
    ]
    assert [[(e.id, e.text) for e in c] for c in copies][0] == [
        (copies[0][0].id, "The release is on Friday")
    ]
    assert copies[0] == copies[1]

    # a member talking alone recalls the team memory
    model.set_handler(lambda request: "on my own")
    general = bot.bot.agents["general"].user_id
    alone = await human.send(room_id, "@general when is the release?", mention=[general])
    await human.wait_for_reply(room_id, alone, timeout=40)
    assert "The release is on Friday" in system_text(model.requests[-1])


def refuse(request: dict) -> Reply:
    """Every request of this model fails as a wrong key does."""
    return Reply(status=401, error_message="invalid api key", retryable=False)


async def test_a_team_whose_model_fails_says_how_to_fix_that_model(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    """Two agents mentioned answer as a team; its (leader's) model fails: the notice says what
    to do, the same text as ``mindroom doctor`` and the start-up warning."""
    room = unique("team")
    config = json.loads(team_config(model, room, "coordinate"))
    del config["teams"]
    config["models"]["broken"] = {**config["models"]["default"], "id": "broken"}
    config["agents"]["general"]["model"] = "broken"  # the ad hoc team's model: its first member's
    room_id = await bot.start_in_room(json.dumps(config), room, human)
    model.set_handler(refuse, model="broken")
    general = bot.bot.agents["general"].user_id
    coder = bot.bot.agents["coder"].user_id

    asked = await human.send(room_id, "@general and @coder, ideas?", mention=[general, coder])
    notice = await human.wait_for_reply(room_id, asked, timeout=40)

    assert notice["content"]["msgtype"] == "m.notice"
    assert "invalid api key" in notice["content"]["body"]
    broken = load_config(bot.storage / "config.yaml").models["broken"]
    fix = model_fix("broken", broken, 401)  # the status of the refused request
    assert fix in notice["content"]["body"]


async def test_a_team_whose_member_model_fails_says_how_to_fix_that_model(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("team")
    config = json.loads(team_config(model, room, "coordinate"))
    config["models"]["broken"] = {**config["models"]["default"], "id": "broken"}
    config["agents"]["coder"]["model"] = "broken"
    room_id = await bot.start_in_room(json.dumps(config), room, human)
    model.set_handler(
        team_leader("delegate_task_to_member", {"member_id": "coder", "task": "write hello"})
    )
    model.set_handler(refuse, model="broken")
    crew = bot.bot.agents["crew"].user_id

    asked = await human.send(room_id, "@crew please write hello world", mention=[crew])
    # The leader still answers (around the failure it was told of), then the notice follows.
    answer = await human.wait_for_reply(room_id, asked, timeout=40)
    assert answer["content"]["body"].startswith("Team answer:")
    notice = await human.wait_for(
        lambda e: relation(e).get("event_id") == asked and e["content"].get("msgtype") == "m.notice"
    )

    assert notice["sender"] == crew
    assert "coder in team Crew" in notice["content"]["body"]
    assert "invalid api key" in notice["content"]["body"]
    broken = load_config(bot.storage / "config.yaml").models["broken"]
    fix = model_fix("broken", broken, 401)  # the status of the refused request
    assert fix in notice["content"]["body"]


async def test_a_message_naming_two_teams_is_answered_by_each(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    """Two configured teams named and no agent: each team answers for itself (the claim's lead
    is the first team named; it once had to be an agent, and the message was dropped)."""
    room = unique("teams")
    config = config_text(
        model.base_url,
        {
            "general": {"role": "Helps.", "rooms": [room]},
            "coder": {"role": "Codes.", "rooms": [room]},
        },
        teams={
            "crew": {"agents": ["general", "coder"], "mode": "coordinate", "rooms": [room]},
            "duo": {"agents": ["coder", "general"], "mode": "coordinate", "rooms": [room]},
        },
    )
    room_id = await bot.start_in_room(config, room, human)
    model.set_handler(lambda request: "Team answer.")
    crew, duo = bot.bot.agents["crew"].user_id, bot.bot.agents["duo"].user_id

    asked = await human.send(room_id, "@crew @duo both of you", mention=[crew, duo])
    await human.wait_for(lambda e: answers(e, asked) and e["sender"] == crew, timeout=40)
    await human.wait_for(lambda e: answers(e, asked) and e["sender"] == duo, timeout=40)
    await bot.settle(human, room_id)
    senders = sorted(e["sender"] for e in human.messages(room_id) if answers(e, asked))
    assert senders == sorted([crew, duo])  # each once
