"""``memory.file.path``, ``memory.file.max_entrypoint_lines`` and private templates.

``memory.file.path`` is an optional fallback root for file-memory paths: it does not relocate
an agent's own file memory (which always lives under the agent's workspace root), it can
affect team file memory; and mindroom does not invent ``MEMORY.md`` or ``memory/`` for private
agents.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.config import parse_config
from mindroom.config.schema import Config
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.search.recall import agent_recall
from mindroom.memory.team import TeamMemory

ALICE = "@alice:example.org"


def config_of(memory: str = "", extra_agent: str = "") -> Config:
    return parse_config(
        "models: {default: {id: x}}\nagents:\n  general: {}\n  coder: {}\n" + extra_agent + memory,
        "test",
    )


@pytest.fixture
def storage(tmp_path: Path) -> Path:
    return tmp_path / "storage"


def opened(config: Config, storage: Path) -> Iterator[MemoryRegistry]:
    registry = MemoryRegistry(config, storage, config_dir=storage.parent)
    try:
        yield registry
    finally:
        registry.close()


FILE_PATH = "memory:\n  file:\n    path: shared_memory\n"


def test_memory_file_path_never_moves_an_agents_own_memory(storage: Path) -> None:
    for registry in opened(config_of(FILE_PATH), storage):
        memory = registry.for_agent("general")
        assert memory is not None
        memory.add_sync("Alice likes green tea", actor="test")

        assert memory.scope.root == storage / "agents" / "general" / "workspace"
        assert "Alice likes green tea" in memory.scope.entrypoint.read_text()
        assert not (storage / "shared_memory" / "general").exists()


def test_memory_file_path_is_the_parent_of_the_team_mirrors(storage: Path) -> None:
    for registry in opened(config_of(FILE_PATH), storage):
        team = registry.for_team(["general", "coder"])
        assert isinstance(team, TeamMemory)
        team.add_sync("The release is on Friday", actor="test")

        for member in ("coder", "general"):
            mirror = storage / "shared_memory" / member / "memory_files" / "team_coder+general"
            assert team.mirrors[member] == mirror
            assert "The release is on Friday" in (mirror / "MEMORY.md").read_text()
    # the control: without file.path the mirrors are in the agents' folders
    for registry in opened(config_of(), storage):
        team = registry.for_team(["general", "coder"])
        assert isinstance(team, TeamMemory)
        default = storage / "agents" / "general" / "memory_files" / "team_coder+general"
        assert team.mirrors["general"] == default


def test_agent_memory_an_older_version_kept_under_file_path_is_still_used(
    storage: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Before, file.path moved agent folders too: an upgrade must not make that memory vanish."""
    legacy = storage / "shared_memory" / "general" / "workspace"
    legacy.mkdir(parents=True)
    (legacy / "MEMORY.md").write_text("- Alice likes green tea\n")

    with caplog.at_level(logging.WARNING):
        for registry in opened(config_of(FILE_PATH), storage):
            for _ in range(2):
                memory = registry.for_agent("general")
                assert memory is not None
                assert memory.scope.root == legacy
                assert [e.text for e in memory.list_sync()] == ["Alice likes green tea"]
    [warning] = [r.getMessage() for r in caplog.records if "memory.file.path" in r.getMessage()]
    assert str(legacy) in warning
    assert str(storage / "agents" / "general" / "workspace") in warning

    # moved to its canonical place (as the warning says), it is used there
    canonical = storage / "agents" / "general" / "workspace"
    canonical.parent.mkdir(parents=True)
    shutil.move(legacy, canonical)
    for registry in opened(config_of(FILE_PATH), storage):
        memory = registry.for_agent("general")
        assert memory is not None
        assert memory.scope.root == canonical
        assert [e.text for e in memory.list_sync()] == ["Alice likes green tea"]


def test_the_canonical_folder_wins_when_both_hold_memory(storage: Path) -> None:
    legacy = storage / "shared_memory" / "general" / "workspace"
    canonical = storage / "agents" / "general" / "workspace"
    for root, text in ((legacy, "old copy"), (canonical, "current")):
        root.mkdir(parents=True)
        (root / "MEMORY.md").write_text(f"- {text}\n")
    for registry in opened(config_of(FILE_PATH), storage):
        memory = registry.for_agent("general")
        assert memory is not None
        assert [e.text for e in memory.list_sync()] == ["current"]


def test_max_entrypoint_lines_caps_memory_md_in_a_turns_recall(storage: Path) -> None:
    config = config_of("memory:\n  embedder: none\n  file:\n    max_entrypoint_lines: 3\n")
    for registry in opened(config, storage):
        memory = registry.for_agent("general")
        assert memory is not None
        memory.scope.root.mkdir(parents=True, exist_ok=True)
        memory.scope.entrypoint.write_text("".join(f"- fact {n}\n" for n in range(1, 9)))

        _, block = agent_recall(config, registry, "general", "hello")

    assert "- fact 3\n" in block
    assert "fact 4" not in block
    assert '[... 5 more lines not shown: read them with memory_get("MEMORY.md", 4, 5)]' in block


KEYWORDS = "memory:\n  embedder: none\n"  # keyword-only search: no model in a unit test
PRIVATE = "  mind:\n    private: {per: user, template_dir: tpl}\n"


def test_a_template_without_memory_files_scaffolds_only_what_it_holds(
    tmp_path: Path, storage: Path
) -> None:
    template = tmp_path / "tpl"
    template.mkdir()
    (template / "SOUL.md").write_text("# Who I am\n")
    for registry in opened(config_of(KEYWORDS, extra_agent=PRIVATE), storage):
        memory = registry.for_agent("mind", ALICE)
        assert memory is not None
        assert memory.list_sync() == []
        _, block = agent_recall(registry.config, registry, "mind", "hello", ALICE)

        files = sorted(
            p.relative_to(memory.scope.root).as_posix() for p in memory.scope.root.rglob("*")
        )
        assert files == ["SOUL.md"]  # no MEMORY.md, no memory/ invented
        assert block == ""


def test_a_template_with_memory_md_and_memory_folder_is_copied(
    tmp_path: Path, storage: Path
) -> None:
    template = tmp_path / "tpl"
    (template / "memory").mkdir(parents=True)
    (template / "MEMORY.md").write_text("# About you\n- likes tea\n")
    (template / "memory" / "README.md").write_text("<!-- daily notes go here -->\n")
    for registry in opened(config_of(extra_agent=PRIVATE), storage):
        memory = registry.for_agent("mind", ALICE)
        assert memory is not None
        files = sorted(
            p.relative_to(memory.scope.root).as_posix()
            for p in memory.scope.root.rglob("*")
            if p.is_file()
        )
        assert files == ["MEMORY.md", "memory/README.md"]
        assert [e.text for e in memory.list_sync()] == ["likes tea"]
