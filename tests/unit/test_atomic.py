"""mindroom.atomic: the one atomic-write helper, and the rule that every writer uses it."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from mindroom import atomic
from mindroom.atomic import TEMP_NAME_RE, atomic_write

PACKAGE = Path(__file__).resolve().parents[2] / "mindroom"


def test_atomic_write_replaces_the_file_and_keeps_its_mode(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("old\n")
    path.chmod(0o640)

    atomic_write(path, "new\r\n")

    assert path.read_bytes() == b"new\r\n"  # line endings untouched
    assert path.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


def test_atomic_write_of_a_secret_is_never_readable_by_others(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"

    atomic_write(path, "{}", mode=0o600)

    assert path.stat().st_mode & 0o777 == 0o600


def test_a_failed_write_leaves_the_old_file_and_no_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_text("- kept\n")

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(atomic.os, "fsync", disk_full)
    with pytest.raises(OSError, match="No space"):
        atomic_write(path, "- lost\n")

    assert path.read_text() == "- kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MEMORY.md"]


def test_temp_names_match_the_pattern_the_clean_up_removes(tmp_path: Path) -> None:
    name = atomic.temp_path(tmp_path / "MEMORY.md").name
    match = TEMP_NAME_RE.match(name)
    assert match is not None
    assert match.group("target") == "MEMORY.md"
    assert TEMP_NAME_RE.match(".MEMORY.md.swp") is None  # an editor's own file is not ours


def test_only_the_atomic_helper_and_the_memory_protocol_rename_files() -> None:
    pattern = re.compile(r"os\.replace\(|os\.rename\(|mkstemp\(")
    writers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    )
    assert writers == ["atomic.py", os.path.join("memory", "files", "protocol.py")]
