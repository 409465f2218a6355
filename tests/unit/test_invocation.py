"""Hints print the command as the person can run it, not a bare `mindroom`."""

from __future__ import annotations

from pathlib import Path

from mindroom.invocation import README_COMMAND, invoked_as


def test_a_venv_script_below_the_current_folder_is_shown_relative(tmp_path: Path) -> None:
    script = tmp_path / ".venv" / "bin" / "mindroom"
    script.parent.mkdir(parents=True)
    script.touch()
    assert invoked_as(str(script), cwd=tmp_path) == ".venv/bin/mindroom"


def test_a_script_elsewhere_is_shown_by_its_full_path(tmp_path: Path) -> None:
    elsewhere = tmp_path / "env" / "bin" / "mindroom"
    here = tmp_path / "project"
    here.mkdir()
    assert invoked_as(str(elsewhere), cwd=here) == str(elsewhere.resolve())


def test_python_dash_m_is_shown_as_such() -> None:
    assert invoked_as("/x/mindroom/__main__.py") == "python -m mindroom"


def test_a_bare_name_not_on_path_falls_back_to_the_readme_command() -> None:
    assert invoked_as("mindroom-not-on-this-path") == README_COMMAND


def test_verbose_is_accepted_before_and_after_the_subcommand() -> None:
    from mindroom.cli.main import parse_args

    assert parse_args(["-v", "run"]).verbose
    assert parse_args(["run", "-v", "--local"]).verbose
    assert parse_args(["chat", "--verbose", "hi"]).verbose
    assert not parse_args(["run", "--local"]).verbose


def test_the_banner_says_which_agents_are_in_which_room_and_which_in_none() -> None:
    from mindroom.cli.run import running_banner
    from mindroom.config import parse_config

    config = parse_config(
        """
models: {default: {provider: openai, id: m, base_url: "http://127.0.0.1:9/v1"}}
agents:
  general: {rooms: [lobby, dev]}
  mind: {rooms: [lobby]}
  tester: {role: Tests.}
""",
        "config.yaml",
    )
    banner = running_banner(config, ["general", "mind", "tester"])
    assert "general, mind in #lobby; general in #dev" in banner
    assert "tester in no room" in banner
    assert "4 agents" not in banner


def test_the_banners_chat_command_carries_a_non_default_config_and_storage() -> None:
    from mindroom.cli.main import parse_args
    from mindroom.cli.run import chat_command

    plain = chat_command(parse_args(["run", "--local"]))
    assert plain.endswith(" chat")
    moved = chat_command(
        parse_args(["run", "--local", "--storage", "/tmp/my data", "--config", "c.yaml"])
    )
    assert moved.endswith(" chat --config c.yaml --storage '/tmp/my data'")
