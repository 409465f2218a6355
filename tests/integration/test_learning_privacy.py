"""Agno learning and private companions: what learning keeps about a person stays theirs.

Agno's LearningMachine adds what it learned about a person to every prompt of that person. A
private companion's learning is therefore the requester's own store (in their private instance,
beside their sessions, never the agent's shared ``agents/<name>/learning/<name>.db``) and is
left out of a turn that must not use the person's private memory (any room someone else can
read: ``private_recall`` False, see :mod:`mindroom.pipeline.turns`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest
from mindroom.config import parse_config
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import config_text
from tests.support.scripted_model import Reply, ScriptedModel

ALICE = "@alice:localhost"
BOB = "@bob:localhost"
SECRET = "Alice is interviewing at a rival company"


@pytest.mark.asyncio
async def test_a_private_companions_learning_stays_out_of_turns_without_private_memory(
    tmp_path: Path, model: ScriptedModel
) -> None:
    agents = {"mind": {"rooms": ["r"], "learning": True, "learning_mode": "agentic"}}
    agents["mind"]["private"] = {"per": "user"}
    config = parse_config(config_text(model.base_url, agents), "config.yaml")
    runtime = AgentRuntime(config, tmp_path / "mindroom_data", MemoryRegistry(config, tmp_path))
    try:
        machine = runtime.build_agent("mind", requester=ALICE).learning
        assert machine is not None
        store = machine.stores["user_memory"]
        store.config.db = machine.db
        await store.aadd_memory(ALICE, SECRET)  # what learning kept from Alice's DMs
        model.push(Reply(text="ok"))
        model.push(Reply(text="ok"))

        # the control: where Alice's private memory may be used, the learned fact is sent
        done = await runtime.run_turn(TurnRequest("mind", "s-dm", ALICE, "hi", private_recall=True))
        assert done.ok, done.error
        assert SECRET in json.dumps(model.requests[-1])

        done = await runtime.run_turn(
            TurnRequest("mind", "s-group", ALICE, "what's new?", private_recall=False)
        )
        assert done.ok, done.error
        assert SECRET not in json.dumps(model.requests[-1])

        model.push(Reply(text="ok"))
        done = await runtime.run_turn(TurnRequest("mind", "s-bob", BOB, "hi", private_recall=True))
        assert done.ok, done.error
        assert SECRET not in json.dumps(model.requests[-1])  # another person's DM
    finally:
        await runtime.close()
