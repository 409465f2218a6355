"""Editing config.yaml: round trips keep every untouched byte; bad edits are refused."""

from __future__ import annotations

import difflib
import filecmp
from pathlib import Path

import pytest

from mindroom.cli.main import main
from mindroom.config.store import ConfigDocument, parse_value
from mindroom.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]

COMMENTED = """\
# Top comment: keep me.
models:
  default:
    provider: openai
    id: "${MINDROOM_MODEL:-llama3.2}"   # quoted on purpose
    base_url: 'http://localhost:11434/v1'

defaults:
  history_runs: 10        # end-of-line comment

agents:
  general:
    role: Helps.
    instructions:
      - One.
      - Two.   # why two
    rooms: [lobby]

# A closing comment block
# that must stay at the end.
"""


def changed_lines(before: str, after: str) -> list[str]:
    return [
        line
        for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(COMMENTED)
    return path


def test_loading_and_saving_without_edits_changes_nothing(config: Path) -> None:
    doc = ConfigDocument(config)
    assert doc.text() == COMMENTED
    assert doc.save() is False


def test_set_rewrites_only_the_changed_line(config: Path) -> None:
    doc = ConfigDocument(config)
    doc.set("agents.general.role", parse_value("Helps with anything."))
    assert doc.save() is True
    assert changed_lines(COMMENTED, config.read_text()) == [
        "-    role: Helps.",
        "+    role: Helps with anything.",
    ]


def test_set_of_a_new_nested_key_adds_lines_and_keeps_trailing_comments_last(config: Path) -> None:
    doc = ConfigDocument(config)
    doc.set("memory.auto_flush.idle_seconds", parse_value("60"))
    doc.set("defaults.streaming", parse_value("false"))
    doc.save()
    text = config.read_text()
    assert changed_lines(COMMENTED, text) == [
        "+  streaming: false",
        "+memory:",
        "+  auto_flush:",
        "+    idle_seconds: 60",
    ]
    assert text.endswith("# A closing comment block\n# that must stay at the end.\n")
    assert "  history_runs: 10        # end-of-line comment\n  streaming: false\n" in text


def test_unset_and_add_agent_preserve_everything_else(config: Path) -> None:
    doc = ConfigDocument(config)
    doc.add_agent("coder", role="Writes code.", rooms=["lobby"])
    doc.save()
    added = config.read_text()
    assert changed_lines(COMMENTED, added) == [
        "+  coder:",
        "+    display_name: Coder",
        "+    role: Writes code.",
        "+    rooms: [lobby]",
    ]
    doc = ConfigDocument(config)
    doc.unset("agents.coder")
    doc.save()
    assert config.read_text() == COMMENTED  # byte for byte back


def test_invalid_edit_is_refused_and_the_file_is_untouched(config: Path) -> None:
    doc = ConfigDocument(config)
    doc.set("agents.general.model", "missing")
    with pytest.raises(ConfigError, match="unknown model 'missing'"):
        doc.save()
    doc = ConfigDocument(config)
    doc.set("agents.general.rooms", parse_value("5"))
    with pytest.raises(ConfigError, match=r"agents\.general\.rooms"):
        doc.save()
    assert config.read_text() == COMMENTED


def test_a_save_of_the_file_landing_while_a_change_is_written_is_kept(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person's editor saves config.yaml after the change checked the file and while it
    writes the new version: the person's save keeps the file, and the change is refused
    (nothing written), to be run again, never silently laid over it."""
    from mindroom.memory.files import protocol

    real = protocol.write_temp
    saved = COMMENTED + "# the person's own note\n"

    def saves_meanwhile(path: Path, data: str | bytes, **kw: object) -> Path:
        config.write_text(saved)  # the editor's save, in the write's window
        return real(path, data, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(protocol, "write_temp", saves_meanwhile)
    doc = ConfigDocument(config)
    doc.set("agents.general.display_name", "Helper")
    with pytest.raises(ConfigError, match="changed while it was being saved"):
        doc.save()
    assert config.read_text() == saved
    assert list(config.parent.glob("config*.yaml")) == [config]  # no copy left beside it

    monkeypatch.setattr(protocol, "write_temp", real)  # the control: run again, it is saved
    again = ConfigDocument(config)
    again.set("agents.general.display_name", "Helper")
    assert again.save()
    assert "Helper" in config.read_text()
    assert "# the person's own note" in config.read_text()


def test_adding_an_existing_agent_is_refused(config: Path) -> None:
    with pytest.raises(ConfigError, match="exists already"):
        ConfigDocument(config).add_agent("general")


def test_cli_get_set_unset_and_validate(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "get", "agents.general.rooms", "--config", str(config)]) == 0
    assert capsys.readouterr().out.strip() == "[lobby]"  # as the file writes it
    assert main(["config", "set", "defaults.history_runs", "5", "--config", str(config)]) == 0
    assert "updated" in capsys.readouterr().out
    assert main(["config", "get", "defaults.history_runs", "--config", str(config)]) == 0
    assert capsys.readouterr().out.strip() == "5"
    assert (
        main(["config", "set", "agents.general.thread_mode", "sideways", "--config", str(config)])
        == 2
    )
    assert "thread_mode" in capsys.readouterr().err
    assert main(["config", "unset", "agents.nobody", "--config", str(config)]) == 2
    assert "no such key" in capsys.readouterr().err
    assert main(["config", "validate", "--config", str(config)]) == 0
    assert "valid (1 agents" in capsys.readouterr().out


def test_init_writes_a_working_install_and_never_overwrites(tmp_path: Path, capsys) -> None:
    target = tmp_path / "new"
    assert main(["config", "init", "--path", str(target)]) == 0
    assert (target / "mind_template" / "MEMORY.md").exists()
    assert main(["config", "validate", "--config", str(target / "config.yaml")]) == 0
    (target / "config.yaml").write_text("# mine\n")
    assert main(["config", "init", "--path", str(target)]) == 0
    assert (target / "config.yaml").read_text() == "# mine\n"
    assert "kept" in capsys.readouterr().out


def test_the_starter_files_match_the_repository_ones() -> None:
    starter = REPO / "mindroom" / "config" / "starter"
    assert filecmp.cmp(starter / "config.yaml", REPO / "config.yaml", shallow=False)
    assert filecmp.cmp(starter / "agents_README.md", REPO / "agents" / "README.md", shallow=False)
    for item in ("MEMORY.md", "memory/README.md"):
        assert filecmp.cmp(
            starter / "mind_template" / item, REPO / "mind_template" / item, shallow=False
        )
