"""``docs/reference/configuration.md`` is generated from the schema and must be current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mindroom.config.reference import COMMAND, render

ROOT = Path(__file__).resolve().parents[2]
CHECKED_IN = ROOT / "docs" / "reference" / "configuration.md"


def test_the_checked_in_configuration_reference_is_current() -> None:
    current = CHECKED_IN.read_text(encoding="utf-8") if CHECKED_IN.exists() else ""
    assert current == render(), (
        f"{CHECKED_IN.relative_to(ROOT)} is out of date with the config schema: regenerate it "
        f"with `{COMMAND}`"
    )


def test_the_reference_command_prints_every_key_of_the_schema() -> None:
    printed = subprocess.run(
        [sys.executable, "-m", "mindroom.config.reference"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert printed == render()
    for key in (
        "models.<name>.provider",
        "memory.llm",
        "memory.embedder",
        "media.speech_to_text.model",
        "agents.<name>.memory_embedder",
        "memory.maintenance.jobs.<name>.cadence",
        "sessions.rooms.<name>.idle_minutes",
    ):
        assert f"| `{key}` |" in printed, key
    # the deprecated inline forms are not what the reference tells people to write
    assert "memory.llm.config" not in printed.replace("`memory.llm.config`, ", "")
