"""Helpers of the exactly-once tests: a bot process started and restarted on a config, the
answers to a message, the ledger's marks."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from tests.support.harness import (
    BotProcess,
    Human,
    relation,
)
from tests.support.scripted_model import last_user_text
from tests.support.waiting import wait_until


def answers_to(human: Human, room_id: str, event_id: str) -> list[dict]:
    """Messages (not edits) that answer ``event_id``."""
    return [
        e
        for e in human.messages(room_id)
        if e["sender"] != human.user_id
        and relation(e).get("rel_type") != "m.replace"
        and relation(e).get("m.in_reply_to", {}).get("event_id") == event_id
    ]


async def start_process(bot_process: BotProcess, config: str) -> None:
    bot_process.storage.mkdir(parents=True, exist_ok=True)
    (bot_process.storage / "config.yaml").write_text(config)
    await restart(bot_process)


async def restart(bot_process: BotProcess) -> None:
    bot_process.mark_log()
    bot_process.start()
    await bot_process.wait_running()


async def wait_until_answered(
    storage: Path, event_ids: list[str], status: str = "done", timeout: float = 30.0
) -> None:
    """Poll the bot's ledger until every one of ``event_ids`` has ``status`` (default: done)."""
    path = storage / "mindroom_data" / "ledger.db"
    marks = ",".join("?" * len(event_ids))

    def all_marked() -> bool:
        with contextlib.closing(sqlite3.connect(path, timeout=10)) as db:
            count = db.execute(
                f"SELECT COUNT(*) FROM handled WHERE status = ? AND event_id IN ({marks})",
                [status, *event_ids],
            ).fetchone()[0]
        return count == len(event_ids)

    await wait_until(all_marked, f"all {len(event_ids)} events marked {status}", timeout)


def echo(request: dict) -> str:
    """The scripted model answers each message with a line naming it."""
    return f"answer to: {last_user_text(request)}"
