"""Sessions on a real Synapse with real Agno sessions (issue 16): freshness, !compact, !status,
overflow recovery and transcript repair."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from pathlib import Path

import pytest

from tests.harness import BotHarness, Human, config_text, joined, unique
from tests.scripted_model import ScriptedModel, all_text, last_user_text, system_text
from tests.test_flush_e2e import daily, is_extraction, wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

FLUSH_ON_DEMAND = {  # the flush runs when asked (a session ends), not on its own timers
    "auto_flush": {"enabled": True, "idle_seconds": 3600, "max_dirty_age_seconds": 3600},
}


def ledger_path(storage: Path) -> Path:
    return storage / "mindroom_data" / "ledger.db"


def book_rows(storage: Path) -> list[dict]:
    """The session book, read as another process would."""
    with contextlib.closing(sqlite3.connect(ledger_path(storage))) as db:
        db.row_factory = sqlite3.Row
        return [dict(r) for r in db.execute("SELECT * FROM conversation_sessions ORDER BY key")]


async def age_conversations(storage: Path, turns: int, seconds: float) -> None:
    """Once the book counts ``turns`` turns in all, pretend every conversation was last
    active ``seconds`` earlier than it was (in a thread: the bot shares this event loop)."""
    await wait_until(lambda: sum(r["turns"] for r in book_rows(storage)) == turns)

    def age() -> None:
        with contextlib.closing(sqlite3.connect(ledger_path(storage), timeout=30)) as db:
            db.execute("UPDATE conversation_sessions SET last_active_at = last_active_at - ?",
                       (seconds,))  # fmt: skip
            db.commit()

    await asyncio.to_thread(age)


def chat_requests(model: ScriptedModel) -> list[dict]:
    return [r for r in model.requests if not is_extraction(r)]


async def open_dm(bot: BotHarness, human: Human, config: str) -> tuple[str, str]:
    await bot.start(config)
    assert bot.bot is not None
    general = bot.bot.agents["general"].user_id
    created = await human.client.room_create(invite=[general], is_direct=True)
    await human.wait_for(joined(general, created.room_id))
    return general, created.room_id


async def test_a_stale_dm_is_flushed_and_the_next_message_starts_a_fresh_session(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    def handler(request: dict) -> str:
        if is_extraction(request):
            return "- The user's name is Ada" if "Ada" in all_text(request) else "NO_REPLY"
        return f"echo: {last_user_text(request)}"

    model.set_handler(handler)
    config = config_text(
        model.base_url, {"general": {"rooms": []}}, memory=FLUSH_ON_DEMAND,
        sessions={"daily_reset": None, "dm": {"idle_minutes": 60}},
    )  # fmt: skip
    _, room_id = await open_dm(bot, human, config)

    await human.wait_for_reply(room_id, await human.send(room_id, "my name is Ada"))
    await human.wait_for_reply(room_id, await human.send(room_id, "I like tea"))
    control = all_text(chat_requests(model)[-1])  # fresh: the history came along
    await age_conversations(bot.storage, 2, 2 * 3600)  # two idle hours later
    [first] = book_rows(bot.storage)
    assert not daily(bot.storage).exists()  # nothing flushed yet: the flush waits an hour

    await human.wait_for_reply(room_id, await human.send(room_id, "good morning"))
    fresh = chat_requests(model)[-1]
    await wait_until(lambda: daily(bot.storage).exists())  # the ended session, flushed

    assert "my name is Ada" in control
    assert "my name is Ada" not in all_text(fresh)  # the stale history stayed behind
    assert "fresh session" in system_text(fresh)
    assert "idle for" in system_text(fresh)
    [row] = book_rows(bot.storage)
    assert row["previous"] == first["session_id"]
    assert row["session_id"] != first["session_id"]
    assert row["turns"] == 1
    assert row["reason"].startswith("idle for 2.0 hours")
    assert "The user's name is Ada" in daily(bot.storage).read_text()

    await human.wait_for_reply(room_id, await human.send(room_id, "and again"))
    again = chat_requests(model)[-1]
    assert "good morning" in all_text(again)  # the fresh session keeps its own history
    assert "fresh session" not in system_text(again)  # said once, at the start


async def test_a_thread_keeps_its_session_however_long_it_waits(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    room = unique("stale")
    config = config_text(
        model.base_url, {"general": {"rooms": [room]}},
        sessions={"daily_reset": "04:00", "idle_minutes": 1},
    )  # fmt: skip
    room_id = await bot.start_in_room(config, room, human)
    root = await human.send(room_id, "my name is Ada")
    await human.wait_for_reply(room_id, root)

    await age_conversations(bot.storage, 1, 3 * 86400)  # three days, past every boundary
    follow = await human.send(room_id, "what is my name?", thread_root=root)
    await human.wait_for_reply(room_id, follow)

    assert "my name is Ada" in all_text(model.requests[-1])
    [row] = book_rows(bot.storage)
    assert (row["kind"], row["serial"], row["turns"]) == ("thread", 0, 2)
