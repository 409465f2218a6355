"""What the ``mindroom memory ...`` CLI tests share: a copy of the repository's config.yaml and
mind_template in a folder, and the CLI run in this process."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from mindroom.cli.main import main

REPO = Path(__file__).resolve().parents[2]

MemoryCli = Callable[..., tuple[int, str, str]]


def copy_config(folder: Path) -> Path:
    """The repository's config.yaml and mind_template, copied into ``folder``."""
    path = folder / "config.yaml"
    shutil.copy(REPO / "config.yaml", path)
    shutil.copytree(REPO / "mind_template", folder / "mind_template")
    return path


def memory_cli(config: Path, capsys: pytest.CaptureFixture[str]) -> MemoryCli:
    """``mindroom memory ACTION ... --config CONFIG --agent AGENT`` run in this process:
    (exit code, stdout, stderr)."""

    def run(action: str, *args: str, agent: str = "general") -> tuple[int, str, str]:
        code = main(["memory", action, "--config", str(config), "--agent", agent, *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def root_of(config: Path, agent: str = "general") -> Path:
    """The workspace of a shared agent of that config."""
    return config.parent / "agents" / agent / "workspace"
