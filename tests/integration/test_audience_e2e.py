"""End to end: a fact is never recalled where more people can read it than where it was told.

Alice tells the shared agent ``general`` her salary in her DM; the flush turns it into
``general``'s memory. Bob asks ``general`` in the lobby: neither the fact nor Alice's DM words
(past conversations) reach the model for him, while a fact told in the lobby does (the
positive control), and Alice's own question in her DM gets her fact. Real Synapse, real
files and Agno; the scripted model extracts ``REMEMBER:`` lines and records every request.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest

from tests.support.harness import (
    BotHarness,
    Human,
    config_text,
    joined,
    unique,
    wait_until_ledger_idle,
)
from tests.support.scripted_model import Reply, ScriptedModel, all_text, last_user_text, system_text

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

SALARY = "SALARY-91000"
PLANT = "PLANT-FERNANDO"
EXTRACTION = "You maintain the long-term memory of an assistant"


def extract_and_answer(request: dict[str, Any]) -> Reply | str:
    """The extraction writes every ``REMEMBER: X`` of the transcript as a fact; turns say ok."""
    if EXTRACTION in system_text(request):
        facts = re.findall(r"REMEMBER: ([\w -]+)", last_user_text(request))
        return "\n".join(f"- {fact.strip()}" for fact in facts) or "NO_REPLY"
    if "Which agent should answer?" in last_user_text(request):
        return '{"agent": "general"}'
    return "ok"


def turn_requests(model: ScriptedModel, words: str) -> list[dict[str, Any]]:
    """The requests of the turns that answered a message containing ``words``."""
    return [
        r for r in model.requests if words in last_user_text(r) and EXTRACTION not in system_text(r)
    ]


def recalled(request: dict[str, Any]) -> str:
    """The memory given to a turn (the ``<memory>`` block), not its history."""
    found = re.search(r"<memory>(.*)</memory>", all_text(request), re.S)
    return found.group(1) if found else ""


async def test_a_fact_told_in_a_dm_is_recalled_there_and_never_for_someone_else_in_the_lobby(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse: Any
) -> None:
    alice, room = human, unique("lobby")
    model.set_handler(extract_and_answer)
    config = json.loads(config_text(model.base_url, {"general": {"rooms": [room]}}))
    config["memory"] = {
        "auto_flush": {"enabled": True, "idle_seconds": 3600},
        "embedder": "none",
        "maintenance": {"enabled": False},
        "sources": ["memory", "sessions"],
        "session_index_messages": 1,
    }
    bob = await Human.create(synapse)
    try:
        lobby = await bot.start_in_room(json.dumps(config), room, alice)
        await bob.join(lobby)
        assert bot.bot is not None
        general = bot.bot.agents["general"].user_id
        dm = (await alice.client.room_create(invite=[general], is_direct=True)).room_id
        await alice.wait_for(joined(general, dm))

        told = await alice.send(dm, f"REMEMBER: Alice salary is {SALARY}")
        await alice.wait_for_reply(dm, told, timeout=40)
        said = await bob.send(
            lobby, f"@general REMEMBER: lobby plant is {PLANT}", mention=[general]
        )
        await bob.wait_for_reply(lobby, said, timeout=40)
        ledger = bot.storage / "mindroom_data" / "ledger.db"
        await wait_until_ledger_idle(ledger, time.monotonic() + 30)
        await bot.bot.flush.cycle(force=True)
        memory = bot.bot.memories.for_agent("general")
        assert memory is not None
        stored = "".join(p.read_text() for p in memory.scope.root.rglob("*.md"))
        assert SALARY in stored  # both facts are in general's memory
        assert PLANT in stored

        asked = await bob.send(lobby, "@general salary plant REMEMBER?", mention=[general])
        await bob.wait_for_reply(lobby, asked, timeout=40)
        await wait_until_ledger_idle(ledger, time.monotonic() + 30)
        await bot.bot.flush.cycle(force=True)  # the lobby's second chunk, with memory known
        mine = await alice.send(dm, "what about my salary plant?")
        await alice.wait_for_reply(dm, mine, timeout=40)
    finally:
        await bob.close()

    bobs = turn_requests(model, "salary plant REMEMBER?")
    assert bobs
    assert PLANT in recalled(bobs[-1])  # the control: a lobby fact is recalled in the lobby
    assert SALARY not in all_text(bobs[-1])  # neither the fact nor Alice's DM words
    alices = turn_requests(model, "what about my salary plant?")
    assert alices
    assert SALARY in recalled(alices[-1])  # her own fact, recalled in her DM
    lobby_flush = [
        r for r in model.requests if EXTRACTION in system_text(r) and PLANT in last_user_text(r)
    ]
    assert lobby_flush  # the extraction of a lobby conversation is shown what it may know...
    assert all(SALARY not in all_text(r) for r in lobby_flush)  # ...never a DM fact
