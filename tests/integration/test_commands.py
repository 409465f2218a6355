"""Unit tests for chat commands (``!help``, ``!new``, ``!agents``): parsing and answer texts."""

from __future__ import annotations

import pytest

from mindroom.config import Config, parse_config
from mindroom.pipeline.commands import (
    Command,
    agents_text,
    help_text,
    new_session_text,
    parse_command,
    unknown_text,
)
from tests.support.harness import BotHarness, Human, config_text, unique
from tests.support.scripted_model import ScriptedModel

CONFIG_YAML = """\
models:
  default:
    id: some-model
agents:
  general:
    display_name: General Helper
    role: Answers everyday questions
    rooms: [lobby, dev]
  coder:
    role: Writes and reviews code
    rooms: [dev]
  mind:
    display_name: Mind
    rooms: []
teams:
  crew:
    display_name: The Crew
    role: General and coder together.
    agents: [general, coder]
    rooms: [dev]
"""

USER_IDS = {
    "general": "@mindroom_general:localhost",
    "coder": "@mindroom_coder:localhost",
    "mind": "@mindroom_mind:localhost",
    "crew": "@mindroom_crew:localhost",
}


@pytest.fixture(scope="module")
def config() -> Config:
    return parse_config(CONFIG_YAML, "config.yaml", env={})


def _line_of(text: str, needle: str) -> str:
    lines = [line for line in text.splitlines() if needle in line]
    assert len(lines) == 1, f"expected exactly one line with {needle!r} in:\n{text}"
    return lines[0]


# -- parse_command --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["help", "new", "agents"])
def test_each_known_command_parses_with_no_argument(name: str) -> None:
    assert parse_command(f"!{name}") == Command(name, "")


def test_command_name_is_lowercased_and_the_rest_is_the_argument() -> None:
    assert parse_command("!HELP extra") == Command("help", "extra")


def test_argument_keeps_inner_spacing_but_not_outer_whitespace() -> None:
    assert parse_command("  !new   fresh  start  \n") == Command("new", "fresh  start")


def test_argument_may_span_several_words_and_lines() -> None:
    command = parse_command("!agents all of them\nplease")
    assert command is not None
    assert command.name == "agents"
    assert command.argument == "all of them\nplease"


@pytest.mark.parametrize("body", ["! help", "!", "!   ", "  !  ", "!\thelp"])
def test_bang_without_a_name_right_after_it_is_not_a_command(body: str) -> None:
    assert parse_command(body) is None


@pytest.mark.parametrize("body", ["help", "hello !help", "", "   ", "?help", "¡help"])
def test_text_not_starting_with_bang_is_not_a_command(body: str) -> None:
    assert parse_command(body) is None


@pytest.mark.parametrize("body", ["!help", "!New", "!AGENTS now"])
def test_known_commands_are_known(body: str) -> None:
    command = parse_command(body)
    assert command is not None
    assert command.known


@pytest.mark.parametrize("body", ["!helpme", "!foo", "!news", "!!help"])
def test_other_command_names_are_unknown(body: str) -> None:
    command = parse_command(body)
    assert command is not None
    assert not command.known


@pytest.mark.parametrize("body", ["!new\nplease", "!help\tme"])
def test_command_name_ends_at_any_whitespace(body: str) -> None:
    command = parse_command(body)
    assert command is not None
    assert command.known


# -- help_text ------------------------------------------------------------------------------------


def test_help_lists_each_room_agent_with_user_id_and_role(config: Config) -> None:
    text = help_text(config, ["general", "coder"], USER_IDS)
    general = _line_of(text, "@mindroom_general:localhost")
    assert "General Helper" in general
    assert "Answers everyday questions" in general
    coder = _line_of(text, "@mindroom_coder:localhost")
    assert "coder" in coder
    assert "Writes and reviews code" in coder


def test_help_lists_agents_in_the_given_room_order(config: Config) -> None:
    text = help_text(config, ["coder", "general"], USER_IDS)
    assert text.index("@mindroom_coder:localhost") < text.index("@mindroom_general:localhost")


def test_help_does_not_list_agents_outside_the_room(config: Config) -> None:
    text = help_text(config, ["coder"], USER_IDS)
    assert "@mindroom_general:localhost" not in text
    assert "@mindroom_mind:localhost" not in text


def test_help_for_an_agent_without_role_shows_it_without_a_role(config: Config) -> None:
    line = _line_of(help_text(config, ["mind"], USER_IDS), "@mindroom_mind:localhost")
    assert line.rstrip().endswith("(@mindroom_mind:localhost)")


def test_help_in_a_room_without_agents_says_none(config: Config) -> None:
    assert "(none)" in help_text(config, [], USER_IDS)


@pytest.mark.parametrize("room_agents", [[], ["general"], ["general", "coder", "mind"]])
def test_help_lists_the_three_commands(config: Config, room_agents: list[str]) -> None:
    text = help_text(config, room_agents, USER_IDS)
    for name in ("!help", "!agents", "!new"):
        assert f"`{name}`" in text


# -- agents_text ----------------------------------------------------------------------------------


def test_agents_lists_every_configured_agent_with_its_user_id(config: Config) -> None:
    text = agents_text(config, USER_IDS)
    for user_id in USER_IDS.values():
        assert user_id in text


def test_agents_lists_each_agents_rooms(config: Config) -> None:
    text = agents_text(config, USER_IDS)
    general = _line_of(text, "@mindroom_general:localhost")
    assert "#lobby" in general
    assert "#dev" in general
    coder = _line_of(text, "@mindroom_coder:localhost")
    assert "#dev" in coder
    assert "#lobby" not in coder


def test_agents_says_dm_only_for_an_agent_without_rooms(config: Config) -> None:
    text = agents_text(config, USER_IDS)
    assert "DM only" in _line_of(text, "@mindroom_mind:localhost")
    assert "DM only" not in _line_of(text, "@mindroom_general:localhost")


def test_agents_lists_roles(config: Config) -> None:
    text = agents_text(config, USER_IDS)
    assert "Writes and reviews code" in _line_of(text, "@mindroom_coder:localhost")


def test_agents_lists_an_agent_without_a_known_user_id_by_name(config: Config) -> None:
    text = agents_text(config, {"general": USER_IDS["general"]})
    assert "(coder)" in text
    assert "(mind)" in text


def test_agents_keeps_config_order(config: Config) -> None:
    text = agents_text(config, USER_IDS)
    positions = [text.index(USER_IDS[name]) for name in ("general", "coder", "mind")]
    assert positions == sorted(positions)


# -- configured teams -----------------------------------------------------------------------------


def test_help_in_a_room_with_a_configured_team_lists_the_team_and_its_members(
    config: Config,
) -> None:
    text = help_text(config, ["general", "coder", "crew"], USER_IDS)
    crew = _line_of(text, "@mindroom_crew:localhost")
    assert "The Crew" in crew
    assert "General and coder together" in crew
    assert "team" in crew
    assert "general" in crew
    assert "coder" in crew


def test_agents_lists_configured_teams_with_members_and_rooms(config: Config) -> None:
    text = agents_text(config, USER_IDS)
    crew = _line_of(text, "@mindroom_crew:localhost")
    assert "#dev" in crew
    assert "general" in crew
    assert "coder" in crew
    assert "#dev" not in _line_of(text, "@mindroom_mind:localhost")


def test_a_role_ending_in_a_period_reads_as_one_sentence(config: Config) -> None:
    for text in (agents_text(config, USER_IDS), help_text(config, ["crew"], USER_IDS)):
        assert ".;" not in text
        assert ".." not in text
        assert "General and coder together." in text


def test_agents_line_for_a_role_without_a_period_still_separates_the_rooms(config: Config) -> None:
    line = _line_of(agents_text(config, USER_IDS), "@mindroom_coder:localhost")
    assert "Writes and reviews code." in line
    assert line.endswith("Rooms: #dev.")


# -- new_session_text and unknown_text ------------------------------------------------------------


def test_new_session_in_a_thread_names_the_thread() -> None:
    text = new_session_text(1, in_thread=True)
    assert "this thread" in text
    assert "this room" not in text


def test_new_session_outside_a_thread_names_the_room() -> None:
    text = new_session_text(1, in_thread=False)
    assert "this room" in text
    assert "this thread" not in text


def test_new_session_texts_differ_between_generations() -> None:
    assert new_session_text(1, in_thread=False) != new_session_text(2, in_thread=False)


def test_unknown_command_names_it_and_suggests_help() -> None:
    text = unknown_text(Command("frobnicate", "now"))
    assert "!frobnicate" in text
    assert "!help" in text


# -- over Matrix ----------------------------------------------------------------------------------


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_help_and_agents_answer_in_a_room_with_a_configured_team(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("crew")
    config = config_text(
        model.base_url,
        {
            "general": {"role": "Helps with anything.", "rooms": [room]},
            "coder": {"role": "Writes code.", "rooms": [room]},
        },
        teams={"crew": {"agents": ["general", "coder"], "role": "Both at once.", "rooms": [room]}},
    )
    room_id = await bot.start_in_room(config, room, human)
    crew = bot.bot.agents["crew"].user_id

    asked = await human.send(room_id, "!help")
    help_reply = await human.wait_for_reply(room_id, asked)
    body = help_reply["content"]["body"]
    assert help_reply["sender"] == bot.bot.router.user_id
    assert crew in body
    assert "Both at once." in body
    assert bot.bot.agents["general"].user_id in body

    listed = await human.send(room_id, "!agents")
    agents_reply = await human.wait_for_reply(room_id, listed)
    crew_line = _line_of(agents_reply["content"]["body"], crew)
    assert f"#{room}" in crew_line
    assert ".;" not in agents_reply["content"]["body"]
    assert model.requests == []  # commands never reach a model
