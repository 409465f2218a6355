"""The mem0 backend: real mem0, a real Chroma in tmp_path, the real local embedder, and the
scripted model answering mem0's extraction prompt (mem0 itself is never mocked)."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from mindroom.adapters.embeddings import Embedder
from mindroom.config import Config, parse_config
from mindroom.errors import MemoryStoreError
from mindroom.memory.files.store import FileMemory
from mindroom.memory.mem0 import Mem0Memory
from mindroom.memory.mem0.engine import (
    LlmSettings,
    Mem0Engine,
    close_engines,
    llm_settings,
    mem0_dir,
    mem0_engine,
)
from mindroom.memory.mem0.memory import entries_from_markdown
from mindroom.memory.registry import MemoryRegistry
from tests.support.scripted_model import (
    Reply,
    ScriptedModel,
    is_mem0_extraction,
    mem0_extraction,
    mem0_reply,
)

ALICE, BOB = "@alice:example.org", "@bob:example.org"


def _config(model_url: str, timeout: float = 10.0, llm: str = "") -> Config:
    """Agents ``helper`` (mem0), ``scribe`` (file), ``mind`` (private), team ``crew``;
    ``llm`` is a ``memory.llm`` in YAML flow style."""
    return parse_config(
        "models:\n"
        f"  default: {{id: scripted, base_url: '{model_url}', api_key: test,"
        f" timeout_seconds: {timeout}}}\n"
        f"memory: {{backend: mem0{', llm: ' + llm if llm else ''}}}\n"
        "agents:\n"
        "  helper: {}\n"
        "  scribe: {memory_backend: file}\n"
        "  mind: {private: {per: user}}\n"
        "teams:\n"
        "  crew: {agents: [helper, scribe]}\n",
        "test",
    )


@pytest.fixture
def storage(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path
    close_engines(mem0_dir(tmp_path))


@pytest.fixture
def engine(storage: Path, model: ScriptedModel, local_embedder: Embedder) -> Mem0Engine:
    return mem0_engine(_config(model.base_url), mem0_dir(storage), local_embedder)


def _scope(engine: Mem0Engine, storage: Path, scope_id: str) -> Mem0Memory:
    return Mem0Memory(engine, scope_id, storage / "state" / scope_id)


def test_add_search_list_get_update_delete_round_trip(engine: Mem0Engine, storage: Path) -> None:
    memory = _scope(engine, storage, "agent_helper")

    async def scenario() -> None:
        tea = await memory.add("Alice drinks green tea every morning", actor="test")
        bike = await memory.add("Bob rides his bike to work", actor="test")
        assert (await memory.get(tea.id)).text == "Alice drinks green tea every morning"
        assert [e.id for e in await memory.list()] == [bike.id, tea.id]  # newest first
        assert [e.id for e in await memory.list(limit=1)] == [bike.id]
        hits = await memory.search("what does Alice drink?", limit=2)
        assert hits[0].entry.id == tea.id
        updated = await memory.update(tea.id, "Alice drinks black coffee", actor="test")
        assert updated.text == (await memory.get(tea.id)).text == "Alice drinks black coffee"
        removed = await memory.delete(bike.id, actor="test")
        assert removed.text == "Bob rides his bike to work"
        assert [e.id for e in await memory.list()] == [tea.id]
        with pytest.raises(MemoryStoreError, match="no memory with id"):
            await memory.get(bike.id)

    asyncio.run(scenario())


def test_list_is_not_capped_at_mem0s_default_of_twenty(engine: Mem0Engine, storage: Path) -> None:
    memory = _scope(engine, storage, "agent_helper")
    for n in range(25):
        memory.add_sync(f"fact number {n}", actor="test")

    assert len(memory.list_sync(limit=100)) == 25
    assert memory.list_sync(limit=3)[0].text == "fact number 24"


def test_search_scores_are_cosines_and_the_related_memory_ranks_first(
    engine: Mem0Engine, storage: Path, local_embedder: Embedder
) -> None:
    memory = _scope(engine, storage, "agent_helper")
    texts = ["The cat sleeps on the sofa", "Quarterly taxes are due in April", "Paris is in France"]
    for text in texts:
        memory.add_sync(text, actor="test")

    hits = memory.search_sync("when must I pay my taxes?", limit=3)

    assert hits[0].entry.text == "Quarterly taxes are due in April"
    assert all(-1.0 <= h.score <= 1.0 for h in hits)
    vectors = local_embedder.embed(["when must I pay my taxes?", hits[0].entry.text])
    assert hits[0].score == pytest.approx(float(vectors[0] @ vectors[1]), abs=1e-3)
    assert hits[0].score > hits[-1].score


def test_two_scopes_never_see_each_others_memories_by_search_or_by_id(
    engine: Mem0Engine, storage: Path
) -> None:
    alice = _scope(engine, storage, "private:alice")
    bob = _scope(engine, storage, "private:bob")
    secret = alice.add_sync("Alice's door code is 4711", actor="test")
    bob.add_sync("Bob likes jazz", actor="test")

    assert [h.entry.text for h in bob.search_sync("door code", limit=5)] == ["Bob likes jazz"]
    assert [e.text for e in bob.list_sync()] == ["Bob likes jazz"]
    missing = "00000000-0000-4000-8000-000000000000"
    for attempt in (
        lambda i: bob.get_sync(i),
        lambda i: bob.update_sync(i, "hijacked", actor="bob"),
        lambda i: bob.delete_sync(i, actor="bob"),
        lambda i: bob.history_sync(i),
    ):
        with pytest.raises(MemoryStoreError) as theirs:
            attempt(secret.id)
        with pytest.raises(MemoryStoreError) as absent:
            attempt(missing)
        assert str(theirs.value) == str(absent.value).replace(missing, secret.id)
    # positive control: the memory is there, untouched, for its own scope
    assert alice.get_sync(secret.id).text == "Alice's door code is 4711"
    assert alice.search_sync("door code", limit=1)[0].entry.id == secret.id
    assert [r["event"] for r in alice.history_sync(secret.id)] == ["ADD"]


def test_extraction_stores_the_scripted_facts_and_an_empty_answer_stores_nothing(
    engine: Mem0Engine, storage: Path, model: ScriptedModel
) -> None:
    from mindroom.memory.extraction import ChatLine

    memory = _scope(engine, storage, "agent_helper")
    seen: list[str] = []

    def facts(new: str) -> list[str]:
        seen.append(new)
        return ["Alice is allergic to peanuts"] if "peanuts" in new else []

    model.set_handler(mem0_extraction(facts))

    nothing = memory.extract_sync(
        [ChatLine("user", "hello there", ALICE), ChatLine("assistant", "Hi!")]
    )
    stored = memory.extract_sync(
        [ChatLine("user", "I am allergic to peanuts", ALICE), ChatLine("assistant", "Noted.")]
    )

    assert nothing == []
    assert stored == ["Alice is allergic to peanuts"]  # positive control for the empty one
    assert [e.text for e in memory.list_sync()] == ["Alice is allergic to peanuts"]
    assert f"user: {ALICE}: I am allergic to peanuts" in seen[1]
    assert "assistant: Noted." in seen[1]
    assert sum(is_mem0_extraction(r) for r in model.requests) == 2


def test_extraction_with_the_model_failing_is_a_memory_error_without_retries(
    engine: Mem0Engine, storage: Path, model: ScriptedModel
) -> None:
    from mindroom.memory.extraction import ChatLine

    memory = _scope(engine, storage, "agent_helper")
    model.push(Reply(status=503))

    with pytest.raises(MemoryStoreError, match="extraction model failed"):
        memory.extract_sync([ChatLine("user", "remember that I like tea", ALICE)])

    assert len(model.requests) == 1  # no retry: the flush worker backs off instead
    assert memory.list_sync() == []


def test_a_hanging_model_fails_within_the_configured_timeout(
    storage: Path, model: ScriptedModel, local_embedder: Embedder
) -> None:
    from mindroom.memory.extraction import ChatLine

    engine = mem0_engine(_config(model.base_url, timeout=1.0), mem0_dir(storage), local_embedder)
    memory = _scope(engine, storage, "agent_helper")
    model.push(Reply(text="{}", delay=8))

    started = time.monotonic()
    with pytest.raises(MemoryStoreError):
        memory.extract_sync([ChatLine("user", "remember that I like tea", ALICE)])

    assert time.monotonic() - started < 6  # the 1 s timeout, not the SDK's 600 s


def test_closing_the_engine_waits_for_a_call_in_flight(
    engine: Mem0Engine, storage: Path, model: ScriptedModel
) -> None:
    """mem0 closes its SQLite connection without a lock: closed under a running extraction,
    the process crashed. Close waits for the call, then closes."""
    from mindroom.memory.extraction import ChatLine

    memory = _scope(engine, storage, "agent_helper")
    memory.add_sync("opened", actor="test")  # mem0 is open before the extraction starts
    answer = threading.Event()

    def slow(body: dict) -> str:
        answer.wait(30)
        return mem0_reply(["Alice likes tea"])

    model.set_handler(slow)
    stored: list[list[str]] = []
    extraction = threading.Thread(
        target=lambda: stored.append(memory.extract_sync([ChatLine("user", "I like tea", ALICE)]))
    )
    extraction.start()
    deadline = time.monotonic() + 30
    while not model.requests:  # the extraction is in its model call
        assert time.monotonic() < deadline
        time.sleep(0.01)
    closing = threading.Thread(target=engine.close)
    closing.start()
    closing.join(0.5)
    assert closing.is_alive()  # waiting for the call, not closing under it
    answer.set()
    extraction.join(30)
    closing.join(30)
    assert not closing.is_alive()  # the control: once the call is done, close ends
    assert stored == [["Alice likes tea"]]


def test_a_repeated_op_key_writes_once(engine: Mem0Engine, storage: Path) -> None:
    memory = _scope(engine, storage, "agent_helper")

    first = memory.add_sync("Alice plays chess", actor="test", op_key="k-add")
    again = memory.add_sync("Alice plays chess", actor="test", op_key="k-add")
    assert again == first
    assert len(memory.list_sync()) == 1
    other = memory.add_sync("Alice plays chess", actor="test", op_key="k-other")
    assert other.id != first.id  # positive control: a new key writes

    memory.update_sync(first.id, "Alice plays go", actor="test", op_key="k-up")
    memory.update_sync(first.id, "Alice plays go", actor="test", op_key="k-up")
    assert [r["event"] for r in memory.history_sync(first.id)] == ["ADD", "UPDATE"]

    gone = memory.delete_sync(first.id, actor="test", op_key="k-del")
    assert memory.delete_sync(first.id, actor="test", op_key="k-del") == gone
    with pytest.raises(MemoryStoreError, match="no memory with id"):
        memory.delete_sync(first.id, actor="test", op_key="k-del-2")


def test_an_add_done_before_a_crash_is_found_by_its_op_key(
    engine: Mem0Engine, storage: Path
) -> None:
    memory = _scope(engine, storage, "agent_helper")
    first = memory.add_sync("Alice plays chess", actor="test", op_key="k-add")
    (memory.state_dir / "mem0_ops.db").unlink()  # the record lost, the memory written

    assert memory.add_sync("Alice plays chess", actor="test", op_key="k-add") == first
    assert len(memory.list_sync()) == 1


def test_a_new_engine_on_the_same_folder_sees_the_memories(
    engine: Mem0Engine, storage: Path, local_embedder: Embedder
) -> None:
    memory = _scope(engine, storage, "agent_helper")
    kept = memory.add_sync("Alice's birthday is in May", actor="test")
    close_engines(mem0_dir(storage))

    reopened = Mem0Engine(mem0_dir(storage), local_embedder)
    try:
        after = _scope(reopened, storage, "agent_helper")
        assert [e.id for e in after.list_sync()] == [kept.id]
        assert after.search_sync("birthday", limit=1)[0].entry.id == kept.id
    finally:
        reopened.close()


def test_export_and_import_round_trip_and_import_skips_what_is_there(
    engine: Mem0Engine, storage: Path
) -> None:
    source = _scope(engine, storage, "agent_helper")
    texts = ["Alice likes tea", "A note:\n  indented line\n\nsecond paragraph", "Bob likes jazz"]
    for text in texts:
        source.add_sync(text, actor="test")

    document = source.export_markdown()
    assert document.startswith("# ")
    assert entries_from_markdown(document) == texts  # oldest first, exact texts

    target = _scope(engine, storage, "agent_other")
    target.add_sync("Bob   likes\njazz", actor="test")  # already there, whitespace aside
    added = target.import_entries(entries_from_markdown(document), actor="import")

    assert [e.text for e in added] == texts[:2]
    assert target.import_entries(entries_from_markdown(document), actor="import") == []
    assert sorted(e.text for e in target.list_sync()) == sorted([*texts[:2], "Bob   likes\njazz"])


def test_read_file_shows_numbered_lines_of_the_export(engine: Mem0Engine, storage: Path) -> None:
    memory = _scope(engine, storage, "agent_helper")
    entry = memory.add_sync("Alice likes tea", actor="test")

    shown = memory.read_file_sync("MEMORY.md")

    assert shown.startswith("MEMORY.md (lines 1-3 of 3):")
    assert f"    3  - Alice likes tea <!-- {entry.id} -->" in shown
    with pytest.raises(MemoryStoreError, match="keeps no files"):
        memory.read_file_sync("memory/2024-01-01.md")


def test_history_shows_only_this_scopes_changes(engine: Mem0Engine, storage: Path) -> None:
    mine = _scope(engine, storage, "agent_helper")
    theirs = _scope(engine, storage, "agent_other")
    entry = mine.add_sync("Alice likes tea", actor="test")
    mine.delete_sync(entry.id, actor="test")
    theirs.add_sync("Bob likes jazz", actor="test")

    assert [(r["memory_id"], r["event"]) for r in mine.history_sync()] == [
        (entry.id, "ADD"),
        (entry.id, "DELETE"),
    ]
    assert [r["event"] for r in mine.history_sync(entry.id)] == ["ADD", "DELETE"]  # deleted too


def test_mem0_embeds_with_mindroom_embedder_and_loads_no_model_of_its_own(
    engine: Mem0Engine, storage: Path, local_embedder: Embedder
) -> None:
    _scope(engine, storage, "agent_helper").add_sync("warm up", actor="test")

    adapter = engine.memory.embedding_model

    assert type(adapter).__name__ == "_EmbedderAdapter"
    assert adapter.embedder is local_embedder
    assert engine.collection.startswith("mindroom_all_minilm_l6_v2_")


def test_without_an_embedder_mem0_fails_with_the_fix(storage: Path) -> None:
    memory = _scope(Mem0Engine(mem0_dir(storage), None), storage, "agent_helper")

    with pytest.raises(MemoryStoreError, match=r"mindroom\[embeddings\]"):
        memory.add_sync("anything", actor="test")


def test_the_registry_hands_out_mem0_scopes_with_the_file_backends_ids(
    storage: Path, model: ScriptedModel, local_embedder: Embedder
) -> None:
    registry = MemoryRegistry(_config(model.base_url), storage)
    try:
        helper = registry.for_agent("helper")
        assert isinstance(helper, Mem0Memory)
        assert helper.scope_id == "agent_helper"
        assert isinstance(registry.for_agent("scribe"), FileMemory)  # the per-agent override
        team = registry.for_team(["scribe", "helper"])
        assert isinstance(team, Mem0Memory)
        assert team.scope_id == "team_helper+scribe"
        assert registry.for_agent("mind") is None  # private without a requester

        alice = registry.for_agent("mind", ALICE)
        bob = registry.for_agent("mind", BOB)
        assert isinstance(alice, Mem0Memory)
        assert isinstance(bob, Mem0Memory)
        assert alice.scope_id.startswith("private:")
        assert alice.scope_id != bob.scope_id
        instance = registry.private_instance("mind", ALICE)
        assert instance is not None
        assert instance.memory_root.is_dir()
        assert not (instance.memory_root / "MEMORY.md").exists()  # file memory not active

        alice.add_sync("Alice's secret: she hums in elevators", actor="test")
        assert bob.search_sync("secret", limit=5) == []
        assert registry.for_agent("helper") is helper  # one object per scope
    finally:
        registry.close()


def test_the_extraction_model_comes_from_memory_llm_else_the_default_model() -> None:
    url = "http://127.0.0.1:1/v1"
    assert llm_settings(_config(url, timeout=7)) == LlmSettings(
        "openai", "scripted", url, "test", 7.0, None
    )
    ollama = _config(
        url,
        llm="{provider: ollama, config: {model: llama3.2, host: 'http://gpu:11434/',"
        " timeout_seconds: 3}}",
    )
    assert llm_settings(ollama) == LlmSettings(
        "openai", "llama3.2", "http://gpu:11434/v1", "ollama", 3.0, None
    )
    nameless = parse_config("memory: {backend: mem0}\n", "test")
    with pytest.raises(MemoryStoreError, match=r"memory\.llm is unset and defaults\.model"):
        llm_settings(nameless)


def test_openrouter_in_the_environment_does_not_redirect_extraction(
    engine: Mem0Engine, storage: Path, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mindroom.memory.extraction import ChatLine

    monkeypatch.setenv("OPENROUTER_API_KEY", "sk-or-not-ours")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    model.set_handler(mem0_extraction(lambda new: ["Alice likes tea"]))

    stored = _scope(engine, storage, "agent_helper").extract_sync(
        [ChatLine("user", "I like tea", ALICE)]
    )

    assert stored == ["Alice likes tea"]
    assert sum(is_mem0_extraction(r) for r in model.requests) == 1


def test_an_anthropic_extraction_model_without_its_package_names_the_extra(
    storage: Path, model: ScriptedModel, local_embedder: Embedder
) -> None:
    from mindroom.memory.extraction import ChatLine

    pytest.importorskip("mem0")
    if importlib.util.find_spec("anthropic") is not None:
        pytest.skip("the anthropic package is installed here")
    config = _config(model.base_url, llm="{provider: anthropic, config: {model: claude-x}}")
    memory = _scope(mem0_engine(config, mem0_dir(storage), local_embedder), storage, "agent_a")

    with pytest.raises(MemoryStoreError, match=r"pip install 'mindroom\[anthropic\]'"):
        memory.extract_sync([ChatLine("user", "I like tea", ALICE)])
    assert memory.add_sync("adding needs no model", actor="test").text  # only extraction does


def test_without_the_mem0_package_the_error_names_the_extra(
    storage: Path, local_embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "mem0", None)  # import mem0 -> ImportError
    memory = _scope(Mem0Engine(mem0_dir(storage), local_embedder), storage, "agent_helper")

    with pytest.raises(MemoryStoreError, match=r"pip install 'mindroom\[mem0\]'"):
        memory.list_sync()


def test_concurrent_extractions_of_one_fact_in_one_scope_store_it_once(
    engine: Mem0Engine, storage: Path, model: ScriptedModel
) -> None:
    from mindroom.memory.extraction import ChatLine

    memory = _scope(engine, storage, "agent_helper")
    model.set_handler(mem0_extraction(lambda new: ["Alice likes tea"]))
    lines = [ChatLine("user", "I like tea", ALICE)]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: memory.extract_sync(lines), range(8)))

    assert sorted(results) == [[]] * 7 + [["Alice likes tea"]]  # mem0's dedup saw the first
    assert [e.text for e in memory.list_sync()] == ["Alice likes tea"]
