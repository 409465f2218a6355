"""Categories and per-agent allowlists, enforced on every path: the tools (called by the real
Agno agent from a scripted model), recall, the CLI with --agent, and the flush.

Each refusal has a positive control: the same request by an agent the allowlist does not bind
sees or writes what the restricted one may not, so a test would notice if nothing was hidden.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest
from mindroom.cli.main import main
from mindroom.config import load_config
from mindroom.errors import ConfigError
from mindroom.memory.files.store import FileMemory
from mindroom.memory.flush.loop import FlushWorker
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import config_text
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall, system_text, tool_results

ALLOWLISTS = {"planner": ["goals", "tasks"]}
PROFILE_LINE = "- Alice lives in Lyon <!-- m-0000a001 category=profile -->"
TASK_LINE = "- Alice must file the Lyon tax return <!-- m-0000a002 category=tasks -->"
PLAIN_LINE = "- Alice enjoys Lyon's markets"  # hand-written: the default category, general


def _config(tmp_path: Path, model: ScriptedModel, **memory: Any) -> Path:
    path = tmp_path / "config.yaml"
    settings = {"auto_flush": {"enabled": False}, "embedder": "none"}
    settings["maintenance"] = {"enabled": False}
    settings.update({"allowlists": ALLOWLISTS, **memory})
    agents = {"planner": {"rooms": ["r"]}, "general": {"rooms": ["r"]}}
    path.write_text(config_text(model.base_url, agents, memory=settings))
    return path


def _plant(config_path: Path, agent: str, *lines: str) -> Path:
    root = config_path.parent / "agents" / agent / "workspace"
    root.mkdir(parents=True, exist_ok=True)
    target = root / "MEMORY.md"
    target.write_text("".join(line + "\n" for line in lines))
    return target


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


class World:
    """A runtime and registry on a config, closed at the end."""

    def __init__(self, config_path: Path) -> None:
        self.config = load_config(config_path)
        self.registry = MemoryRegistry(self.config, config_path.parent, config_path.parent)
        self.runtime = AgentRuntime(
            self.config, config_path.parent / "mindroom_data", self.registry
        )

    def memory(self, agent: str) -> FileMemory:
        memory = self.registry.for_agent(agent)
        assert isinstance(memory, FileMemory)
        return memory

    def tools(self, agent: str) -> MemoryTools:
        return MemoryTools(self.memory(agent), access=CategoryAccess.of(self.config, agent))

    async def close(self) -> None:
        await self.runtime.close()
        self.registry.close()


# -- config ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("memory", "message"),
    [
        ({"allowlists": {"nobody": ["tasks"]}}, "memory.allowlists.nobody: not a configured"),
        ({"allowlists": {"planner": ["secrets"]}}, "unknown categories secrets"),
        ({"categories": {"custom": [{"name": "profile"}]}}, "defined more than once: profile"),
        ({"categories": {"default": "misc"}}, "'misc' is not a defined category"),
        ({"categories": {"custom": [{"name": "Bad Name"}]}}, "category name 'Bad Name'"),
    ],
)
def test_config_refuses_allowlists_and_categories_that_do_not_fit(
    tmp_path: Path, model: ScriptedModel, memory: dict[str, Any], message: str
) -> None:
    path = _config(tmp_path, model, **memory)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


# -- the tools, through the real agent ----------------------------------------------------------


@pytest.mark.asyncio
async def test_a_tool_write_outside_the_allowlist_is_refused_and_writes_nothing(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config_path = _config(tmp_path, model)
    world = World(config_path)
    try:
        for agent, category in (
            ("planner", "profile"),
            ("planner", "tasks"),
            ("general", "profile"),
        ):
            fact = f"{agent} notes Alice's {category}"
            model.push(
                Reply(tool_calls=[ToolCall("add_memory", {"text": fact, "category": category})])
            )
            model.push("noted")
            result = await world.runtime.run_turn(
                TurnRequest(agent, f"s-{agent}-{category}", "@alice:x", "note it")
            )
            assert result.text == "noted"
        results = tool_results(model)
        planner_profile = world.memory("planner").scope.entrypoint.read_text()
    finally:
        await world.close()
    refused = [r for r in results if r.startswith("error:")]
    assert len(refused) == 1
    assert "agent 'planner' may not write memories in category 'profile'" in refused[0]
    assert "goals, tasks" in refused[0]
    assert "planner notes Alice's profile" not in planner_profile
    assert "planner notes Alice's tasks" in planner_profile  # control: a granted category
    assert "category=tasks" in planner_profile
    assert sum(r.startswith("remembered") for r in results) == 2  # and general may use profile


@pytest.mark.asyncio
async def test_tool_reads_see_only_granted_categories(tmp_path: Path, model: ScriptedModel) -> None:
    config_path = _config(tmp_path, model)
    target = _plant(config_path, "planner", PROFILE_LINE, TASK_LINE, PLAIN_LINE)
    world = World(config_path)
    try:
        planner = world.tools("planner")
        everyone = MemoryTools(world.memory("planner"), access=CategoryAccess.everything())
        found = await planner.search_memories("Lyon")
        control = await everyone.search_memories("Lyon")
        listed = await planner.list_memories()
        read = await planner.memory_get("MEMORY.md")
        control_read = await everyone.memory_get("MEMORY.md")
        got = await planner.get_memory("m-0000a001")
        changed = await planner.update_memory("m-0000a001", "Alice lives in Paris")
        deleted = await planner.delete_memory("m-0000a001")
        before = target.read_text()
    finally:
        await world.close()
    assert "tax return" in found
    assert "lives in Lyon" not in found
    assert "markets" not in found  # general is not on planner's list either
    assert "lives in Lyon" in control
    assert "markets" in control
    assert "lives in Lyon" not in listed
    assert "tax return" in listed
    assert "lives in Lyon" not in read
    assert "(a memory you may not read here)" in read
    assert "lives in Lyon" in control_read
    for answer in (got, changed, deleted):
        assert answer.startswith("error: agent 'planner' may not")
        assert "'profile'" in answer
    assert PROFILE_LINE in before  # neither changed nor deleted


@pytest.mark.asyncio
async def test_a_reload_that_changes_an_allowlist_applies_at_the_next_turn(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config_path = _config(tmp_path, model)
    _plant(config_path, "planner", PROFILE_LINE)
    world = World(config_path)
    try:
        first = world.runtime.build_agent("planner", world.memory("planner"))
        before = await first.tools[0].get_memory("m-0000a001")  # type: ignore[index, union-attr]
        wider = _config(tmp_path, model, allowlists={"planner": ["goals", "tasks", "profile"]})
        world.runtime.set_config(load_config(wider))
        second = world.runtime.build_agent("planner", world.memory("planner"))
        after = await second.tools[0].get_memory("m-0000a001")  # type: ignore[index, union-attr]
    finally:
        await world.close()
    assert before.startswith("error:")
    assert "Alice lives in Lyon" in after


# -- recall ------------------------------------------------------------------------------------


def _recall(config_path: Path, agent: str, message: str) -> str:
    from mindroom.memory.search.recall import agent_recall

    config = load_config(config_path)
    registry = MemoryRegistry(config, config_path.parent, config_path.parent)
    try:
        return agent_recall(config, registry, agent, message, count=False)[1]
    finally:
        registry.close()


def test_recall_leaves_out_categories_the_agent_may_not_read(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config_path = _config(tmp_path, model)
    lines = (PROFILE_LINE, TASK_LINE, PLAIN_LINE)
    _plant(config_path, "planner", *lines)
    _plant(config_path, "general", *lines)
    daily = config_path.parent / "agents" / "planner" / "workspace" / "memory"
    daily.mkdir()
    (daily / "2026-01-05.md").write_text(
        "- Alice's Lyon flat has a blue door <!-- m-0000a003 category=profile -->\n"
    )

    planner = _recall(config_path, "planner", "What about Lyon and the blue door?")
    general = _recall(config_path, "general", "What about Lyon?")
    assert "tax return" in planner
    assert "lives in Lyon" not in planner
    assert "blue door" not in planner
    assert "markets" not in planner
    assert "lives in Lyon" in general  # control: the same files, an agent without a list
    assert "markets" in general


def test_context_all_categories_are_always_recalled_and_rag_ones_are_capped(
    tmp_path: Path, model: ScriptedModel
) -> None:
    categories = {"custom": [{"name": "trips", "context": "rag", "rag_length": 1}]}
    config_path = _config(tmp_path, model, allowlists={}, categories=categories)
    root = config_path.parent / "agents" / "general" / "workspace"
    (root / "memory").mkdir(parents=True)
    (root / "memory" / "2026-01-05.md").write_text(
        "- Alice is allergic to peanuts <!-- m-0000b001 category=profile -->\n"
        "- Alice took the train to Porto <!-- m-0000b002 category=trips -->\n"
        "- Alice took the train to Seville <!-- m-0000b003 category=trips -->\n"
        "- Alice took the ferry to Tangier <!-- m-0000b004 -->\n"
        "- Alice took the bus to Madrid <!-- m-0000b005 -->\n"
    )
    unrelated = _recall(config_path, "general", "good morning!")
    trains = _recall(config_path, "general", "Which train trips and bus trips did Alice take?")
    assert "allergic to peanuts" in unrelated  # profile is "context: all"
    assert "### Always in context" in unrelated
    assert "train" not in unrelated  # trips are "rag": only when relevant
    assert "allergic to peanuts" in trains
    assert sum(city in trains for city in ("Porto", "Seville")) == 1  # rag_length 1
    assert "Madrid" in trains  # general's own cap (5) lets it in: the cap is per category


# -- the CLI with --agent ------------------------------------------------------------------------


def _cli(config_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["memory", *args, "--config", str(config_path)])
    return code, capsys.readouterr().out


def test_cli_with_agent_applies_its_allowlist(
    tmp_path: Path, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    config_path = _config(tmp_path, model)
    target = _plant(config_path, "planner", PROFILE_LINE, TASK_LINE)
    code, out = _cli(config_path, capsys, "add", "--agent", "planner", "--category", "profile", "x")
    assert code == 1
    assert "may not write memories in category 'profile'" in out
    code, out = _cli(config_path, capsys, "list", "--agent", "planner")
    assert code == 0
    assert "tax return" in out
    assert "lives in Lyon" not in out
    code, out = _cli(config_path, capsys, "get", "--agent", "planner", "m-0000a001")
    assert code == 1
    assert "may not read" in out
    goal = ("--category", "goals", "--importance", "5", "--pin", "Alice wants to run a marathon")
    code, out = _cli(config_path, capsys, "add", "--agent", "planner", *goal)
    assert code == 0
    assert "category=goals importance=5 pinned" in target.read_text()
    code, out = _cli(
        config_path, capsys, "set", "--agent", "general", "m-0000a001", "--importance", "4"
    )
    assert (code, out) == (1, out)  # general's memory has no such entry
    code, out = _cli(
        config_path, capsys, "set", "--agent", "planner", "m-0000a002", "--category", "goals"
    )
    assert code == 0
    assert "category=goals" in out
    assert (
        "- Alice must file the Lyon tax return <!-- m-0000a002 category=goals -->"
        in target.read_text()
    )
    code, out = _cli(
        config_path, capsys, "set", "--agent", "planner", "m-0000a002", "--category", "profile"
    )
    assert code == 1
    assert "may not write memories in category 'profile'" in out


def test_a_team_without_its_own_list_sees_only_what_every_member_may(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config = load_config(_config(tmp_path, model))
    assert CategoryAccess.of_team(config, "crew", ["planner", "general"]).allowed == {
        "goals",
        "tasks",
    }
    assert CategoryAccess.of_team(config, "crew", ["general"]).allowed is None


# -- the flush ---------------------------------------------------------------------------------


def test_the_flush_shows_the_extraction_only_what_the_agent_may_read(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config_path = _config(
        tmp_path,
        model,
        allowlists={"planner": ["general", "tasks"]},
        auto_flush={"enabled": True, "idle_seconds": 3600},
    )
    for agent in ("planner", "general"):
        _plant(config_path, agent, PROFILE_LINE, TASK_LINE)
    prompts: list[str] = []

    def handler(request: dict[str, Any]) -> str:
        if "You maintain the long-term memory" in system_text(request):
            prompts.append(json.dumps(request["messages"]))
            return "- Alice's Lyon tax return is due in May"
        return "ok"

    model.set_handler(handler)

    async def converse() -> list[Any]:
        world = World(config_path)
        worker = FlushWorker(
            world.config, world.runtime, world.registry, config_path.parent / "mindroom_data"
        )
        try:
            for agent in ("planner", "general"):
                text = f"{agent} hears: the Lyon tax return is due in May"
                await world.runtime.run_turn(TurnRequest(agent, f"s-{agent}", "@alice:x", text))
                await worker.turn_finished(agent, f"s-{agent}", None)
            return await worker.cycle(force=True)
        finally:
            await worker.aclose()
            await world.close()

    results = asyncio.run(converse())
    assert {r.entry.agent: len(r.written) for r in results} == {"planner": 1, "general": 1}
    (planner,) = [p for p in prompts if "planner hears" in p]
    (general,) = [p for p in prompts if "general hears" in p]
    assert "tax return" in planner  # what planner may read is shown
    assert "Alice lives in Lyon" not in planner
    assert "Alice lives in Lyon" in general  # control: general's extraction sees its profile
