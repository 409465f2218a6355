"""``mindroom --help``, a config error and a second run's refusal import no SDK (``--help`` no
command module either); the command line's errors exit 2.

The import checks run in a fresh Python process (this test process has imported everything).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from mindroom.app.runlock import hold_run_lock, release_run_lock
from mindroom.cli.main import COMMANDS, cli, main, parse_args

REPO = Path(__file__).resolve().parents[2]
HEAVY = (
    "agno",
    "nio",
    "synapse",
    "torch",
    "sqlalchemy",
    "mem0",
    "aiohttp",
    "numpy",
    "sentence_transformers",
)

# Runs the CLI with the arguments given, then prints (last line) which heavy packages it loaded.
PROBE = f"""
import json, sys
from mindroom.cli.main import main
code = main(sys.argv[1:])
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
cli_modules = sorted(m for m in sys.modules if m.startswith("mindroom.cli."))
print(json.dumps({{"code": code, "loaded": loaded, "cli": cli_modules}}))
"""


# Imports the CLI's entry module and prints (last line) which heavy packages that loaded.
IMPORT_ONLY = f"""
import json, sys
import mindroom.cli.main
print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))))
"""


def probe(*argv: str) -> tuple[str, dict[str, object]]:
    """Run the CLI with ``argv`` in a fresh process: its output (stdout and stderr) and what
    it returned and loaded."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    *output, last = done.stdout.splitlines()
    return "\n".join([*output, done.stderr]), json.loads(last)


def test_help_lists_every_command_without_importing_any_or_an_sdk() -> None:
    text, result = probe("--help")
    assert result["code"] == 0
    for name, (_, short) in COMMANDS.items():
        assert name in text
        assert short.split()[0] in text
    assert result["loaded"] == []
    assert result["cli"] == ["mindroom.cli.main", "mindroom.cli.options"]


def test_importing_the_cli_loads_no_sdk() -> None:
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_ONLY],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []


CONFIG = """\
models:
  default: {provider: openai, id: m, base_url: "http://127.0.0.1:9/v1", api_key: none}
agents:
  general: {display_name: General, role: helps, rooms: [lobby]}
matrix: {homeserver: "http://127.0.0.1:9"}
"""


def test_a_config_error_is_reported_before_any_sdk_is_imported(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.replace("role:", "rolle:"))
    text, result = probe("run", "--config", str(config), "--storage", str(tmp_path))
    assert result["code"] == 2
    assert "agents.general.rolle (line 4): unknown key" in text, text
    assert result["loaded"] == []


def test_a_second_run_is_refused_before_any_sdk_is_imported(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    lock = hold_run_lock(tmp_path / "mindroom_data")  # as a running `mindroom run` holds it
    try:
        text, result = probe("run", "--config", str(config), "--storage", str(tmp_path))
    finally:
        release_run_lock(lock)
    assert result["code"] == 2
    assert f"already running for {tmp_path.resolve()} (pid {os.getpid()}" in text, text
    assert result["loaded"] == []


def test_a_commands_help_imports_its_module_and_what_it_uses() -> None:
    """The positive control of the test above: the probe sees a heavy import when there is one."""
    text, result = probe("sessions", "--help")
    assert result["code"] == 0
    assert "mindroom.cli.sessions" in result["cli"]  # type: ignore[operator]
    assert "sqlalchemy" in result["loaded"]  # type: ignore[operator]
    # memory loads its module, but no SDK: SQLAlchemy only with a PostgreSQL search index
    text, result = probe("memory", "--help")
    assert result["code"] == 0
    assert "flush-status" in text
    assert "mindroom.cli.memory" in result["cli"]  # type: ignore[operator]
    assert result["loaded"] == []


def test_the_table_says_what_each_commands_own_help_says() -> None:
    context = click.Context(cli)
    for name, (_, short) in COMMANDS.items():
        command = cli.get_command(context, name)
        assert command is not None
        assert command.name == name
        assert (command.help or "").split("\n\n")[0] == short


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([], "Usage: mindroom"),
        (["nope"], "No such command 'nope'"),
        (["run", "--port", "x"], "'x' is not a valid integer"),
        (["memory", "list"], "--agent NAME or --team NAME is required"),
        (["memory", "list", "--agent", "a", "--team", "b"], "give one of them"),
        (["memory", "set", "m-1", "--agent", "a", "--importance", "6"], "--importance"),
        (["maintenance", "daemon", "--interval-seconds", "0"], "seconds above 0"),
        (["config", "get"], "Missing argument 'KEY'"),
    ],
)
def test_a_command_line_that_means_nothing_exits_2_and_says_why(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert said in captured.err + captured.out


def test_help_of_any_command_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "recall", "--help"]) == 0
    assert "MESSAGE: the message the turn answers" in capsys.readouterr().out


def test_parsing_names_the_command_and_action_and_each_option() -> None:
    args = parse_args(["memory", "set", "m-1", "--agent", "general", "--unpin"])
    assert (args.command, args.action, args.id, args.agent, args.pin) == (
        "memory",
        "set",
        "m-1",
        "general",
        False,
    )
    assert parse_args(["memory", "set", "m-1", "--agent", "general"]).pin is None
    assert parse_args(["config", "add-agent", "x", "--room", "a", "--room", "b"]).room == ("a", "b")


def _leaves(group: click.Group, path: list[str]) -> list[tuple[list[str], click.Command]]:
    context = click.Context(group)
    found = []
    for name in group.list_commands(context):
        command = group.get_command(context, name)
        assert command is not None
        if isinstance(command, click.Group):
            found += _leaves(command, [*path, name])
        else:
            found.append(([*path, name], command))
    return found


def test_every_command_parses_its_options_from_the_table_down() -> None:
    leaves = _leaves(cli, [])
    assert len(leaves) > 30  # the positive control: the walk reaches the memory actions
    for path, command in leaves:
        argv = [*path]
        for param in command.params:
            if param.required and isinstance(param, click.Argument):
                argv.append("x")
            elif param.required and isinstance(param, click.Option):
                argv += [param.opts[0], "x"]
        if any("--team" in param.opts for param in command.params):
            argv += ["--agent", "x"]  # the memory actions name whose memory
        args = parse_args(argv)
        assert [args.command, args.action] == (path + [None])[:2], argv
        assert args.verbose is False
