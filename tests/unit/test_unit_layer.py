"""The unit layer runs in one process: no test in tests/unit starts a Python process (the CLI,
a bot, a second writer) or forks one, or asks for a server fixture by name at run time
(``request.getfixturevalue("postgres")``, which the collection-time check in tests/conftest.py
cannot see). Tests that need either live in tests/integration. Checked on the source of every
unit test module."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import MODEL_FIXTURES, SERVER_FIXTURES

UNIT = Path(__file__).resolve().parent

# What starts another Python process: the interpreter run again, multiprocessing, fork.
_PROCESS_MODULES = frozenset({"multiprocessing", "concurrent.futures.process"})
_PROCESS_NAMES = frozenset({"executable", "fork", "forkpty", "create_subprocess_exec"})


def processes_started(source: str) -> list[str]:
    """Each place in ``source`` that starts (or imports what starts) a Python process."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name in _PROCESS_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module in _PROCESS_MODULES:
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Attribute) and node.attr in _PROCESS_NAMES:
            found.append(f"line {node.lineno}: .{node.attr}")
        elif _asks_for_a_server(node):
            found.append(f"line {node.lineno}: getfixturevalue of a server")
    return found


def _asks_for_a_server(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "getfixturevalue"
        and any(
            isinstance(a, ast.Constant) and a.value in SERVER_FIXTURES | MODEL_FIXTURES
            for a in node.args
        )
    )


def test_no_unit_test_starts_a_python_process_or_a_server() -> None:
    offenders = {
        path.name: found
        for path in sorted(UNIT.glob("*.py"))
        if (found := processes_started(path.read_text()))
    }
    assert offenders == {}, "move these tests to tests/integration"


def test_the_check_sees_each_way_of_starting_one() -> None:
    assert processes_started("import subprocess, sys\nsubprocess.run([sys.executable])\n") == [
        "line 2: .executable"
    ]
    assert processes_started("import multiprocessing\n") == ["import multiprocessing"]
    assert processes_started("import os\nos.fork()\n") == ["line 2: .fork"]
    assert processes_started("import asyncio\nasyncio.create_subprocess_exec('x')\n") == [
        "line 2: .create_subprocess_exec"
    ]
    assert processes_started("def f(request):\n    request.getfixturevalue('postgres')\n") == [
        "line 2: getfixturevalue of a server"
    ]
    # the controls: another fixture asked for by name; a command that is not Python (a pid
    # known to be gone)
    assert processes_started("def f(request):\n    request.getfixturevalue('tmp_path')\n") == []
    assert processes_started("import subprocess\nsubprocess.Popen(['true'])\n") == []
