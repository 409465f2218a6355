"""Consent on every write path: the store checks the text a write adds, whatever
path it comes by (a tool's add or update, the flush, a consolidation synthesis, an import,
the CLI); a sensitive fact waits as a proposal that belongs to the person it is about, and
only they (or an admin) may answer it. Real files, real SQLite, the scripted model as judge."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.cli.memory_transfer import import_scope
from mindroom.config import load_config
from mindroom.errors import MemoryStoreError
from mindroom.memory.extraction import ChatLine
from mindroom.memory.files.facts import chunk_people, store_facts
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.consolidate.run import consolidate_memory
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.consent import ConsentQueue, Person, Proposal, WriteConsent
from mindroom.memory.policy.view import AgentView
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.tools import tool_turn
from tests.integration.test_consolidation_pass import NOW, config, judge_for, write
from tests.support.harness import repo_config
from tests.support.scripted_judge import judge_handler
from tests.support.scripted_model import ScriptedModel

ALICE = "@alice:example.org"
BOB = "@bob:example.org"
ADMIN = "@root:example.org"
PEOPLE = (Person(BOB, "Bob"), Person(ALICE, "Alice"))


def _texts(memory: FileMemory) -> list[str]:
    return [e.text for e in memory.list_sync(100)]


def _pending(memory: FileMemory) -> list[Proposal]:
    queue = ConsentQueue(memory)
    try:
        return queue.pending()
    finally:
        queue.close()


def _decide(memory: FileMemory, proposal: Proposal, user: str | None) -> None:
    queue = ConsentQueue(memory)
    try:
        queue.decide(proposal.id, confirm=True, actor="chat", user_id=user, admins=[ADMIN])
    finally:
        queue.close()


def test_updating_an_ordinary_entry_to_a_sensitive_text_waits_and_confirming_replaces_it(
    file_memory: FileMemory,
) -> None:
    tools = MemoryTools(file_memory)
    with tool_turn("$e1|general", run="s1", user=ALICE, people=PEOPLE):
        added = asyncio.run(tools.add_memory("Alice likes green tea"))
        entry_id = added.split("[")[1].split("]")[0]
        updated = asyncio.run(tools.update_memory(entry_id, "Alice lives in Lyon, rue X 12"))

    assert added.startswith("remembered")  # control: an ordinary fact is written at once
    assert updated.startswith("not stored yet: city is a personal detail")
    assert _texts(file_memory) == ["Alice likes green tea"]  # the update waits
    (proposal,) = _pending(file_memory)
    assert (proposal.user_id, proposal.replaces) == (ALICE, entry_id)

    _decide(file_memory, proposal, ALICE)
    assert _texts(file_memory) == ["Alice lives in Lyon, rue X 12"]  # the update, as meant
    assert file_memory.find(entry_id).text == "Alice lives in Lyon, rue X 12"


def test_a_fact_bob_told_about_alice_is_alices_to_confirm_not_bobs(
    file_memory: FileMemory,
) -> None:
    tools = MemoryTools(file_memory)
    with tool_turn("$e2|general", run="s1", user=BOB, people=PEOPLE):
        about_alice = asyncio.run(tools.add_memory("Alice lives in Lyon"))
        about_bob = asyncio.run(tools.add_memory("I moved to Porto last year"))

    assert f"waits for {ALICE} to confirm" in about_alice
    assert f"waits for {BOB} to confirm" in about_bob  # first person: the speaker's
    alice_city, bob_city = _pending(file_memory)
    assert (alice_city.user_id, bob_city.user_id) == (ALICE, BOB)
    queue = ConsentQueue(file_memory)
    try:
        assert [p.id for p in queue.waiting_for(BOB)] == [bob_city.id]
        assert [p.id for p in queue.waiting_for(ALICE)] == [alice_city.id]
    finally:
        queue.close()
    with pytest.raises(MemoryStoreError, match="no proposal"):
        _decide(file_memory, alice_city, BOB)
    assert _texts(file_memory) == []
    _decide(file_memory, alice_city, ALICE)
    assert _texts(file_memory) == ["Alice lives in Lyon"]


def test_a_fact_about_nobody_known_waits_for_an_admin(file_memory: FileMemory) -> None:
    tools = MemoryTools(file_memory)
    with tool_turn("$e3|general", run="s1", user=BOB, people=PEOPLE):
        answer = asyncio.run(tools.add_memory("Carol lives in Paris"))

    assert "waits for an admin" in answer
    (proposal,) = _pending(file_memory)
    assert proposal.user_id is None
    with pytest.raises(MemoryStoreError, match="no proposal"):
        _decide(file_memory, proposal, BOB)  # the speaker is not whom it is about
    assert _texts(file_memory) == []
    _decide(file_memory, proposal, ADMIN)
    assert _texts(file_memory) == ["Carol lives in Paris"]


def test_the_flush_files_a_fact_bob_said_about_alice_as_alices(file_memory: FileMemory) -> None:
    chunk = [
        ChatLine("user", "Bob (@bob:example.org): Alice moved to Lyon, and I like tea", BOB),
        ChatLine("user", "Alice (@alice:example.org): hi all", ALICE),
    ]
    view = AgentView(file_memory, CategoryAccess.everything())
    written, _ = store_facts(
        view,
        ["Alice moved to Lyon", "Bob likes tea"],
        turns=3,
        daily_cap=60,
        run="s1",
        path="memory/2026-11-25.md",
        user_id=BOB,
        people=chunk_people(chunk),
    )

    assert written == ["Bob likes tea"]  # control: the ordinary fact is written
    (proposal,) = _pending(file_memory)
    assert (proposal.text, proposal.user_id) == ("Alice moved to Lyon", ALICE)


def test_a_consolidation_synthesis_that_adds_a_sensitive_detail_waits_for_consent(
    file_memory: FileMemory, model: ScriptedModel
) -> None:
    (tea,) = write(file_memory, "memory/2026-11-01.md", "Alice likes tea")
    (prefers,) = write(file_memory, "memory/2026-11-02.md", "alice prefers tea")
    synthesis = "Alice likes tea and lives in Lyon"
    model.set_handler(
        judge_handler(
            {("Alice likes tea", "alice prefers tea"): {"verdict": "same", "merged": synthesis}}
        )
    )
    cfg = config(model.base_url, promotion_confidence=1.0)

    report = consolidate_memory(file_memory, cfg, judge_for(cfg), NOW)

    live = {e.id: e.text for e in file_memory.list_sync(100)}
    assert synthesis not in live.values()
    assert {tea, prefers} <= set(live)  # both stay as they were
    (proposal,) = _pending(file_memory)
    assert proposal.text == synthesis
    assert report.held == [proposal.id]
    assert report.merged == []


def test_an_import_of_a_sensitive_memory_waits_for_consent(
    file_memory: FileMemory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "in.md"
    source.write_text("- Alice likes green tea\n- Alice's pronouns are she/her\n")

    import_scope(file_memory, source)

    assert _texts(file_memory) == ["Alice likes green tea"]  # control: written at once
    (proposal,) = _pending(file_memory)
    assert (proposal.field, proposal.user_id) == ("pronouns", None)  # an operator names nobody
    printed = capsys.readouterr().out
    assert "imported 1 memories" in printed
    assert proposal.id in printed


@pytest.fixture
def alices_memory(tmp_path: Path) -> Iterator[FileMemory]:
    """Alice's private memory of the companion ``mind``."""
    registry = MemoryRegistry(load_config(repo_config(tmp_path)), tmp_path, tmp_path)
    memory = registry.for_agent("mind", ALICE)
    assert isinstance(memory, FileMemory)
    yield memory
    registry.close()


def test_an_operators_edit_of_a_persons_sensitive_fact_waits_but_their_own_is_written(
    alices_memory: FileMemory,
) -> None:
    tea = alices_memory.add_sync("Alice likes green tea", actor="test")
    jam = alices_memory.add_sync("Alice likes jam", actor="test")
    view = AgentView(alices_memory, CategoryAccess.everything())

    with pytest.raises(MemoryStoreError, match="not stored yet"):
        view.update_sync(tea.id, "Alice lives in Lyon", actor="dashboard")  # an operator
    with pytest.raises(MemoryStoreError, match="not stored yet"):
        view.update_sync(
            tea.id, "Alice lives in Lyon", actor="person", consent=WriteConsent.person(BOB)
        )  # Bob on /me is not Alice
    assert "Alice lives in Lyon" not in _texts(alices_memory)
    view.update_sync(
        jam.id, "Alice moved to Porto", actor="person", consent=WriteConsent.person(ALICE)
    )  # Alice on her own /me: her consent
    assert "Alice moved to Porto" in _texts(alices_memory)

    proposals = _pending(alices_memory)
    assert {p.text for p in proposals} == {"Alice lives in Lyon"}
    queue = ConsentQueue(alices_memory)
    try:  # in a private scope its person decides, whoever made the proposal
        assert all(queue.may_answer(p, ALICE, []) for p in proposals)
        assert not any(queue.may_answer(p, BOB, []) for p in proposals)
    finally:
        queue.close()


def test_a_write_path_that_states_no_consent_cannot_skip_the_check(
    file_memory: FileMemory,
) -> None:
    """A new write path (here the bare file write every path ends in) states no consent: the
    store judges it as having none."""

    def append(document: str) -> str:
        return document + "- Alice's native language is Portuguese\n- The bus leaves at 8\n"

    with pytest.raises(MemoryStoreError, match="not stored yet: language"):
        file_memory.write("MEMORY.md", append, None)
    assert not file_memory.scope.entrypoint.exists()  # nothing of that write, not even a part
    file_memory.write("MEMORY.md", lambda doc: doc + "- The bus leaves at 8\n", None)
    assert _texts(file_memory) == ["The bus leaves at 8"]  # control: an ordinary write
    (proposal,) = _pending(file_memory)
    assert proposal.text == "Alice's native language is Portuguese"
