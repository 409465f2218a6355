"""Operational events and ``mindroom memory stats``: what recall, the tools, the flush
and the lifecycle job did, counted by node and op; and consent from the CLI."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path

import pytest

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.cli.main import main
from mindroom.config import load_config
from mindroom.memory.files.facts import store_facts
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.view import AgentView
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.search.recall import RecallSettings, build_recall
from tests.support.harness import BotHarness, Human, config_text, unique, write_entries
from tests.support.scripted_model import ScriptedModel


def _config(tmp_path: Path) -> Path:
    with ScriptedModel() as model:  # the URL is never called: the config only needs one
        path = tmp_path / "config.yaml"
        path.write_text(config_text(model.base_url, {"general": {"rooms": ["r"]}}))
    return path


def _cli(config: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["memory", *args, "--agent", "general", "--config", str(config)])
    return code, capsys.readouterr().out


def test_stats_count_what_each_node_did(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    code, out = _cli(config, capsys, "stats")
    assert (code, out.splitlines()[-1]) == (0, "(no events yet)")
    registry = MemoryRegistry(load_config(config), tmp_path, tmp_path)
    try:
        memory = registry.for_agent("general")
        assert isinstance(memory, FileMemory)
        tools = MemoryTools(memory)
        asyncio.run(tools.add_memory("Alice keeps bees on the roof"))
        asyncio.run(tools.search_memories("bees"))
        view = AgentView(memory, CategoryAccess.everything())
        store_facts(
            view,
            ["Alice sells honey at the market", "I like it"],
            turns=1,
            daily_cap=60,
            run="s1",
            path="memory/2026-11-25.md",
            user_id="@alice:x",
        )
        now = dt.datetime(2026, 11, 25, 12)
        build_recall(memory, "what about the bees?", RecallSettings(), now=now)
        build_recall(memory, "good morning", RecallSettings(), now=now, count=False)  # a preview
    finally:
        registry.close()
    code, out = _cli(config, capsys, "stats")
    assert code == 0
    rows = {tuple(line.split()[:2]): line.split()[2:5] for line in out.splitlines()[1:]}
    assert rows[("hotpath", "create")] == ["1", "0", "0"]
    assert rows[("hotpath", "search")] == ["1", "0", "0"]
    assert rows[("episodic", "create")] == ["1", "1", "0"]  # the first-person line: skipped
    assert rows[("context", "search")] == ["1", "0", "0"]  # the preview is not counted


def test_cli_lists_confirms_and_rejects_proposals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path)
    registry = MemoryRegistry(load_config(config), tmp_path, tmp_path)
    try:
        memory = registry.for_agent("general")
        assert isinstance(memory, FileMemory)
        view = AgentView(memory, CategoryAccess.everything())
        store_facts(
            view,
            ["Alice moved to Lyon", "Alice goes by Ali"],
            turns=2,
            daily_cap=60,
            run="s1",
            path="memory/2026-11-25.md",
            user_id="@alice:x",
        )
    finally:
        registry.close()
    code, out = _cli(config, capsys, "proposals")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2
    lyon = next(line.split()[0] for line in lines if "Lyon" in line)
    ali = next(line.split()[0] for line in lines if "Ali" in line and "Lyon" not in line)
    assert "sensitive city" in " ".join(next(line for line in lines if "Lyon" in line).split())
    code, out = _cli(config, capsys, "confirm", lyon)
    assert code == 0
    assert out.startswith(f"confirmed {lyon}: wrote m-")
    code, out = _cli(config, capsys, "reject", ali)
    assert (code, out) == (0, f"rejected {ali}: nothing written\n")
    assert _cli(config, capsys, "proposals")[1] == "no proposals waiting\n"
    daily = (tmp_path / "agents" / "general" / "workspace" / "memory" / "2026-11-25.md").read_text()
    assert "Alice moved to Lyon" in daily
    assert "Ali" not in daily.replace("Alice", "")


@pytest.mark.asyncio
async def test_a_turns_recall_is_counted_though_written_beside_the_reply(
    bot: BotHarness, human: Human, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    room = unique("stats")
    config = config_text(model.base_url, {"general": {"rooms": [room]}})
    write_entries(bot.storage / "agents" / "general" / "workspace", "MEMORY.md", ["Bob has bees"])
    room_id = await bot.start_in_room(config, room, human)
    model.push("They are fine.")
    asked = await human.send(room_id, "how are the bees of Bob?")
    reply = await human.wait_for_reply(room_id, asked)
    assert reply["content"]["body"] == "They are fine."
    assert "Bob has bees" in str(model.requests[-1])  # the positive control: recall ran
    await bot.stop()  # waits for the events recall left to write
    code, out = _cli(bot.storage / "config.yaml", capsys, "stats")
    rows = {tuple(line.split()[:2]): line.split()[2:5] for line in out.splitlines()[1:]}
    assert (code, rows.get(("context", "search"))) == (0, ["1", "0", "0"]), out
