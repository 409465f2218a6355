"""The two layers are kept apart at collection: a test is marked ``integration`` (and
``synapse``) from the fixtures it uses, and a test in tests/unit that needs a server stops the
run. Checked on a small tree of its own, collected with the suite's conftest (as a plugin) and
its pytest options."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

USES_THE_MODEL = "def test_asks(model_server):\n    pass\n"
USES_NOTHING = "def test_adds():\n    assert 1 + 1 == 2\n"


def collect(root: Path, *options: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
        + ["-c", str(REPO / "pyproject.toml"), "--rootdir", str(root), "-p", "tests.conftest"]
        + [*options, str(root)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
        check=False,
    )


def layer(root: Path, name: str, files: dict[str, str]) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    for filename, text in files.items():
        (folder / filename).write_text(text)


def test_a_unit_test_that_needs_a_server_stops_the_collection(tmp_path: Path) -> None:
    layer(tmp_path, "unit", {"test_plain.py": USES_NOTHING, "test_wrong.py": USES_THE_MODEL})
    done = collect(tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr  # a usage error
    assert "unit/test_wrong.py::test_asks: model_server" in done.stderr, done.stderr
    assert "test_plain" not in done.stderr


def test_tests_are_marked_integration_from_their_fixtures_and_their_folder(tmp_path: Path) -> None:
    layer(tmp_path, "unit", {"test_plain.py": USES_NOTHING})
    layer(tmp_path, "integration", {"test_model.py": USES_THE_MODEL, "test_own.py": USES_NOTHING})
    layer(tmp_path, "flat", {"test_flat_model.py": USES_THE_MODEL})
    done = collect(tmp_path, "-m", "integration")
    assert done.returncode == 0, done.stdout + done.stderr
    selected = sorted(line for line in done.stdout.splitlines() if "::" in line)
    assert selected == [
        "flat/test_flat_model.py::test_asks",
        "integration/test_model.py::test_asks",
        "integration/test_own.py::test_adds",
    ]
    # the control: the unit test is collected, it is just not selected
    unit = collect(tmp_path, "-m", "not integration")
    assert [line for line in unit.stdout.splitlines() if "::" in line] == [
        "unit/test_plain.py::test_adds"
    ]
