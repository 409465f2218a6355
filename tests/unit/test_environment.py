"""The environment from the shell and the ``.env`` beside config.yaml, read again at a reload,
and what the running bot publishes of it for the doctor (secrets only as hashes)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from mindroom.config.environment import (
    ENVIRONMENT_FILE,
    apply_environment,
    environment_differences,
    load_dotenv_beside,
    read_running_environment,
    reread_dotenv,
    running_environment,
    write_running_environment,
)

NAMES = ("MR_T_SHELL", "MR_T_FILE", "MR_T_GONE", "MR_T_NEW", "MR_T_API_KEY")


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in NAMES:  # whatever the code under test sets is undone after the test
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MR_T_SHELL", "from-the-shell")
    path = tmp_path / "config.yaml"
    path.write_text("models: {default: {id: '${MR_T_FILE}', api_key: '${MR_T_API_KEY}'}}\n")
    (tmp_path / ".env").write_text(
        "MR_T_SHELL=from-the-file\nMR_T_FILE=one\nMR_T_GONE=bye\nMR_T_API_KEY=sk-first-secret\n"
    )
    assert load_dotenv_beside(path)
    return path


def test_a_reload_takes_the_files_new_values_and_the_shells_stay(config: Path) -> None:
    assert os.environ["MR_T_SHELL"] == "from-the-shell"  # the shell wins at start
    assert os.environ["MR_T_FILE"] == "one"
    (config.parent / ".env").write_text(
        "MR_T_SHELL=changed-in-the-file\nMR_T_FILE=two\nMR_T_NEW=hello\n"
        "MR_T_API_KEY=sk-first-secret\n"
    )

    change = reread_dotenv(config)
    assert change.changed == ("MR_T_FILE", "MR_T_GONE", "MR_T_NEW")
    assert os.environ["MR_T_FILE"] == "one"  # computed, not applied yet
    assert change.environment["MR_T_FILE"] == "two"
    assert "MR_T_GONE" not in change.environment

    apply_environment(config, change)
    assert os.environ["MR_T_FILE"] == "two"
    assert os.environ["MR_T_NEW"] == "hello"
    assert "MR_T_GONE" not in os.environ  # removed from the file: gone
    assert os.environ["MR_T_SHELL"] == "from-the-shell"  # never the file's
    assert reread_dotenv(config).changed == ()  # nothing more to do


def test_the_published_environment_hashes_secrets_and_says_where_values_came_from(
    config: Path, tmp_path: Path
) -> None:
    data_dir = tmp_path / "mindroom_data"
    write_running_environment(config, data_dir)

    text = (data_dir / ENVIRONMENT_FILE).read_text()
    assert "sk-first-secret" not in text
    variables = json.loads(text)["variables"]
    assert variables["MR_T_API_KEY"]["value"].startswith("sha256:")
    assert variables["MR_T_API_KEY"]["origin"] == ".env"
    assert variables["MR_T_FILE"] == {"origin": ".env", "value": "one"}
    assert variables["MR_T_SHELL"] == {"origin": "shell", "value": "from-the-shell"}
    assert read_running_environment(data_dir) == json.loads(text)


def test_differences_name_the_running_value_and_the_files(config: Path) -> None:
    published = running_environment(config)
    assert environment_differences(published) == []  # the control: the same environment

    now = dict(os.environ, MR_T_FILE="two", MR_T_API_KEY="sk-another-secret")
    found = {d.name: d.describe() for d in environment_differences(published, now)}
    assert found["MR_T_FILE"] == "MR_T_FILE=one (config/.env now say two)"
    assert found["MR_T_API_KEY"] == "MR_T_API_KEY=a value (config/.env now say another value)"
    assert "sk-" not in " ".join(found.values())

    now = {k: v for k, v in os.environ.items() if k != "MR_T_SHELL"}
    (shell,) = environment_differences(published, now)
    assert shell.describe() == (
        "MR_T_SHELL=from-the-shell (from the shell that started it) (config/.env now say unset)"
    )
