"""The mem0 backend in a turn: recall, tools, team reads and the flush worker.

Real mem0, a local Chroma and the local embedder, in a temporary storage root; the one stand-in
is the scripted model (chat turns and mem0's extraction prompt). No homeserver: these drive the
runtime, the registry and the flush worker directly, like ``test_team_flush.py``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.adapters.agno.runner import AgentRuntime, TeamSpec, TurnRequest
from mindroom.app.runlock import hold_run_lock, release_run_lock
from mindroom.cli.main import main
from mindroom.config import parse_config
from mindroom.config.schema import Config
from mindroom.memory.files.store import FileMemory
from mindroom.memory.flush.loop import FlushWorker
from mindroom.memory.mem0 import Mem0Memory
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.search.recall import agent_recall, recall_block
from tests.support.harness import config_text
from tests.support.scripted_model import Reply, ScriptedModel, last_user_text, system_text

ALICE = "@alice:localhost"
BOB = "@bob:localhost"
MEM0_MARK = "You are a Memory Extractor"
FILE_MARK = "You maintain the long-term memory"
FACTS = {
    "sister": "Has a sister called Maya",
    "brother": "Has a brother called Tom",
    "blue": "The user's favorite color is blue",
}


def is_mem0(request: dict) -> bool:
    return MEM0_MARK in system_text(request)


def new_messages(request: dict) -> str:
    said = last_user_text(request).split("## New Messages", 1)[-1]
    return said.split("## Observation Date", 1)[0]


def chat(request: dict) -> Reply | str:
    if is_mem0(request):
        found = [text for word, text in FACTS.items() if word in new_messages(request)]
        return json.dumps({"memory": [{"id": str(i), "text": t} for i, t in enumerate(found)]})
    if FILE_MARK in system_text(request):
        return "NO_REPLY"
    return "Noted."


def make_config(model: ScriptedModel, agents: dict[str, Any], **memory: Any) -> Config:
    teams = memory.pop("teams", {})
    settings = {"backend": "mem0", "auto_flush": {"enabled": False}, **memory}
    return parse_config(
        config_text(model.base_url, agents, memory=settings, teams=teams), "config.yaml"
    )


class World:
    """A registry, a runtime and a flush worker on one storage root."""

    def __init__(self, config: Config, storage: Path) -> None:
        self.config = config
        self.registry = MemoryRegistry(config, storage)
        self.runtime = AgentRuntime(config, storage / "mindroom_data", self.registry)
        self.flush = FlushWorker(config, self.runtime, self.registry, storage / "mindroom_data")

    def memory(self, agent: str, requester: str | None = None) -> Mem0Memory:
        memory = self.registry.for_agent(agent, requester)
        assert isinstance(memory, Mem0Memory)
        return memory

    async def close(self) -> None:
        await self.flush.aclose()
        await self.runtime.close()
        self.registry.close()


def open_world(config: Config, tmp_path: Path) -> World:
    return World(config, tmp_path)


# -- recall ------------------------------------------------------------------------------------


def test_mem0_recall_is_semantic_gated_labelled_and_capped(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config = make_config(model, {"general": {}})
    world = open_world(config, tmp_path)
    try:
        memory = world.memory("general")
        for text in ("Alice takes cello lessons every Thursday", "Bob is allergic to peanuts"):
            asyncio.run(memory.add(text, actor="test"))

        block = recall_block(config, memory, "which musical instrument is Alice learning?")
        assert block.startswith("<memory>")
        assert block.endswith("</memory>")
        assert "Alice takes cello lessons every Thursday" in block  # by meaning: no shared word
        # dated like a file entry, so "when" questions can be answered: the day it was stored
        assert f"({dt.date.today().isoformat()}) Alice takes cello lessons" in block
        assert "peanuts" not in block  # below the gate
        for chitchat in ("thanks!", "ok sounds good", "lol", "good morning"):
            assert recall_block(config, memory, chitchat) == "", chitchat
        team = recall_block(config, memory, "is Bob allergic to anything?", "team crew")
        assert "(team crew)" in team
        assert "Bob is allergic to peanuts" in team

        # agent_recall, which the runtime and `mindroom memory recall` both call, gives the same
        found, same = agent_recall(config, world.registry, "general", "does Bob have allergies?")
        assert found is memory
        assert same == recall_block(config, memory, "does Bob have allergies?")
        assert "Bob is allergic to peanuts" in same

        small = make_config(model, {"general": {}}, file={"recall_max_chars": 500})
        for n in range(20):
            asyncio.run(memory.add(f"Bob is allergic to peanuts, note {n}", actor="test"))
        capped = recall_block(small, memory, "is Bob allergic to peanuts?")
        assert 0 < len(capped) <= 500
        assert "peanuts" in capped
    finally:
        asyncio.run(world.close())


def test_memory_recall_cli_prints_the_block_of_a_mem0_agent(
    tmp_path: Path, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    text = config_text(model.base_url, {"general": {}}, memory={"backend": "mem0"})
    (tmp_path / "config.yaml").write_text(text)
    config = parse_config(text, "config.yaml")
    world = open_world(config, tmp_path)
    try:
        asyncio.run(world.memory("general").add("Alice prefers oolong tea", actor="test"))
        _, expected = agent_recall(config, world.registry, "general", "which tea does Alice like?")
    finally:
        asyncio.run(world.close())
    assert "Alice prefers oolong tea" in expected  # positive control

    config_path = str(tmp_path / "config.yaml")
    code = main(["memory", "recall", "--agent", "general", "which tea?", "--config", config_path])
    out, err = capsys.readouterr()
    assert code == 0, err
    code = main(
        ["memory", "recall", "--agent", "general", "which tea does Alice like?"]
        + ["--config", config_path]
    )
    out, err = capsys.readouterr()
    assert (code, out) == (0, expected + "\n"), err
    code = main(["memory", "recall", "--agent", "general", "thanks!", "--config", config_path])
    assert (code, capsys.readouterr().out) == (0, "")


# -- tools -------------------------------------------------------------------------------------


def test_memory_tools_work_on_mem0_and_memory_search_is_search_memories(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config = make_config(model, {"general": {}})
    world = open_world(config, tmp_path)

    async def use() -> None:
        tools = MemoryTools(world.memory("general"))
        added = await tools.add_memory("Alice prefers oolong tea")
        assert added.startswith("remembered [")
        entry_id = added.split("[", 1)[1].split("]", 1)[0]
        found = await tools.search_memories("what tea does Alice drink?", 3)
        assert "Alice prefers oolong tea" in found
        assert await tools.memory_search("what tea does Alice drink?", 3) == found
        assert "Alice prefers oolong tea" in await tools.list_memories()
        assert "Alice prefers oolong tea" in await tools.get_memory(entry_id)
        assert "Alice prefers oolong tea" in await tools.memory_get("MEMORY.md")
        updated = await tools.update_memory(entry_id, "Alice prefers jasmine tea")
        assert "jasmine" in updated
        assert "jasmine" in await tools.memory_search("which tea does Alice like?")
        assert "deleted" in await tools.delete_memory(entry_id)
        assert (await tools.get_memory(entry_id)).startswith("error:")

    try:
        asyncio.run(use())
    finally:
        asyncio.run(world.close())


def test_both_backends_offer_the_openclaw_names(tmp_path: Path, model: ScriptedModel) -> None:
    config = make_config(model, {"general": {}, "coder": {"memory_backend": "file"}})
    world = open_world(config, tmp_path)
    try:
        for agent, kind in (("general", Mem0Memory), ("coder", FileMemory)):
            memory = world.registry.for_agent(agent)
            assert isinstance(memory, kind)
            names = set(MemoryTools(memory).functions) | set(MemoryTools(memory).async_functions)
            assert {"memory_search", "memory_get", "search_memories", "add_memory"} <= names
    finally:
        asyncio.run(world.close())


# -- teams -------------------------------------------------------------------------------------


def leader_request(model: ScriptedModel) -> dict:
    """The last request the team leader made (it has the delegation tool)."""
    return [
        r
        for r in model.requests
        if any("delegate" in t["function"]["name"] for t in r.get("tools") or [])
    ][-1]


@pytest.mark.parametrize("reads", [False, True])
def test_a_team_reads_its_mem0_members_agent_scopes_only_when_asked(
    tmp_path: Path, model: ScriptedModel, reads: bool
) -> None:
    config = make_config(
        model,
        {"general": {}, "coder": {}},
        team_reads_member_memory=reads,
        teams={"crew": {"agents": ["general", "coder"]}},
    )
    model.set_handler(chat)
    world = open_world(config, tmp_path)

    async def turn() -> None:
        await world.memory("general").add("The user's editor is vim", actor="test")
        spec = TeamSpec.configured(config, "crew")
        result = await world.runtime.run_team_turn(
            spec, TurnRequest("general", "crew:room:t1", ALICE, "which editor do I use?")
        )
        assert result.ok, result.error

    try:
        asyncio.run(turn())
    finally:
        asyncio.run(world.close())
    assert ("The user's editor is vim" in system_text(leader_request(model))) is reads


def test_a_team_never_reads_a_private_members_root(tmp_path: Path, model: ScriptedModel) -> None:
    config = make_config(
        model,
        {"general": {}, "mind": {"private": {"per": "user"}}},
        team_reads_member_memory=True,
    )
    model.set_handler(chat)
    world = open_world(config, tmp_path)

    async def turn() -> None:
        await world.memory("general").add("The user's editor is vim", actor="test")
        await world.memory("mind", ALICE).add("The user's editor at home is emacs", actor="t")
        spec = TeamSpec.ad_hoc(config, ("general", "mind"))
        result = await world.runtime.run_team_turn(
            spec, TurnRequest("general", f"{spec.name}:room:t1", ALICE, "which editor do I use?")
        )
        assert result.ok, result.error

    try:
        asyncio.run(turn())
    finally:
        asyncio.run(world.close())
    leader = system_text(leader_request(model))
    assert "The user's editor is vim" in leader  # positive control: the agent scope is read
    assert "emacs" not in leader


# -- extraction --------------------------------------------------------------------------------


def test_a_mem0_turn_is_extracted_at_once_with_the_file_flush_off(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config = make_config(model, {"general": {}, "coder": {"memory_backend": "file"}})
    model.set_handler(chat)
    world = open_world(config, tmp_path)

    async def go() -> tuple[list, list, list, list[str]]:
        for agent in ("general", "coder"):
            request = TurnRequest(agent, f"{agent}:room:t1", ALICE, "my sister is called Maya")
            assert (await world.runtime.run_turn(request)).ok
            await world.flush.turn_finished(agent, f"{agent}:room:t1", None)
        entries = await world.flush.entries()
        # a compaction hands the file agent's session to its flush, which is off: it waits
        await world.flush.flush_now("coder", "coder:room:t1", None)
        results = await world.flush.cycle()  # not forced: idle_seconds is 120 by default
        after = [e for e in await world.flush.entries() if e.agent == "general"]
        coder = [e for e in await world.flush.entries() if e.agent == "coder"]
        assert [(e.dirty, e.cursor) for e in coder] == [(True, 0)]
        texts = [e.text for e in await world.memory("general").list()]
        return entries, results, after, texts

    try:
        entries, results, after, texts = asyncio.run(go())
    finally:
        asyncio.run(world.close())
    assert [e.agent for e in entries] == ["general"]  # the file agent's flush is off
    assert [r.written for r in results] == [(FACTS["sister"],)]
    assert [(e.dirty, e.cursor) for e in after] == [(False, 2)]
    assert texts == [FACTS["sister"]]
    assert sum(is_mem0(r) for r in model.requests) == 1
    assert not any(FILE_MARK in system_text(r) for r in model.requests)


def test_a_mem0_extraction_that_times_out_backs_off_and_keeps_the_chunk(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config = make_config(
        model,
        {"general": {}},
        auto_flush={"enabled": False, "extractor": {"max_extraction_seconds": 0.5}},
    )
    release = threading.Event()  # the stuck model call answers (nothing) once released

    def handler(request: dict) -> Reply | str:
        if is_mem0(request) and not release.is_set():
            release.wait(30)
            return json.dumps({"memory": []})
        return chat(request)

    model.set_handler(handler)
    world = open_world(config, tmp_path)

    async def go() -> list[str]:
        request = TurnRequest("general", "general:room:t1", ALICE, "my sister is called Maya")
        assert (await world.runtime.run_turn(request)).ok
        await world.flush.turn_finished("general", "general:room:t1", None)
        [failed] = await world.flush.cycle(force=True)
        assert failed.error == "timed out"
        assert (failed.entry.cursor, failed.entry.failures, failed.entry.dirty) == (0, 1, True)
        assert await world.memory("general").list() == []
        release.set()
        # the retries take the same chunk until one is stored (the timed-out call may still
        # be finishing in its thread meanwhile: mem0's own dedup keeps the fact once)
        for _ in range(40):
            [retried] = await world.flush.cycle(force=True)
            if not retried.entry.dirty:
                break
        assert (retried.entry.cursor, retried.entry.failures) == (2, 0)
        return [e.text for e in await world.memory("general").list()]

    try:
        texts = asyncio.run(go())
    finally:
        asyncio.run(world.close())
    assert texts == [FACTS["sister"]]


def test_two_people_in_one_mem0_team_session_each_get_only_their_own_facts(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config = make_config(model, {"general": {}, "mind": {"private": {"per": "user"}}})
    model.set_handler(chat)
    world = open_world(config, tmp_path)
    spec = TeamSpec.ad_hoc(config, ("general", "mind"))
    session = f"{spec.name}:room:t1"

    async def go() -> tuple[list[str], list[str]]:
        for person, text in ((ALICE, "my sister is called Maya"), (BOB, "my brother is Tom")):
            result = await world.runtime.run_team_turn(
                spec, TurnRequest("general", session, person, text)
            )
            assert result.ok, result.error
            await world.flush.turn_finished(spec.name, session, person, spec.members)
        await world.flush.cycle()
        alice = world.registry.for_team(list(spec.members), ALICE)
        bob = world.registry.for_team(list(spec.members), BOB)
        assert isinstance(alice, Mem0Memory)
        assert isinstance(bob, Mem0Memory)
        return [e.text for e in await alice.list()], [e.text for e in await bob.list()]

    try:
        alice_facts, bob_facts = asyncio.run(go())
    finally:
        asyncio.run(world.close())
    assert alice_facts == [FACTS["sister"]]  # bob's brother never reaches alice's memory
    assert bob_facts == [FACTS["brother"]]  # positive control: bob's own fact does land
    said = [new_messages(r) for r in model.requests if is_mem0(r)]
    assert len(said) == 2
    assert all(("sister" in s) != ("brother" in s) for s in said)


def test_curation_leaves_a_mem0_scope_alone(tmp_path: Path, model: ScriptedModel) -> None:
    config = make_config(
        model, {"general": {}}, auto_flush={"enabled": True, "curation": {"enabled": True}}
    )
    model.set_handler(chat)
    world = open_world(config, tmp_path)

    async def go() -> None:
        request = TurnRequest("general", "general:room:t1", ALICE, "my sister is called Maya")
        assert (await world.runtime.run_turn(request)).ok
        await world.flush.turn_finished("general", "general:room:t1", None)
        [result] = await world.flush.cycle(force=True)
        assert result.written == (FACTS["sister"],)

    try:
        asyncio.run(go())
    finally:
        asyncio.run(world.close())
    assert not any("You curate the long-term memory" in system_text(r) for r in model.requests)
    assert not (tmp_path / "agents" / "general" / "workspace" / "MEMORY.md").exists()


def test_the_flush_cli_beside_a_running_bot_leaves_mem0_sessions_to_it(
    tmp_path: Path, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    """mem0's local store takes one process's writes: `memory flush` from the CLI while the bot
    runs leaves the mem0 sessions (the bot extracts them itself); the file ones it flushes."""
    agents = {"general": {}, "coder": {"memory_backend": "file"}}
    text = config_text(model.base_url, agents, memory={"backend": "mem0"})
    (tmp_path / "config.yaml").write_text(text)
    config = parse_config(text, "config.yaml")
    model.set_handler(chat)
    world = open_world(config, tmp_path)

    async def talk() -> None:
        for agent in ("general", "coder"):
            request = TurnRequest(agent, f"{agent}:room:t1", ALICE, "my sister is called Maya")
            assert (await world.runtime.run_turn(request)).ok
            await world.flush.turn_finished(agent, f"{agent}:room:t1", None)

    try:
        asyncio.run(talk())
    finally:
        asyncio.run(world.close())
    flush = ["memory", "flush", "--config", str(tmp_path / "config.yaml")]
    data_dir = tmp_path / "mindroom_data"
    fd = hold_run_lock(data_dir)  # as `mindroom run` does
    try:
        assert main(flush) == 0
    finally:
        release_run_lock(fd)
    out = capsys.readouterr().out
    assert "coder coder:room:t1: 2 messages" in out  # the file session: flushed
    assert "1 mem0 sessions are left to the running bot" in out
    assert sum(is_mem0(r) for r in model.requests) == 0
    assert main(flush) == 0  # the control: with no bot running, the CLI extracts it
    assert "general general:room:t1: 2 messages, 1 new facts" in capsys.readouterr().out
    assert sum(is_mem0(r) for r in model.requests) == 1
