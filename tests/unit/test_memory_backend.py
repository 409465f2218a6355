"""The memory backend protocol is the one way code holds a memory.

* Outside :mod:`mindroom.memory.registry` no module asks which concrete backend a memory is
  (``isinstance`` / ``issubclass`` on a backend class): it asks the protocol's capabilities
  (:func:`~mindroom.memory.backend.keeps_files`, :func:`~mindroom.memory.backend.in_engine`).
  A backend class is any class that states ``capabilities`` in its body, and its subclasses.
* Both backends meet :class:`~mindroom.memory.backend.MemoryBackend`: every member is there,
  each method takes the protocol's arguments (extra ones have defaults), async where the
  protocol is async. (mypy checks the same statically through the capability narrowings.)
"""

from __future__ import annotations

import ast
import functools
import inspect
from pathlib import Path
from typing import Any

import pytest

from mindroom.memory.backend import ENGINE, FILES, MemoryBackend, in_engine, keeps_files
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.files.store import FileMemory
from mindroom.memory.mem0 import Mem0Memory
from mindroom.memory.scope import MemoryScope
from mindroom.memory.team import TeamMemory

PACKAGE = Path(__file__).resolve().parents[2] / "mindroom"
REGISTRY = PACKAGE / "memory" / "registry.py"


@functools.cache
def _trees() -> dict[Path, ast.Module]:
    return {path: ast.parse(path.read_text(), str(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def backend_classes(trees: dict[Path, ast.Module]) -> set[str]:
    """Classes stating ``capabilities`` in their body, and (transitively) their subclasses."""
    classes = [
        node for tree in trees.values() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
    ]
    found = {
        c.name
        for c in classes
        for stmt in c.body
        if isinstance(stmt, ast.Assign | ast.AnnAssign)
        and any(
            isinstance(t, ast.Name) and t.id == "capabilities"
            for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
        )
    }
    grew = True
    while grew:
        more = {c.name for c in classes if any(_name(b) in found for b in c.bases)} - found
        found |= more
        grew = bool(more)
    return found


def _name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def concrete_checks(tree: ast.Module, classes: set[str]) -> list[int]:
    """Lines of ``isinstance``/``issubclass`` calls that name one of ``classes``."""
    lines = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and _name(node.func) in ("isinstance", "issubclass")):
            continue
        if len(node.args) != 2:
            continue
        kinds = node.args[1]
        named = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds]
        if any(_name(k) in classes for k in named):
            lines.append(node.lineno)
    return lines


def test_the_backend_classes_are_found() -> None:
    """The scan knows the backends (a rename must not make the next test pass vacuously)."""
    assert {"FileMemory", "TeamMemory", "Mem0Memory"} <= backend_classes(_trees())


def test_the_scan_sees_a_concrete_check() -> None:
    """Positive control: each form of a concrete check is reported."""
    source = (
        "if isinstance(m, FileMemory): pass\n"
        "ok = isinstance(m, (str, store.Mem0Memory))\n"
        "assert not issubclass(type(m), TeamMemory)\n"
        "fine = isinstance(m, MemoryBackend)\n"
    )
    assert concrete_checks(ast.parse(source), {"FileMemory", "Mem0Memory", "TeamMemory"}) == [
        1,
        2,
        3,
    ]


def test_no_module_outside_the_registry_checks_for_a_concrete_backend() -> None:
    trees = _trees()
    classes = backend_classes(trees)
    found = [
        f"{path.relative_to(PACKAGE.parent)}:{line}"
        for path, tree in trees.items()
        if path != REGISTRY
        for line in concrete_checks(tree, classes)
    ]
    assert not found, f"isinstance on a concrete memory backend (use the capabilities): {found}"


def _members() -> list[str]:
    return [
        name
        for name in dir(MemoryBackend)
        if not name.startswith("_") and name in MemoryBackend.__dict__
    ]


def _takes(protocol: inspect.Signature, method: inspect.Signature) -> list[str]:
    """What ``method`` lacks to be called as ``protocol`` is (empty: nothing)."""
    wrong = []
    params = method.parameters
    for name, want in protocol.parameters.items():
        have = params.get(name)
        if have is None:
            wrong.append(f"no parameter {name}")
        elif have.kind != want.kind:
            wrong.append(f"{name} is {have.kind.description}, not {want.kind.description}")
        elif (
            want.default is not inspect.Parameter.empty and have.default is inspect.Parameter.empty
        ):
            wrong.append(f"{name} has no default")
    for name, have in params.items():
        variadic = have.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
        if name not in protocol.parameters and have.default is inspect.Parameter.empty:
            wrong += [] if variadic else [f"extra parameter {name} without a default"]
    return wrong


@pytest.mark.parametrize("backend", [FileMemory, TeamMemory, Mem0Memory])
def test_each_backend_meets_the_protocol(backend: type) -> None:
    members = _members()
    assert {"add_sync", "search", "write_confirmed", "capabilities", "scope_id"} <= set(members)
    problems = []
    for name in members:
        wanted = getattr(MemoryBackend, name)
        if isinstance(wanted, property):
            continue  # attributes: checked on instances below
        have = getattr(backend, name, None)
        if have is None:
            problems.append(f"{name}: missing")
            continue
        if inspect.iscoroutinefunction(wanted) != inspect.iscoroutinefunction(have):
            problems.append(f"{name}: async should be {inspect.iscoroutinefunction(wanted)}")
        problems += [
            f"{name}: {w}" for w in _takes(inspect.signature(wanted), inspect.signature(have))
        ]
    assert not problems, problems


def test_the_capabilities_say_which_backend(tmp_path: Path) -> None:
    files = FileMemory(MemoryScope("agent_a", tmp_path / "files", tmp_path / "state"))
    try:
        engine = Mem0Memory(None, "agent_b", tmp_path / "mem0")  # type: ignore[arg-type]
        for memory in (files, engine):
            assert isinstance(memory.scope_id, str)
            assert isinstance(memory.scope, MemoryScope)
        assert files.capabilities == FILES
        assert engine.capabilities == ENGINE
        assert keeps_files(files)
        assert not in_engine(files)
        assert in_engine(engine)
        assert not keeps_files(engine)
        assert not keeps_files(None)
        assert not in_engine(None)
    finally:
        files.close()


@pytest.mark.asyncio
async def test_the_async_form_runs_the_blocking_one(tmp_path: Path) -> None:
    """The one async adapter: the async call is the blocking call, in a thread."""
    memory = FileMemory(MemoryScope("agent_a", tmp_path / "files", tmp_path / "state"))
    try:
        added = await memory.add("Alice likes tea", actor="test")
        assert (await memory.get(added.id)).text == "Alice likes tea"
        assert [e.id for e in memory.list_sync()] == [added.id]
        assert memory.add.__name__ == "add"
        assert inspect.signature(memory.add) == inspect.signature(memory.add_sync)
    finally:
        memory.close()


@pytest.mark.asyncio
async def test_the_async_form_calls_a_subclass_override(tmp_path: Path) -> None:
    """A team overrides the blocking writes (to mirror them); the inherited async form must
    call the override, not the base class's method."""
    called: list[str] = []

    class Recording(FileMemory):
        def add_sync(self, text: str, **kwargs: Any) -> MemoryEntry:
            called.append(text)
            return super().add_sync(text, **kwargs)

    memory = Recording(MemoryScope("agent_a", tmp_path / "files", tmp_path / "state"))
    try:
        await memory.add("Alice likes tea", actor="test")
        assert called == ["Alice likes tea"]
    finally:
        memory.close()
