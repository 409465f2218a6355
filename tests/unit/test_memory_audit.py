"""The audit trail (``memory history --json``: ADD, UPDATE, DELETE, TTL, RESTORE with actor and
metadata) and ``memory export --user``: everything stored about one person, and nobody else."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest

from mindroom.cli.main import main
from mindroom.config import load_config
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.lifecycle import LifecycleSettings, expire_and_purge
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import repo_config, write_entries

ALICE = "@alice:example.org"
BOB = "@bob:example.org"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return repo_config(tmp_path)


def run(config: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["memory", *args, "--config", str(config)])
    out, _ = capsys.readouterr()
    return code, out


def _memory(config: Path, agent: str = "general") -> tuple[FileMemory, MemoryRegistry]:
    registry = MemoryRegistry(load_config(config), config.parent, config.parent)
    memory = registry.for_agent(agent)
    assert isinstance(memory, FileMemory)
    return memory, registry


def test_history_json_tells_every_write_as_an_audit_event(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    add = ("add", "--agent", "general", "--file", "topics/naps.md", "Alice naps at noon")
    code, out = run(config, capsys, *add)
    entry_id = out.split()[1]
    run(config, capsys, "set", "--agent", "general", entry_id, "--importance", "1")
    memory, registry = _memory(config)
    try:
        # a person backdates it; the lifecycle pass then expires it
        path = memory.scope.root / "topics" / "naps.md"
        path.write_text(re.sub(r"created=\S+", "created=2020-01-01", path.read_text()))
        assert expire_and_purge(memory, LifecycleSettings(), dt.date.today()).expired == [entry_id]
    finally:
        registry.close()
    assert run(config, capsys, "restore", "--agent", "general", entry_id)[0] == 0
    memory, registry = _memory(config)
    try:
        memory.delete_sync(entry_id, actor="tool")
    finally:
        registry.close()

    code, out = run(config, capsys, "history", "--agent", "general", entry_id, "--json")
    assert code == 0
    events = json.loads(out)
    assert [(e["event"], e["actor"]) for e in events] == [
        ("ADD", "cli"),
        ("UPDATE", "cli"),
        ("TTL", "lifecycle"),
        ("RESTORE", "cli"),
        ("DELETE", "tool"),
    ]
    assert "importance=1" in events[1]["meta"]["fields"]
    assert "state=soft_deleted" in events[2]["meta"]["fields"]
    assert all(e["memory_id"] == entry_id for e in events)


def test_export_user_gives_everything_about_one_person_and_nothing_of_anyone_else(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for user, fact in ((ALICE, "My cat is called Miso"), (BOB, "My cat is called Rex")):
        code, _ = run(config, capsys, "add", "--agent", "mind", "--user", user, fact)
        assert code == 0
    [alice_root] = (config.parent / "private_instances").glob("alice_*/mind_data")
    write_entries(alice_root, "topics/pets.md", ["Miso sleeps on the piano"])  # by hand
    shared = config.parent / "agents" / "general" / "workspace"
    write_entries(shared, "MEMORY.md", [f"{ALICE} prefers tea", f"{BOB} prefers coffee"])

    code, out = run(config, capsys, "export", "--user", ALICE, "--format", "json")
    assert code == 0, out
    data = json.loads(out)
    texts = [e["text"] for scope in data["private_memory"] for e in scope["entries"]]
    assert "My cat is called Miso" in texts
    assert "Miso sleeps on the piano" in texts
    assert all("Rex" not in t and BOB not in t for t in texts)
    mentions = [e["text"] for s in data["shared_memory_mentions"] for e in s["entries"]]
    assert mentions == [f"{ALICE} prefers tea"]
    history = [e for scope in data["private_memory"] for e in scope["history"]]
    assert [(e["event"], e["new"]) for e in history] == [("ADD", "My cat is called Miso")]

    code, out = run(config, capsys, "export", "--user", ALICE)
    assert code == 0
    assert out.startswith(f"# Everything mindroom stores about {ALICE}")
    assert "- My cat is called Miso <!-- m-" in out
    assert "Rex" not in out


def test_export_of_someone_with_no_data_creates_nothing(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = run(config, capsys, "export", "--user", "@carol:example.org", "--format", "json")
    assert code == 0
    data = json.loads(out)
    assert data["private_memory"] == []
    assert data["other_stores"] == []
    assert not (config.parent / "private_instances").exists()
    code, _ = run(config, capsys, "export", "--format", "json")
    assert code != 0  # nobody named
