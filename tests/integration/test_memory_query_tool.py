"""``memory_query``: categories, filters applied in the store, top_k, threshold, bullets or
full records within a token budget; called by the real Agno agent from a scripted model and
directly through the tool's entrypoint."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.adapters.agno.query_tool import memory_query_function
from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest
from mindroom.config import load_config
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.view import AgentView
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.search.structured_query import Asker
from mindroom.memory.tools import tool_turn
from tests.support.harness import config_text
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall, tool_results

ALICE = "@alice:example.org"
LINES = [
    "- Alice must renew her passport <!-- m-0000c001 category=tasks importance=5 -->",
    "- Alice must water the plants <!-- m-0000c002 category=tasks importance=2 -->",
    "- Alice lives in Lyon <!-- m-0000c003 category=profile pinned -->",
    "- Passport renewal: 1. book a slot 2. bring two photos"
    " <!-- m-0000c004 category=procedural -->",
    "- Alice's old passport number was kept"
    " <!-- m-0000c005 category=tasks state=soft_deleted purge=2099-01-01 -->",
    "- Alice wrote this passport note by hand",
]


@pytest.fixture
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


def _config(tmp_path: Path, model: ScriptedModel, **memory: Any) -> Path:
    settings: dict[str, Any] = {"auto_flush": {"enabled": False}, "embedder": "none"}
    settings["maintenance"] = {"enabled": False}
    settings["allowlists"] = {"planner": ["tasks", "procedural", "general"]}
    settings.update(memory)
    path = tmp_path / "config.yaml"
    agents = {"planner": {"rooms": ["r"]}, "general": {"rooms": ["r"]}}
    path.write_text(config_text(model.base_url, agents, memory=settings))
    for agent in agents:
        root = tmp_path / "agents" / agent / "workspace"
        root.mkdir(parents=True)
        (root / "MEMORY.md").write_text("\n".join(LINES) + "\n")
    return path


class World:
    def __init__(self, config_path: Path) -> None:
        self.config = load_config(config_path)
        self.registry = MemoryRegistry(self.config, config_path.parent, config_path.parent)
        data = config_path.parent / "mindroom_data"
        self.runtime = AgentRuntime(self.config, data, self.registry)

    def memory(self, agent: str) -> FileMemory:
        memory = self.registry.for_agent(agent)
        assert isinstance(memory, FileMemory)
        return memory

    async def query(self, who: str, **arguments: Any) -> Any:
        view = AgentView(self.memory(who), CategoryAccess.of(self.config, who))
        tool = memory_query_function(view, Asker(who, ALICE, frozenset({who})))
        assert tool.entrypoint is not None
        answer = await tool.entrypoint(**arguments)
        return answer if answer.startswith("error:") else json.loads(answer)

    async def close(self) -> None:
        await self.runtime.close()
        self.registry.close()


@pytest_asyncio.fixture
async def world(tmp_path: Path, model: ScriptedModel) -> Any:
    opened = World(_config(tmp_path, model))
    yield opened
    await opened.close()


@pytest.mark.asyncio
async def test_the_agent_queries_by_category_and_importance_and_gets_bullets(
    world: World, model: ScriptedModel
) -> None:
    arguments = {
        "query": "passport",
        "categories": ["tasks"],
        "filters": {"importance_min": 4},
        "return": "bullets",
    }
    model.push(Reply(tool_calls=[ToolCall("memory_query", arguments)]))
    model.push("You need to renew your passport.")
    result = await world.runtime.run_turn(TurnRequest("planner", "s1", ALICE, "what's on?"))
    assert result.text == "You need to renew your passport."
    offered = {tool["function"]["name"] for tool in model.requests[0]["tools"]}
    assert {"memory_query", "add_memory", "search_memories"} <= offered  # beside the others
    (answer,) = tool_results(model)
    assert json.loads(answer) == [
        {"id": "m-0000c001", "category": "tasks", "text": "[tasks] Alice must renew her passport"}
    ]


@pytest.mark.asyncio
async def test_a_config_switch_offers_memory_query_alone(
    tmp_path: Path, model: ScriptedModel
) -> None:
    world = World(_config(tmp_path, model, tools="query"))
    try:
        model.push("hi")
        await world.runtime.run_turn(TurnRequest("general", "s1", ALICE, "hello"))
    finally:
        await world.close()
    assert [tool["function"]["name"] for tool in model.requests[0]["tools"]] == ["memory_query"]


@pytest.mark.asyncio
async def test_the_allowlist_applies_whatever_the_request_says(world: World) -> None:
    asked = await world.query("planner", query="Lyon", categories=["profile"])
    filtered = await world.query("planner", query="Lyon", filters={"category": "profile"})
    unscoped = await world.query("planner", query="Alice")
    control = await world.query("general", query="Lyon", categories=["profile"])
    assert asked.startswith("error: agent 'planner' may not read memories in category 'profile'")
    assert filtered.startswith("error: agent 'planner' may not read")
    assert {r["category"] for r in unscoped} <= {"tasks", "general"}
    assert [r["id"] for r in control] == ["m-0000c003"]


@pytest.mark.asyncio
async def test_whose_memory_is_checked_and_bad_requests_say_what_is_wrong(world: World) -> None:
    other_person = await world.query("general", filters={"user_id": "@bob:example.org"})
    own = await world.query("general", filters={"user_id": ALICE}, categories=["profile"])
    other_agent = await world.query("general", agent="planner")
    unknown = await world.query("general", filters={"colour": "red"})
    bad = await world.query("general", top_k=0, **{"return": "everything"})
    assert other_person.startswith("error: memory_query: user_id must be the person")
    assert [r["id"] for r in own] == ["m-0000c003"]
    assert other_agent.startswith("error: memory_query: 'general' may query only its own")
    assert "filters.colour" in unknown
    assert "top_k" in bad
    assert "return" in bad


@pytest.mark.asyncio
async def test_procedural_steps_come_only_to_a_query_that_names_them(world: World) -> None:
    plain = await world.query("planner", query="passport renewal slot photos")
    steps = await world.query("planner", query="passport renewal", categories=["procedural"])
    tools = MemoryTools(world.memory("planner"), access=CategoryAccess.of(world.config, "planner"))
    searched = await tools.search_memories("passport renewal slot photos")
    assert "m-0000c004" not in {r["id"] for r in plain}
    assert [r["id"] for r in steps] == ["m-0000c004"]
    assert "book a slot" not in searched
    assert "no memories match" in searched or "m-0000c001" in searched


@pytest.mark.asyncio
async def test_full_records_carry_the_fields_and_soft_deleted_entries_never_come_back(
    world: World,
) -> None:
    records = await world.query("general", query="passport", top_k=10, **{"return": "full"})
    by_id = {r["id"]: r for r in records}
    assert "m-0000c005" not in by_id  # soft-deleted
    assert by_id["m-0000c001"]["importance"] == 5
    assert by_id["m-0000c001"]["type"] == "semantic"
    assert by_id["m-0000c001"]["path"] == "MEMORY.md"
    assert 0 <= by_id["m-0000c001"]["similarity"] < 1  # keyword-only: the BM25 score
    pinned = await world.query("general", filters={"pinned": True})
    assert [r["id"] for r in pinned] == ["m-0000c003"]


@pytest.mark.asyncio
async def test_top_k_threshold_and_budget_bound_the_answer(world: World) -> None:
    some = await world.query("general", query="passport Alice", top_k=2)
    none = await world.query("general", query="passport Alice", threshold=0.99)
    tiny = await world.query("general", query="passport Alice", top_k=5, budget_tokens=16)
    assert len(some) == 2
    assert none == []
    assert len(tiny) == 1
    assert len(json.dumps(tiny, ensure_ascii=False)) <= 16 * 4 + 4
    assert tiny[0]["text"].endswith("…")


@pytest.mark.asyncio
async def test_provenance_filters_follow_who_wrote_what_in_which_conversation(
    world: World,
) -> None:
    memory = world.memory("general")
    tools = MemoryTools(memory, access=CategoryAccess.of(world.config, "general"))
    with tool_turn("$e1|general", run="session-1"):
        await tools.add_memory("Alice booked a passport slot for Monday", category="tasks")
    memory.add_sync("Alice's passport photos are ready", actor="cli")
    in_run = await world.query("general", query="passport", filters={"run_id": "session-1"})
    by_cli = await world.query("general", query="passport", filters={"actor_id": "cli"})
    people = await world.query("general", query="passport", top_k=10, filters={"role": "user"})
    mindroom = await world.query("general", query="passport", filters={"role": "assistant"})
    assert [r["text"] for r in in_run] == ["[tasks] Alice booked a passport slot for Monday"]
    assert [r["text"] for r in by_cli] == ["[general] Alice's passport photos are ready"]
    assert {r["text"] for r in people} == {
        "[general] Alice's passport photos are ready",
        "[general] Alice wrote this passport note by hand",
    }
    assert [r["text"] for r in mindroom] == ["[tasks] Alice booked a passport slot for Monday"]


@pytest.mark.asyncio
async def test_without_a_query_the_newest_matching_entries_come_back(world: World) -> None:
    memory = world.memory("general")
    newest = memory.add_sync("Alice must call the embassy", actor="cli")
    records = await world.query("general", categories=["general"], top_k=1)
    assert [r["id"] for r in records] == [newest.id]


@pytest.mark.asyncio
async def test_procedural_memory_is_written_as_numbered_steps_only(world: World) -> None:
    tools = MemoryTools(world.memory("planner"), access=CategoryAccess.of(world.config, "planner"))
    prose = await tools.add_memory("Renewing a passport takes a while", category="procedural")
    steps = await tools.add_memory(
        "Renew a passport: 1. Book a slot 2. Bring two photos 3. Pay the fee",
        category="procedural",
    )
    assert prose.startswith("error: procedural memory is numbered steps")
    assert steps.startswith("remembered")
    found = await world.query(
        "planner", query="renew passport photos fee", categories=["procedural"]
    )
    assert "Renew a passport: 1. Book a slot" in " ".join(r["text"] for r in found)
