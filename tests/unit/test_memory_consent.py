"""Consent: sensitive changes wait for the person (confirm, reject, or expire in 7 days), benign
ones for a second signal; the audit records each decision; nobody decides for someone else."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mindroom.errors import MemoryStoreError
from mindroom.memory.files.facts import store_facts
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.consent import ConsentQueue, classify
from mindroom.memory.policy.view import AgentView

ALICE = "@alice:example.org"
BOB = "@bob:example.org"
DAILY = "memory/2026-11-25.md"


@pytest.fixture
def memory(file_memory: FileMemory) -> FileMemory:
    return file_memory


def _texts(memory: FileMemory) -> list[str]:
    return [e.text for e in memory.list_sync(100)]


def _flush(memory: FileMemory, *lines: str, user: str = ALICE) -> list[str]:
    view = AgentView(memory, CategoryAccess.everything())
    written, _ = store_facts(
        view, list(lines), turns=3, daily_cap=60, run="s1", path=DAILY, user_id=user
    )
    return written


def test_sensitive_and_benign_fields_are_recognised() -> None:
    none = EntryFields()
    assert classify("Alice prefers to be called Ali", none) == ("sensitive", "preferred_name")
    assert classify("Alice's pronouns are she/her", none) == ("sensitive", "pronouns")
    assert classify("Alice moved to Lyon in March", none) == ("sensitive", "city")
    # first person, as people say it (and as the model often writes it down)
    assert classify("I live in Lyon now", none) == ("sensitive", "city")
    assert classify("We are moving to Porto in May", none) == ("sensitive", "city")
    assert classify("Stand-up moved to 10:00", none) is None  # a time, not a place
    assert classify("Alice's native language is Portuguese", none) == ("sensitive", "language")
    assert classify("Alice likes short answers", none) == ("benign", "tone")
    assert classify("Alice wants to run a marathon", EntryFields(category="goals")) == (
        "benign",
        "goals",
    )
    assert classify("Alice likes green tea", none) is None


def test_a_sensitive_fact_from_the_flush_waits_for_the_persons_confirmation(
    memory: FileMemory,
) -> None:
    written = _flush(memory, "Alice moved to Lyon in March", "Alice likes green tea")
    assert written == ["Alice likes green tea"]  # control: an ordinary fact is written at once
    assert "Alice moved to Lyon in March" not in _texts(memory)
    queue = ConsentQueue(memory)
    try:
        (proposal,) = queue.pending(ALICE)
        assert (proposal.field, proposal.kind, proposal.user_id) == ("city", "sensitive", ALICE)
        with pytest.raises(MemoryStoreError, match="no proposal"):
            queue.decide(proposal.id, confirm=True, actor="chat", user_id=BOB)  # not Bob's
        assert "Alice moved to Lyon in March" not in _texts(memory)
        _, entry = queue.decide(proposal.id, confirm=True, actor="chat", user_id=ALICE)
    finally:
        queue.close()
    assert entry is not None
    assert "Alice moved to Lyon in March" in _texts(memory)
    decisions = [r for r in memory.history_of(proposal.id) if r.op == "consent"]
    assert [(r.actor, (r.meta or {})["decision"]) for r in decisions] == [("chat", "applied")]


def test_a_rejected_or_expired_proposal_writes_nothing(memory: FileMemory) -> None:
    _flush(memory, "Alice's pronouns are they/them", "Alice prefers to be called Ali")
    queue = ConsentQueue(memory)
    try:
        first, second = queue.pending()
        queue.decide(first.id, confirm=False, actor="cli", user_id=None)
        gone = queue.expire(time.time() + 8 * 86400)
        assert [p.id for p in gone] == [second.id]
        with pytest.raises(MemoryStoreError, match="is expired"):
            queue.decide(second.id, confirm=True, actor="cli", user_id=None)
        assert queue.pending() == []
    finally:
        queue.close()
    assert _texts(memory) == []
    ops = [(r.meta or {}).get("decision") for r in memory.history_of() if r.op == "consent"]
    assert ops == ["rejected", "expired"]


def test_a_benign_change_is_written_on_its_second_signal(memory: FileMemory) -> None:
    assert _flush(memory, "Alice likes short answers") == []
    assert _texts(memory) == []
    assert _flush(memory, "Alice likes short answers.") == ["Alice likes short answers."]
    assert _texts(memory) == ["Alice likes short answers."]
    decisions = [(r.meta or {}).get("why") for r in memory.history_of() if r.op == "consent"]
    assert decisions == ["corroborated"]


def test_a_tool_write_of_a_sensitive_detail_waits_and_the_person_confirms_in_chat(
    tmp_path: Path,
) -> None:
    import asyncio

    from mindroom.adapters.agno.memory_tools import MemoryTools
    from mindroom.config import load_config
    from mindroom.memory.policy.consent_chat import memory_command
    from mindroom.memory.registry import MemoryRegistry
    from mindroom.memory.tools import tool_turn
    from tests.support.harness import repo_config

    config = load_config(repo_config(tmp_path))
    registry = MemoryRegistry(config, tmp_path, tmp_path)
    try:
        memory = registry.for_agent("mind", ALICE)
        assert isinstance(memory, FileMemory)
        tools = MemoryTools(memory)
        with tool_turn("$e1|mind", run="s1", user=ALICE):
            answer = asyncio.run(tools.add_memory("Alice's pronouns are she/her"))
            control = asyncio.run(tools.add_memory("Alice likes green tea"))
        assert answer.startswith("not stored yet: pronouns is a personal detail")
        assert control.startswith("remembered")  # control: an ordinary fact is stored at once
        proposal_id = answer.split("proposal ")[1].split(",")[0]
        assert "she/her" not in memory.scope.entrypoint.read_text()

        agents = ["mind", "general"]

        def command(sender: str, argument: str) -> str:  # each in a DM of the sender
            return memory_command(config, registry, agents, sender, argument, in_dm=True)

        assert proposal_id in command(ALICE, "pending")
        assert "Nothing is waiting" in command(BOB, "pending")
        bob = command(BOB, f"confirm {proposal_id}")
        assert bob == f"No proposal {proposal_id!r} is waiting for you."
        assert "she/her" not in memory.scope.entrypoint.read_text()
        alice = command(ALICE, f"confirm {proposal_id}")
        assert alice == "Stored: Alice's pronouns are she/her"
        assert "Alice's pronouns are she/her" in memory.scope.entrypoint.read_text()
        again = command(ALICE, f"confirm {proposal_id}")
        assert again == f"proposal {proposal_id} is applied."
    finally:
        registry.close()


def test_a_crash_between_writing_and_recording_a_confirmation_writes_once(
    memory: FileMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    _flush(memory, "Alice moved to Porto")
    queue = ConsentQueue(memory)
    try:
        (proposal,) = queue.pending()
        real = ConsentQueue._decide

        def crash(*_args: object, **_kwargs: object) -> None:
            raise OSError("killed")

        monkeypatch.setattr(ConsentQueue, "_decide", crash)
        with pytest.raises(OSError, match="killed"):
            queue.decide(proposal.id, confirm=True, actor="cli", user_id=None)
        monkeypatch.setattr(ConsentQueue, "_decide", real)
        assert [p.id for p in queue.pending()] == [proposal.id]  # still waiting
        queue.decide(proposal.id, confirm=True, actor="cli", user_id=None)  # confirmed again
    finally:
        queue.close()
    assert _texts(memory).count("Alice moved to Porto") == 1
