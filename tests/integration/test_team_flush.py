"""Team conversations are flushed too, into the team memory mirrored to every member."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindroom.adapters.agno.runner import AgentRuntime, TeamSpec, TurnRequest
from mindroom.config import parse_config
from mindroom.memory.files.markdown import parse_entries
from mindroom.memory.files.store import today
from mindroom.memory.flush.loop import FlushWorker
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import config_text
from tests.support.scripted_model import ScriptedModel, all_text, last_user_text, system_text


@pytest.mark.asyncio
async def test_a_team_session_is_flushed_into_every_members_mirror(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config = parse_config(
        config_text(
            model.base_url,
            {"general": {"rooms": ["r"]}, "coder": {"rooms": ["r"]}},
            teams={"crew": {"agents": ["general", "coder"], "rooms": ["r"]}},
            memory={"auto_flush": {"enabled": True}},
        ),
        "config.yaml",
    )

    def handler(request: dict) -> str:
        if "You maintain the long-term memory" in system_text(request):
            return "- The launch is on Monday" if "launch" in all_text(request) else "NO_REPLY"
        return "We will launch on Monday."

    model.set_handler(handler)
    registry = MemoryRegistry(config, tmp_path)
    runtime = AgentRuntime(config, tmp_path / "mindroom_data", registry)
    worker = FlushWorker(config, runtime, registry, tmp_path / "mindroom_data")
    try:
        spec = TeamSpec.configured(config, "crew")
        result = await runtime.run_team_turn(
            spec, TurnRequest("general", "crew:room:t1", "@u:x", "when is the launch?")
        )
        assert result.ok, result.error
        await worker.turn_finished("crew", "crew:room:t1", "@u:x", spec.members)
        results = await worker.cycle(force=True)
    finally:
        await worker.aclose()
        await runtime.close()
        registry.close()

    assert [r.written for r in results] == [("The launch is on Monday",)]
    copies = [
        tmp_path / "agents" / m / "memory_files" / "team_coder+general" / "memory" / f"{today()}.md"
        for m in ("general", "coder")
    ]
    entries = [parse_entries(c.read_text(), "memory/x.md") for c in copies]
    assert [e.text for e in entries[0]] == ["The launch is on Monday"]
    assert entries[0] == entries[1]  # one id in both mirrors


ALICE = "@alice:localhost"
BOB = "@bob:localhost"


@pytest.mark.asyncio
async def test_a_team_session_two_people_share_flushes_each_persons_facts_only_for_them(
    tmp_path: Path, model: ScriptedModel
) -> None:
    config = parse_config(
        config_text(
            model.base_url,
            {"general": {"rooms": ["r"]}, "mind": {"rooms": ["r"], "private": {"per": "user"}}},
            memory={"auto_flush": {"enabled": True}},
        ),
        "config.yaml",
    )
    facts = {"sister": "Has a sister called Maya", "brother": "Has a brother called Tom"}

    def handler(request: dict) -> str:
        if "You maintain the long-term memory" not in system_text(request):
            return "Noted."
        said = last_user_text(request).split("Conversation:\n", 1)[1]
        found = [f"- {fact}" for word, fact in facts.items() if word in said]
        return "\n".join(found) or "NO_REPLY"

    model.set_handler(handler)
    registry = MemoryRegistry(config, tmp_path)
    runtime = AgentRuntime(config, tmp_path / "mindroom_data", registry)
    worker = FlushWorker(config, runtime, registry, tmp_path / "mindroom_data")
    spec = TeamSpec.ad_hoc(config, ("general", "mind"))
    session = f"{spec.name}:room:t1"  # one thread, one team session, both people in it
    try:
        for person, text in ((ALICE, "my sister is called Maya"), (BOB, "my brother is Tom")):
            result = await runtime.run_team_turn(
                spec, TurnRequest("general", session, person, text)
            )
            assert result.ok, result.error
            await worker.turn_finished(spec.name, session, person, spec.members)
        results = await worker.cycle(force=True)
        alice = registry.for_team(list(spec.members), ALICE)
        bob = registry.for_team(list(spec.members), BOB)
        assert alice is not None
        assert bob is not None
        alice_facts = [e.text for e in alice.list_sync()]
        bob_facts = [e.text for e in bob.list_sync()]
    finally:
        await worker.aclose()
        await runtime.close()
        registry.close()

    assert sorted(r.entry.requester or "" for r in results) == [ALICE, BOB]
    assert alice_facts == [facts["sister"]]  # bob's brother never reaches alice's memory
    assert bob_facts == [facts["brother"]]  # positive control: bob's own fact does land
    transcripts = [
        last_user_text(r).split("Conversation:\n", 1)[1]
        for r in model.requests
        if "You maintain the long-term memory" in system_text(r)
    ]
    assert len(transcripts) == 2
    for said in transcripts:  # each transcript names its one speaker, never the other
        assert (f"{ALICE}: my sister" in said) != (f"{BOB}: my brother" in said)
