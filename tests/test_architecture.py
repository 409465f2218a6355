"""Layering: each third-party SDK is imported by one package only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mindroom"

# SDK -> the only package allowed to import it
OWNERS = {"nio": "matrix", "agno": "agents", "ruamel": "config"}


def test_memory_never_imports_matrix_or_agents() -> None:
    for path in sorted((PACKAGE / "memory").glob("*.py")):
        for module in imported_modules(path):
            assert not module.startswith(("mindroom.matrix", "mindroom.agents")), path.name


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_sdks_are_imported_only_by_their_owning_package(path: Path) -> None:
    package = path.relative_to(PACKAGE).parts[0]
    for module in imported_modules(path):
        root = module.split(".")[0]
        owner = OWNERS.get(root)
        if owner is not None:
            assert package == owner, f"{path.name} imports {module}; only mindroom.{owner} may"


def test_routing_is_pure() -> None:
    imports = imported_modules(PACKAGE / "routing.py")
    assert not any(m.split(".")[0] in ("nio", "agno", "asyncio", "aiohttp") for m in imports)
