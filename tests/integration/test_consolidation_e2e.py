"""End to end: the running bot's maintenance loop consolidates an agent's memory at start, the
conflict it recorded is listed by the CLI (another process) and the agent's next turn is told
about it; once a person settles it from the CLI, the turn after is not."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mindroom.memory.jobs.maintenance.store import MaintenanceStore
from tests.support.harness import BotHarness, Human, config_text, unique
from tests.support.scripted_model import ScriptedModel, system_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]
REPO = Path(__file__).resolve().parents[2]


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mindroom", *args, "--config", str(config)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


async def test_a_conflict_recorded_beside_the_running_bot_reaches_the_next_turn_until_settled(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("solo")
    doc = json.loads(config_text(model.base_url, {"general": {"rooms": [room]}}))
    doc["memory"]["maintenance"] = {
        "enabled": True,
        "timezone": "UTC",
        "jobs": {
            "consolidation_daily": {"enabled": False},
            "consolidation_weekly": {"enabled": False},
            "memory_lifecycle": {"enabled": False},
            "now": {"mode": "light", "cadence": "interval", "interval_minutes": 600},
        },
    }
    daily = bot.storage / "agents" / "general" / "workspace" / "memory" / "2026-11-01.md"
    daily.parent.mkdir(parents=True)
    daily.write_text(
        "- Bob eats meat <!-- m-0000b0b1 -->\n- Bob does not eat meat <!-- m-0000b0b2 -->\n"
    )
    room_id = await bot.start_in_room(json.dumps(doc), room, human)
    config = bot.storage / "config.yaml"
    assert config.exists()

    # the bot's maintenance loop runs the due job at start, in the background
    store = MaintenanceStore(bot.storage / "mindroom_data" / "maintenance.db")
    await wait_until(lambda: any(r.status == "completed" for r in store.runs("now")), timeout=60)
    listed = await asyncio.to_thread(cli, config, "memory", "conflicts", "--agent", "general")
    assert listed.returncode == 0, listed.stderr
    conflict_id = listed.stdout.split()[0]
    assert conflict_id.startswith("c-"), listed.stdout

    again = await human.send(room_id, "so, does Bob eat meat?")
    await human.wait_for_reply(room_id, again)
    during = system_text(model.requests[-1])
    assert "### Open conflicts" in during
    assert "'Bob eats meat' [m-0000b0b1]" in during
    assert "'Bob does not eat meat' [m-0000b0b2]" in during

    settled = await asyncio.to_thread(
        cli, config, "memory", "resolve", "--agent", "general", conflict_id, "--keep-both"
    )
    assert settled.returncode == 0, settled.stderr
    last = await human.send(room_id, "and now, does Bob eat meat?")
    await human.wait_for_reply(room_id, last)
    after = system_text(model.requests[-1])
    assert "Bob eats meat" in after
    assert "Open conflicts" not in after
