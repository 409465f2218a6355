"""Unit tests for reading ``config.yaml``: env expansion, validation and readable errors.

Pure and fast: every config is parsed from a string (or a temp file) with an explicit ``env``
mapping, so the process environment never leaks in.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from mindroom.config.load import expand_env, load_config, parse_config
from mindroom.config.schema import Config, RoomConfig
from mindroom.errors import ConfigError, MindroomError

SHIPPED_CONFIG = Path(__file__).resolve().parents[2] / "config.yaml"

# A minimal valid config; tests append or substitute lines. Line numbers matter for some tests:
#   1 models:
#   2   default:
#   3     id: some-model
#   4 agents:
#   5   general:
#   6     rooms: [lobby]
BASE = """\
models:
  default:
    id: some-model
agents:
  general:
    rooms: [lobby]
"""


def parse(text: str, env: dict[str, str] | None = None) -> Config:
    return parse_config(text, "config.yaml", env={} if env is None else env)


def config_error(text: str, env: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        parse(text, env)
    return str(info.value)


# -- ${VAR} expansion ---------------------------------------------------------------------------


def test_set_variable_replaces_placeholder_in_string_value() -> None:
    config = parse(BASE.replace("id: some-model", "id: ${MODEL_ID}"), {"MODEL_ID": "gpt-x"})
    assert config.models["default"].id == "gpt-x"


def test_default_is_used_when_variable_is_unset() -> None:
    config = parse(BASE.replace("id: some-model", "id: ${MODEL_ID:-fallback}"))
    assert config.models["default"].id == "fallback"


def test_default_is_used_when_variable_is_empty() -> None:
    config = parse(BASE.replace("id: some-model", "id: ${MODEL_ID:-fallback}"), {"MODEL_ID": ""})
    assert config.models["default"].id == "fallback"


def test_set_variable_wins_over_default() -> None:
    config = parse(BASE.replace("id: some-model", "id: ${MODEL_ID:-fallback}"), {"MODEL_ID": "set"})
    assert config.models["default"].id == "set"


def test_placeholder_is_expanded_inside_a_longer_string_with_several_variables() -> None:
    text = BASE.replace(
        "id: some-model", "id: some-model\n    base_url: http://${HOST}:${PORT:-8080}/v1"
    )
    config = parse(text, {"HOST": "models.internal"})
    assert config.models["default"].base_url == "http://models.internal:8080/v1"


def test_default_may_contain_colons_and_slashes() -> None:
    text = BASE.replace(
        "id: some-model", "id: some-model\n    base_url: ${URL:-http://localhost:11434/v1}"
    )
    assert parse(text).models["default"].base_url == "http://localhost:11434/v1"


def test_placeholders_are_expanded_in_list_items() -> None:
    text = BASE + '    instructions: ["Be ${MOOD}.", "Sign as ${SIGNATURE:-the bot}."]\n'
    config = parse(text, {"MOOD": "kind"})
    assert config.agents["general"].instructions == ["Be kind.", "Sign as the bot."]


def test_placeholders_are_expanded_in_nested_mappings() -> None:
    text = BASE + "rooms:\n  lobby:\n    topic: ${TOPIC:-Welcome}\nmatrix:\n  homeserver: ${HS}\n"
    config = parse(text, {"HS": "https://matrix.example.org"})
    assert config.room_config("lobby").topic == "Welcome"
    assert config.matrix.homeserver == "https://matrix.example.org"


def test_placeholders_are_expanded_in_flow_style_lists_of_rooms() -> None:
    config = parse(BASE.replace("rooms: [lobby]", "rooms: [lobby, '${EXTRA:-attic}']"))
    assert config.agents["general"].rooms == ["lobby", "attic"]


def test_expanded_number_is_validated_as_a_number() -> None:
    text = BASE + "    history_runs: ${RUNS:-3}\n"
    assert parse(text).agent_history_runs("general") == 3
    assert parse(text, {"RUNS": "7"}).agent_history_runs("general") == 7


def test_unset_bare_variable_is_an_error_naming_variable_and_key_path() -> None:
    message = config_error(BASE.replace("id: some-model", "id: ${MISSING_MODEL}"))
    assert message.startswith("config.yaml")
    assert "MISSING_MODEL" in message
    assert "models.default.id" in message
    assert "not set" in message


def test_unset_bare_variable_in_a_list_names_the_item_index() -> None:
    message = config_error(BASE + '    instructions: ["fine", "${NOPE}"]\n')
    assert "NOPE" in message
    assert "agents.general.instructions[1]" in message


def test_empty_bare_variable_expands_to_empty_string_without_error() -> None:
    config = parse(BASE + "    display_name: x${SUFFIX}\n", {"SUFFIX": ""})
    assert config.agents["general"].display_name == "x"


def test_text_without_braces_is_left_alone() -> None:
    config = parse(BASE + "    role: costs $5 or $HOME\n")
    assert config.agents["general"].role == "costs $5 or $HOME"


def test_expand_env_uses_only_the_given_mapping() -> None:
    assert expand_env("${A}-${B:-b}", {"A": "a"}, "here") == "a-b"
    with pytest.raises(ConfigError, match="here: environment variable A is not set"):
        expand_env("${A}", {}, "here")


# -- unknown keys ---------------------------------------------------------------------------------


def test_unknown_top_level_key_names_file_path_line_and_says_unknown_key() -> None:
    message = config_error(BASE + "agnets: {}\n")
    assert message == "config.yaml: agnets (line 7): unknown key"


def test_unknown_agent_key_names_file_dotted_path_and_line() -> None:
    message = config_error(BASE + "    modle: default\n")
    assert "config.yaml" in message
    assert "agents.general.modle" in message
    assert "(line 7)" in message
    assert "unknown key" in message


def test_unknown_model_key_names_its_own_line() -> None:
    message = config_error(BASE.replace("id: some-model", "id: some-model\n    tempreature: 0.2"))
    assert message == "config.yaml: models.default.tempreature (line 4): unknown key"


def test_unknown_key_in_each_section_is_refused_with_its_path() -> None:
    sections = {
        "defaults:\n  modle: x\n": "defaults.modle",
        "matrix:\n  home_server: x\n": "matrix.home_server",
        "authorization:\n  allowed: []\n": "authorization.allowed",
        "rooms:\n  lobby:\n    colour: red\n": "rooms.lobby.colour",
    }
    for extra, path in sections.items():
        message = config_error(BASE + extra)
        assert f"config.yaml: {path} (line " in message, message
        assert message.endswith("unknown key"), message


def test_every_problem_is_reported_on_its_own_line() -> None:
    message = config_error(BASE + "rooms:\n  lobby:\n    join_rule: secret\n    colour: red\n")
    lines = message.splitlines()
    assert len(lines) == 2
    assert any("rooms.lobby.join_rule (line 9)" in line for line in lines)
    assert any("rooms.lobby.colour (line 10): unknown key" in line for line in lines)


# -- wrong types and values -----------------------------------------------------------------------


def test_rooms_section_that_is_not_a_mapping_names_rooms() -> None:
    message = config_error(BASE + "rooms: 5\n")
    assert message.startswith("config.yaml: rooms (line 7): ")
    assert "unknown key" not in message


def test_agent_thread_mode_outside_thread_or_room_names_the_key() -> None:
    message = config_error(BASE + "    thread_mode: sideways\n")
    assert "agents.general.thread_mode (line 7)" in message
    assert "'thread' or 'room'" in message


def test_defaults_thread_mode_outside_thread_or_room_names_the_key() -> None:
    message = config_error(BASE + "defaults:\n  thread_mode: sideways\n")
    assert "defaults.thread_mode (line 8)" in message


def test_negative_history_runs_names_the_key() -> None:
    message = config_error(BASE + "    history_runs: -1\n")
    assert "agents.general.history_runs (line 7)" in message
    assert "greater than or equal to 0" in message


def test_negative_default_history_runs_names_the_key() -> None:
    assert "defaults.history_runs" in config_error(BASE + "defaults:\n  history_runs: -1\n")


def test_unknown_provider_names_the_key() -> None:
    text = BASE.replace("id: some-model", "id: some-model\n    provider: skynet")
    assert "models.default.provider (line 4)" in config_error(text)


def test_model_without_id_names_the_missing_key() -> None:
    text = BASE.replace("    id: some-model", "    provider: openai")
    assert "models.default.id" in config_error(text)


def test_agent_rooms_given_as_a_string_is_refused() -> None:
    assert "agents.general.rooms" in config_error(BASE.replace("[lobby]", "lobby"))


def test_room_name_that_is_not_a_valid_alias_is_refused() -> None:
    message = config_error(BASE.replace("[lobby]", "[Lobby]"))
    assert "'Lobby'" in message
    assert "agents.general.rooms" in message


# -- agent names ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["Bad-Name", "../x", "bad name", "générale", "1st", "_hidden", "a" * 41, "x.y", "UPPER"],
)
def test_unsafe_agent_name_is_refused_as_not_a_safe_identifier(name: str) -> None:
    message = config_error(BASE.replace("  general:", f'  "{name}":'))
    assert "safe identifier" in message
    assert repr(name) in message
    assert message.startswith("config.yaml: agents")


def test_agent_name_router_is_reserved() -> None:
    message = config_error(BASE.replace("  general:", "  router:"))
    assert "'router' is reserved" in message


@pytest.mark.parametrize("name", ["a", "general", "code_reviewer_2", "a" * 40])
def test_safe_agent_names_are_accepted(name: str) -> None:
    assert list(parse(BASE.replace("  general:", f"  {name}:")).agents) == [name]


def test_agent_name_with_trailing_newline_is_refused() -> None:
    config_error(BASE.replace("  general:", '  "general\\n":'))


def test_room_name_with_trailing_newline_is_refused() -> None:
    config_error(BASE.replace("[lobby]", '["lobby\\n"]'))


# -- cross references -----------------------------------------------------------------------------


def test_agent_naming_an_unknown_model_is_refused_naming_the_model() -> None:
    message = config_error(BASE + "    model: gpt-9000\n")
    assert message.startswith("config.yaml")
    assert "agents.general.model" in message
    assert "'gpt-9000'" in message
    assert "models: default" in message


def test_default_model_missing_from_models_is_refused_naming_it() -> None:
    text = BASE + "defaults:\n  model: big\n"
    assert "unknown model 'big'" in config_error(text)


def test_agents_without_any_models_section_are_refused() -> None:
    message = config_error("agents:\n  general:\n    rooms: [lobby]\n")
    assert "unknown model 'default'" in message
    assert "none defined" in message


def test_room_settings_for_a_room_no_agent_uses_are_refused() -> None:
    message = config_error(BASE + "rooms:\n  attic:\n    join_rule: invite\n")
    assert message.startswith("config.yaml")
    assert "rooms.attic" in message
    assert "no agent" in message


def test_room_settings_for_a_used_room_are_accepted() -> None:
    config = parse(BASE + "rooms:\n  lobby:\n    join_rule: invite\n    topic: Hi\n")
    assert config.room_config("lobby") == RoomConfig(join_rule="invite", topic="Hi")


# -- malformed documents and files ----------------------------------------------------------------


def test_invalid_yaml_is_a_config_error_naming_the_file() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("agents: [unclosed\n", "/etc/mindroom.yaml", env={})
    assert str(info.value).startswith("/etc/mindroom.yaml: not valid YAML")


def test_duplicate_top_level_key_is_a_config_error_naming_the_file() -> None:
    with pytest.raises(ConfigError, match=r"^config\.yaml: not valid YAML"):
        parse(BASE + "models: {}\n")


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_top_level_that_is_not_a_mapping_is_refused_naming_the_file(text: str) -> None:
    message = config_error(text)
    assert message == "config.yaml: the top level must be a mapping of sections"


@pytest.mark.parametrize("text", ["", "# only a comment\n"])
def test_empty_document_gives_a_config_with_defaults(text: str) -> None:
    config = parse(text)
    assert config.agents == {}
    assert config.defaults.model == "default"
    assert config.matrix.homeserver == "http://localhost:8008"


def test_config_error_is_a_mindroom_error() -> None:
    with pytest.raises(MindroomError):
        parse("- not a mapping\n")


def test_load_config_on_a_missing_file_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "config.yaml"
    with pytest.raises(ConfigError) as info:
        load_config(missing, env={})
    assert str(missing) in str(info.value)
    assert "no such file" in str(info.value)


def test_load_config_on_a_directory_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path, env={})


def test_load_config_errors_name_the_file_path(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(BASE + "    modle: x\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert str(info.value) == f"{path}: agents.general.modle (line 7): unknown key"


def test_load_config_expands_from_the_given_env(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(BASE.replace("some-model", "${M}"), encoding="utf-8")
    assert load_config(path, env={"M": "from-env"}).models["default"].id == "from-env"


# -- the shipped config.yaml ----------------------------------------------------------------------


def test_shipped_config_loads_with_an_empty_environment() -> None:
    config = load_config(SHIPPED_CONFIG, env={})
    assert len(config.agents) >= 2
    assert "mind" in config.agents
    for name in config.agents:
        assert config.agent_model(name) in config.models
        assert config.agents[name].rooms


def test_shipped_default_model_falls_back_to_local_ollama() -> None:
    model = load_config(SHIPPED_CONFIG, env={}).models["default"]
    assert model.id
    assert model.base_url == "http://localhost:11434/v1"
    assert model.api_key


def test_shipped_default_model_reads_openai_environment_variables() -> None:
    env = {
        "OPENAI_BASE_URL": "https://api.example.org/v1",
        "OPENAI_API_KEY": "sk-test",
        "MINDROOM_MODEL": "gpt-test",
    }
    config = load_config(SHIPPED_CONFIG, env=env)
    model = config.models[config.defaults.model]
    assert (model.base_url, model.api_key, model.id) == (
        "https://api.example.org/v1",
        "sk-test",
        "gpt-test",
    )


# -- authorization --------------------------------------------------------------------------------


@pytest.mark.parametrize("entry", ["alice", "alice:example.org", "@alice", "*", "", "example.org"])
def test_allowed_users_entry_that_is_not_a_matrix_id_or_glob_is_refused(entry: str) -> None:
    message = config_error(BASE + f'authorization:\n  allowed_users: ["{entry}"]\n')
    assert "authorization.allowed_users" in message
    assert "not a Matrix user ID or glob" in message


def test_allowed_users_accepts_ids_and_globs() -> None:
    users = ["@alice:example.org", "@*:example.org"]
    config = parse(BASE + f"authorization:\n  allowed_users: {users}\n")
    assert config.authorization.allowed_users == users


def test_allowed_users_defaults_to_none() -> None:
    assert parse(BASE).authorization.allowed_users is None


# -- Config helpers -------------------------------------------------------------------------------

HELPERS = """\
models:
  default: {id: small}
  big: {id: large}
defaults:
  thread_mode: room
  history_runs: 4
agents:
  plain:
    rooms: [b, a]
  custom:
    model: big
    thread_mode: thread
    history_runs: 0
    rooms: [c, a, b]
"""


def test_agent_without_settings_inherits_defaults() -> None:
    config = parse(HELPERS)
    assert config.agent_model("plain") == "default"
    assert config.agent_thread_mode("plain") == "room"
    assert config.agent_history_runs("plain") == 4


def test_agent_settings_override_defaults_even_when_falsy() -> None:
    config = parse(HELPERS)
    assert config.agent_model("custom") == "big"
    assert config.agent_thread_mode("custom") == "thread"
    assert config.agent_history_runs("custom") == 0


def test_builtin_defaults_apply_without_a_defaults_section() -> None:
    config = parse(BASE)
    assert config.agent_model("general") == "default"
    assert config.agent_thread_mode("general") == "thread"
    assert config.agent_history_runs("general") == 10
    assert config.defaults.markdown is True


def test_room_names_are_unique_in_first_mention_order() -> None:
    assert parse(HELPERS).room_names == ["b", "a", "c"]


def test_room_config_of_a_room_without_settings_is_the_default() -> None:
    assert parse(HELPERS).room_config("a") == RoomConfig(join_rule="public", topic=None)


def test_config_is_immutable() -> None:
    config = parse(BASE)
    with pytest.raises(ValidationError, match="frozen"):
        config.agents["general"].rooms = ["elsewhere"]  # type: ignore[misc]
    assert config.agents["general"].rooms == ["lobby"]


def test_a_config_that_is_not_utf8_is_an_error_naming_the_file_and_byte(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b'models:\n  default:\n    provider: openai\n    id: "caf\xe9"\n')
    with pytest.raises(ConfigError, match=r"config\.yaml: not UTF-8 text \(byte 52\)"):
        load_config(path)


def test_a_config_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(b"\xef\xbb\xbfmodels:\n  default:\n    provider: openai\n    id: m\n")
    assert load_config(path).models["default"].id == "m"


def test_the_consolidation_model_must_be_a_configured_model() -> None:
    doc = {
        "models": {"default": {"provider": "openai", "id": "x"}},
        "agents": {"general": {}},
        "memory": {"maintenance": {"consolidation": {"model": "typo"}}},
    }
    with pytest.raises(ConfigError, match="consolidation.model: unknown model 'typo'"):
        parse_config(json.dumps(doc), "config.yaml")
    doc["memory"]["maintenance"]["consolidation"]["model"] = "default"  # type: ignore[index]
    assert parse_config(json.dumps(doc), "config.yaml").memory.maintenance.consolidation.model


def test_file_reading_limits_are_validated_and_a_bad_one_named() -> None:
    limits = parse("media:\n  max_pdf_pages: 10\n  read_seconds: 5\n").media

    assert (limits.max_pdf_pages, limits.read_seconds) == (10, 5)
    assert "media.read_seconds" in config_error("media:\n  read_seconds: 0\n")
    assert "media.max_pdf_pages" in config_error("media:\n  max_pdf_pages: 0\n")
