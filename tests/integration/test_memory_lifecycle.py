"""TTL: unused memory expires (soft-deleted, hidden from every read), is purged on its day, and
comes back with ``mindroom memory restore``; reads are tracked without touching the files."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.cli.main import main
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.lifecycle import LifecycleSettings, expire_and_purge
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.filters import MemoryFilter
from mindroom.memory.policy.view import AgentView, note_access
from mindroom.memory.scope import MemoryScope
from tests.support.harness import config_text
from tests.support.scripted_model import ScriptedModel

TODAY = dt.date.today()  # note_access records the real clock: the bike entry is read "today"
OLD = f"memory/{TODAY - dt.timedelta(days=116)}.md"  # past the 60-day TTL
CHANGED = TODAY - dt.timedelta(days=20)
RECENT = f"memory/{TODAY - dt.timedelta(days=5)}.md"
SETTINGS = LifecycleSettings(ttl_days=60, importance_below=3, purge_after_days=30)


def _write(root: Path, relative: str, lines: list[str]) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[FileMemory]:
    root = tmp_path / "workspace"
    _write(
        root,
        OLD,
        [
            "- Alice tried the ramen place <!-- m-0000d001 importance=2 -->",
            "- Alice's passport number is on file <!-- m-0000d002 importance=2 pinned -->",
            "- Alice started learning Greek <!-- m-0000d003 importance=4 -->",
            "- Alice mentioned the ramen place was loud",  # hand-written
            "- Alice's bike needs a new chain <!-- m-0000d004 importance=1 -->",
            f"- Alice likes the ramen broth <!-- m-0000d005 importance=2 updated={CHANGED} -->",
        ],
    )
    _write(root, RECENT, ["- Alice ate ramen again <!-- m-0000d006 importance=1 -->"])
    _write(root, "MEMORY.md", ["- Alice likes ramen <!-- m-0000d007 importance=1 -->"])
    mem = FileMemory(MemoryScope("agent_test", root, tmp_path / "state"))
    # an agent read the bike entry today: it is in use, whatever its age
    note_access(mem, [mem.find("m-0000d004")])
    yield mem
    mem.close()


def _ids(memory: FileMemory, query: str = "ramen Alice bike chain") -> set[str]:
    return {hit.entry.id for hit in memory.search_sync(query, 20)}


def test_unused_unimportant_entries_expire_and_everything_else_stays(memory: FileMemory) -> None:
    before = _ids(memory)
    report = expire_and_purge(memory, SETTINGS, TODAY)
    assert report.expired == ["m-0000d001"]
    assert report.purged == []
    text = (memory.scope.root / OLD).read_text()
    assert "- Alice tried the ramen place <!-- m-0000d001 importance=2 state=soft_deleted" in text
    assert f"purge={TODAY + dt.timedelta(days=30)} -->" in text
    after = _ids(memory)
    assert "m-0000d001" in before  # control: it was found before
    assert after == before - {"m-0000d001"}
    (record,) = [r for r in memory.history_of("m-0000d001") if r.op == "ttl"]
    assert record.actor == "lifecycle"
    assert "state=soft_deleted" in (record.meta or {})["fields"]


def test_an_expired_entry_is_hidden_from_every_read_path(memory: FileMemory) -> None:
    expire_and_purge(memory, SETTINGS, TODAY)
    view = AgentView(memory, CategoryAccess.everything())
    assert "m-0000d001" not in {e.id for e in view.list_sync(100)}
    assert "m-0000d001" not in {h.entry.id for h in view.search_sync("ramen place", 10)}
    with pytest.raises(Exception, match="expired"):
        view.get_sync("m-0000d001")
    assert "tried the ramen place" not in view.read_file_sync(OLD)
    # what a restore or an export asks for still finds it
    gone = memory.index.select(MemoryFilter(soft_deleted=True).where(), 10)
    assert [e.id for e in gone] == ["m-0000d001"]


def test_a_save_between_the_read_and_the_expiry_wins(memory: FileMemory) -> None:
    real_write = memory.write
    path = memory.scope.root / OLD

    def person_saves_first(relative: str, edit: Any, record: Any) -> tuple[str, str]:
        path.write_text(path.read_text().replace("tried the ramen place", "loved the ramen place"))
        return real_write(relative, edit, record)

    memory.write = person_saves_first  # type: ignore[method-assign]
    report = expire_and_purge(memory, SETTINGS, TODAY)
    assert report.expired == []
    assert "- Alice loved the ramen place <!-- m-0000d001 importance=2 -->" in path.read_text()
    assert memory.history_of("m-0000d001") == []  # nothing was recorded as done


def test_purge_removes_it_on_its_day_and_restore_still_brings_it_back(
    memory: FileMemory,
) -> None:
    expire_and_purge(memory, SETTINGS, TODAY)
    early = expire_and_purge(memory, SETTINGS, TODAY + dt.timedelta(days=29))
    assert early.purged == []
    assert "m-0000d001" in (memory.scope.root / OLD).read_text()
    due = expire_and_purge(memory, SETTINGS, TODAY + dt.timedelta(days=30))
    assert due.purged == ["m-0000d001"]
    assert "m-0000d001" not in (memory.scope.root / OLD).read_text()
    restored = memory.restore_sync("m-0000d001", actor="cli")
    assert (restored.id, restored.text) == ("m-0000d001", "Alice tried the ramen place")
    assert restored.fields.importance == 2
    assert not restored.fields.soft_deleted
    assert "m-0000d001" in _ids(memory)


def test_restore_from_the_cli_makes_an_expired_entry_live_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedModel() as model:
        config = tmp_path / "config.yaml"
        config.write_text(config_text(model.base_url, {"general": {"rooms": ["r"]}}))
        root = tmp_path / "agents" / "general" / "workspace"
        _write(root, OLD, ["- Alice tried the ramen place <!-- m-0000d001 importance=2 -->"])
        memory = FileMemory(MemoryScope("general", root, tmp_path / "state"))
        try:
            assert expire_and_purge(memory, SETTINGS, TODAY).expired == ["m-0000d001"]
        finally:
            memory.close()
        code = main(
            ["memory", "restore", "--agent", "general", "m-0000d001", "--config", str(config)]
        )
        out = capsys.readouterr().out
    assert code == 0, out
    assert "restored m-0000d001" in out
    assert (
        root / OLD
    ).read_text() == "- Alice tried the ramen place <!-- m-0000d001 importance=2 -->\n"


def test_reads_through_the_tools_keep_an_entry_alive(memory: FileMemory) -> None:
    tools = MemoryTools(memory)
    found = asyncio.run(tools.search_memories("tried the ramen place"))
    assert "m-0000d001" in found
    report = expire_and_purge(memory, SETTINGS, TODAY)
    # read just now (unread, it expires: the first test of this file is the control)
    assert report.expired == []


def test_the_daily_lifecycle_job_expires_through_the_maintenance_tick(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with ScriptedModel() as model:
        config = tmp_path / "config.yaml"
        settings = {"auto_flush": {"enabled": False}, "embedder": "none"}
        config.write_text(
            config_text(model.base_url, {"general": {"rooms": ["r"]}}, memory=settings)
        )
        root = tmp_path / "agents" / "general" / "workspace"
        _write(root, OLD, ["- Alice tried the ramen place <!-- m-0000d001 importance=2 -->"])
        args = ["maintenance", "tick", "--job", "memory_lifecycle", "--config", str(config)]
        code = main(args)
        out = capsys.readouterr().out
    assert code == 0, out
    assert "memory_lifecycle: completed" in out
    assert "state=soft_deleted" in (root / OLD).read_text()
