"""Consent on every write path of the mem0 backend: a sensitive fact written to a
mem0 scope by a tool's add or update, mem0's own extraction (the flush), an import, the CLI,
a dashboard or ``/me`` edit waits as a proposal for the person it is about, in the scope's
state folder, and confirming it writes it through mem0. Real mem0, a real Chroma in
``tmp_path``, the real local embedder, the scripted model as mem0's extraction model."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.adapters.embeddings import Embedder
from mindroom.cli.main import main
from mindroom.config import Config, parse_config
from mindroom.errors import MemoryStoreError
from mindroom.memory.extraction import ChatLine
from mindroom.memory.mem0 import Mem0Memory
from mindroom.memory.mem0.engine import Mem0Engine, close_engines, mem0_dir, mem0_engine
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.consent import (
    ConsentPending,
    ConsentQueue,
    Person,
    Proposal,
    WriteConsent,
)
from mindroom.memory.policy.consent_chat import memory_command
from mindroom.memory.policy.view import AgentView
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.tools import tool_turn
from tests.support.scripted_model import ScriptedModel, mem0_extraction

ALICE, BOB = "@alice:example.org", "@bob:example.org"
PEOPLE = (Person(BOB, "Bob"), Person(ALICE, "Alice"))
REPO = Path(__file__).resolve().parents[2]


def _config(model_url: str) -> Config:
    """Agent ``helper`` (a shared mem0 scope) and ``mind`` (private: a mem0 scope per person)."""
    return parse_config(
        "models:\n"
        f"  default: {{id: scripted, base_url: '{model_url}', api_key: test}}\n"
        "memory: {backend: mem0}\n"
        "agents:\n"
        "  helper: {}\n"
        "  mind: {private: {per: user}}\n",
        "test",
    )


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    close_engines(mem0_dir(tmp_path))


@pytest.fixture
def engine(storage: Path, model: ScriptedModel, local_embedder: Embedder) -> Mem0Engine:
    return mem0_engine(_config(model.base_url), mem0_dir(storage), local_embedder)


@pytest.fixture
def memory(engine: Mem0Engine, storage: Path) -> Mem0Memory:
    return Mem0Memory(engine, "agent_helper", storage / "state" / "agent_helper")


def _texts(memory: Mem0Memory) -> list[str]:
    return sorted(e.text for e in memory.list_sync(100))


def _queue(memory: Mem0Memory) -> ConsentQueue:
    return ConsentQueue(memory)


def _pending(memory: Mem0Memory) -> list[Proposal]:
    queue = _queue(memory)
    try:
        return queue.pending()
    finally:
        queue.close()


def _confirm(memory: Mem0Memory, proposal: Proposal, user: str) -> None:
    queue = _queue(memory)
    try:
        queue.decide(proposal.id, confirm=True, actor="chat", user_id=user)
    finally:
        queue.close()


def _stored_bytes(storage: Path) -> bytes:
    """Every byte mem0 keeps (its Chroma, its history database, their WAL files)."""
    return b"".join(p.read_bytes() for p in mem0_dir(storage).rglob("*") if p.is_file())


def test_a_tools_sensitive_add_or_update_in_a_mem0_scope_waits_for_its_subject(
    memory: Mem0Memory,
) -> None:
    tools = MemoryTools(memory)
    with tool_turn("$e1|helper", run="s1", user=BOB, people=PEOPLE):
        tea = asyncio.run(tools.add_memory("Alice likes green tea"))
        city = asyncio.run(tools.add_memory("Alice lives in Lyon"))
        tea_id = tea.split("[")[1].split("]")[0]
        updated = asyncio.run(tools.update_memory(tea_id, "Alice lives in Lyon, rue X 12"))

    assert tea.startswith("remembered")  # control: an ordinary fact is written at once
    assert city.startswith("not stored yet: city is a personal detail")
    assert updated.startswith("not stored yet: city is a personal detail")
    assert _texts(memory) == ["Alice likes green tea"]  # neither the add nor the update
    assert memory.get_sync(tea_id).text == "Alice likes green tea"
    add, update = _pending(memory)
    assert (add.user_id, add.replaces, add.text) == (ALICE, None, "Alice lives in Lyon")
    assert (update.user_id, update.replaces) == (ALICE, tea_id)  # Alice's, though Bob spoke

    with pytest.raises(MemoryStoreError, match="no proposal"):
        _confirm(memory, update, BOB)  # Bob cannot confirm Alice's city
    assert memory.get_sync(tea_id).text == "Alice likes green tea"

    _confirm(memory, update, ALICE)
    _confirm(memory, add, ALICE)
    assert memory.get_sync(tea_id).text == "Alice lives in Lyon, rue X 12"  # the update, in mem0
    assert _texts(memory) == ["Alice lives in Lyon", "Alice lives in Lyon, rue X 12"]
    assert _pending(memory) == []


def test_mem0s_extraction_is_checked_on_the_text_its_model_wrote_before_it_is_stored(
    memory: Mem0Memory, model: ScriptedModel, storage: Path
) -> None:
    # the chat never names the city: mem0's model writes it, and that text is what is judged
    def facts(new: str) -> list[str]:
        if "peanuts" in new:
            return ["Alice is allergic to peanuts", "Alice lives in Lyon"]
        return ["Alice moved to Paris"] if "moving" in new else []

    model.set_handler(mem0_extraction(facts))
    consent = WriteConsent.model(ALICE, PEOPLE)

    stored = memory.extract_sync(
        [ChatLine("user", "I am allergic to peanuts, by the way", ALICE)], consent=consent
    )
    only_held = memory.extract_sync(
        [ChatLine("user", "I am moving next month", ALICE)], consent=consent
    )

    assert stored == ["Alice is allergic to peanuts"]  # control: the benign fact, at once
    assert only_held == []  # everything extracted waits: no error, nothing stored
    assert _texts(memory) == ["Alice is allergic to peanuts"]
    assert [(p.text, p.user_id) for p in _pending(memory)] == [
        ("Alice lives in Lyon", ALICE),
        ("Alice moved to Paris", ALICE),
    ]
    kept = _stored_bytes(storage)
    assert b"allergic to peanuts" in kept  # control: the byte search sees what mem0 stores
    assert b"Lyon" not in kept
    assert b"Paris" not in kept


def test_a_mem0_write_that_states_no_consent_gate_is_refused(
    engine: Mem0Engine, memory: Mem0Memory
) -> None:
    assert memory.add_sync("The garage door sticks", actor="cli").text  # control: gated
    with pytest.raises(MemoryStoreError, match="consent gate"):
        engine.add("agent_helper", "The garden gate squeaks", {})  # straight to the engine
    assert _texts(memory) == ["The garage door sticks"]


def test_a_dashboard_edit_waits_but_a_persons_own_me_edit_of_their_private_mem0_is_written(
    model: ScriptedModel, storage: Path, local_embedder: Embedder
) -> None:
    config = _config(model.base_url)
    registry = MemoryRegistry(config, storage, storage)
    try:
        mine = registry.for_agent("mind", ALICE)
        assert isinstance(mine, Mem0Memory)
        view = AgentView(mine, CategoryAccess.of(config, "mind"))
        entry = view.add_sync("Likes green tea", actor="me", consent=WriteConsent.person(ALICE))
        with pytest.raises(ConsentPending):  # an operator's edit is not Alice's consent
            view.update_sync(
                entry.id, "Lives in Lyon", actor="dashboard", consent=WriteConsent.operator()
            )
        assert mine.get_sync(entry.id).text == "Likes green tea"
        (proposal,) = _pending(mine)
        assert proposal.replaces == entry.id

        view.update_sync(entry.id, "Lives in Lyon", actor="me", consent=WriteConsent.person(ALICE))
        assert mine.get_sync(entry.id).text == "Lives in Lyon"  # her own word: written at once
    finally:
        registry.close()


def test_memory_pending_and_confirm_in_chat_reach_a_private_mem0_scope(
    model: ScriptedModel, storage: Path, local_embedder: Embedder
) -> None:
    config = _config(model.base_url)
    registry = MemoryRegistry(config, storage, storage)
    try:
        mine = registry.for_agent("mind", ALICE)
        assert isinstance(mine, Mem0Memory)
        tools = MemoryTools(mine)
        with tool_turn("$e2|mind", run="s2", user=ALICE, people=PEOPLE):
            tea = asyncio.run(tools.add_memory("I like green tea"))
            city = asyncio.run(tools.add_memory("I moved to Lyon"))
        assert tea.startswith("remembered")  # control
        assert city.startswith("not stored yet")
        (proposal,) = _pending(mine)

        listed = memory_command(config, registry, ["mind"], ALICE, "pending", in_dm=True)
        assert proposal.id in listed
        assert "I moved to Lyon" in listed
        bobs = memory_command(config, registry, ["mind"], BOB, f"confirm {proposal.id}")
        assert bobs.startswith("No proposal")  # not Bob's to answer (nor to see)
        said = memory_command(config, registry, ["mind"], ALICE, f"confirm {proposal.id}")
        assert said.startswith("Stored")
        assert _texts(mine) == ["I like green tea", "I moved to Lyon"]
    finally:
        registry.close()


AGENTS = """\
agents:
  keeper:
    display_name: Keeper
    role: Remembers with mem0.
    memory_backend: mem0
"""


def test_an_import_into_mem0_holds_a_sensitive_memory_and_the_cli_confirms_it(
    tmp_path: Path, local_embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    text = (REPO / "config.yaml").read_text(encoding="utf-8")
    config.write_text(text.replace("\nagents:\n", "\n" + AGENTS, 1), encoding="utf-8")
    shutil.copytree(REPO / "mind_template", tmp_path / "mind_template")
    source = tmp_path / "in.md"
    source.write_text("- The garage door sticks in winter\n- Alice lives in Lyon\n")

    def cli(action: str, *args: str) -> str:
        code = main(["memory", action, "--config", str(config), "--agent", "keeper", *args])
        out, _ = capsys.readouterr()
        assert code == 0, out
        return out

    try:
        imported = cli("import", str(source))
        assert "imported 1 memories" in imported
        listed = cli("list")
        assert "garage door" in listed  # control: the ordinary memory is written at once
        assert "Lyon" not in listed
        (line,) = cli("proposals").splitlines()
        assert "Alice lives in Lyon" in line
        confirmed = cli("confirm", line.split()[0])
        assert confirmed.startswith(f"confirmed {line.split()[0]}")
        assert "Alice lives in Lyon" in cli("list")
    finally:
        close_engines(mem0_dir(tmp_path))


def test_forget_me_erases_the_proposals_about_the_person_in_a_shared_mem0_scope(
    model: ScriptedModel, storage: Path, local_embedder: Embedder
) -> None:
    from mindroom.people.data import export_person, forget_person

    config = _config(model.base_url)
    registry = MemoryRegistry(config, storage, storage)
    try:
        helper = registry.for_agent("helper")
        assert isinstance(helper, Mem0Memory)
        tools = MemoryTools(helper)
        with tool_turn("$e3|helper", run="s3", user=BOB, people=PEOPLE):
            assert asyncio.run(tools.add_memory("Alice lives in Lyon")).startswith("not stored")
            assert asyncio.run(tools.add_memory("Bob moved to Paris")).startswith("not stored")
        assert sorted(p.user_id or "" for p in _pending(helper)) == [ALICE, BOB]

        exported = repr(export_person(config, storage, registry, ALICE)["stores"]["mem0_shared"])
        assert "Alice lives in Lyon" in exported
        assert "Paris" not in exported
        forget_person(config, storage, registry, ALICE)
    finally:
        registry.close()

    everything = b"".join(p.read_bytes() for p in storage.rglob("*") if p.is_file())
    assert b"Bob moved to Paris" in everything  # control: Bob's proposal is still there
    assert b"Lyon" not in everything  # Alice's is gone, from every file and its WAL
    assert [p.user_id for p in _pending(helper)] == [BOB]


def test_the_flush_of_a_mem0_turn_stores_the_benign_fact_and_holds_the_sensitive_one(
    tmp_path: Path, model: ScriptedModel
) -> None:
    from mindroom.adapters.agno.runner import TurnRequest
    from tests.integration.test_mem0_turns import is_mem0, make_config, new_messages, open_world

    alice = "@alice:localhost"

    def chat(request: dict) -> str:
        if is_mem0(request):
            said = new_messages(request)
            found = ["Has a sister called Maya", "Alice moved to Lyon"] if "Maya" in said else []
            return json.dumps({"memory": [{"id": str(i), "text": t} for i, t in enumerate(found)]})
        return "Noted."

    config = make_config(model, {"general": {}})
    model.set_handler(chat)
    world = open_world(config, tmp_path)

    async def go() -> tuple[list, list[str], Mem0Memory]:
        request = TurnRequest("general", "general:room:t1", alice, "my sister is Maya; I moved")
        assert (await world.runtime.run_turn(request)).ok
        await world.flush.turn_finished("general", "general:room:t1", None)
        results = await world.flush.cycle()
        memory = world.memory("general")
        return results, _texts(memory), memory

    try:
        results, texts, memory = asyncio.run(go())
    finally:
        asyncio.run(world.close())
    assert [r.written for r in results] == [("Has a sister called Maya",)]  # control
    assert texts == ["Has a sister called Maya"]  # the city mem0's model wrote waits
    pending = _pending(memory)  # its proposals live in its state folder
    assert [(p.text, p.user_id) for p in pending] == [("Alice moved to Lyon", alice)]
