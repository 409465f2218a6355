"""The answer's delivery goes before the turn's bookkeeping: the session is stored once the
homeserver has handed the answer back to the agent's own account (it is then handing it out to
the room), so with the homeserver on the same machine the bot's CPU does not compete with it.

Real Synapse, real Agno and SQLite, the scripted model."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nio
import pytest

from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.events import IncomingMessage
from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from tests.support.harness import BotHarness, Human, config_text, unique
from tests.support.scripted_model import ScriptedModel
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


@contextlib.asynccontextmanager
async def listening(synapse: EmbeddedHomeserver) -> AsyncIterator[tuple[MatrixAccount, list[str]]]:
    """A logged-in account that listens and syncs; the IDs of the messages it heard."""
    username = unique("echo")
    await synapse.register_user(username, "secret-pw")
    client = nio.AsyncClient(
        synapse.url, username, config=nio.AsyncClientConfig(encryption_enabled=False)
    )
    assert isinstance(await client.login("secret-pw"), nio.LoginResponse)
    account = MatrixAccount("echo", client)
    heard: list[str] = []

    async def on_message(_account: MatrixAccount, message: IncomingMessage) -> None:
        heard.append(message.event_id)

    async def on_invite(*_: Any) -> None:
        return None

    account.listen(on_message, on_invite)
    await account.first_sync()
    syncing = asyncio.create_task(account.sync_forever())
    try:
        yield account, heard
    finally:
        account.stop()
        syncing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await syncing
        await client.close()


async def test_an_account_hears_its_own_message_back_and_only_its_own(
    synapse: EmbeddedHomeserver, human: Human
) -> None:
    async with listening(synapse) as (account, heard):
        created = await account.client.room_create(preset=nio.RoomPreset.public_chat)
        assert isinstance(created, nio.RoomCreateResponse)
        room_id = created.room_id
        await human.join(room_id)

        sent = await account.send(room_id, {"msgtype": "m.text", "body": "mine"})
        assert await account.heard_back(sent, timeout=30)
        assert sent in heard  # the sync delivered it: the wait ended on the echo itself
        assert await account.heard_back(sent, timeout=0.01)  # heard before the wait: kept

        theirs = await human.send(room_id, "theirs")
        await wait_until(lambda: theirs in heard, "their message heard", timeout=30)  # the control
        assert not await account.heard_back(theirs, timeout=0.2)  # but is not its own


async def test_a_wait_ends_at_once_when_nothing_could_tell_it(
    synapse: EmbeddedHomeserver,
) -> None:
    username = unique("quiet")
    await synapse.register_user(username, "secret-pw")
    client = nio.AsyncClient(
        synapse.url, username, config=nio.AsyncClientConfig(encryption_enabled=False)
    )
    try:
        deaf = MatrixAccount("quiet", client)  # never listens
        assert not await asyncio.wait_for(deaf.heard_back("$never", timeout=30), 5)
    finally:
        await client.close()

    async with listening(synapse) as (account, _):
        waiting = asyncio.create_task(account.heard_back("$never", timeout=30))
        await wait_until(lambda: "$never" in account._echo_waiters, "the wait begun", timeout=10)
        account.stop()  # stopping: nothing more will be heard
        assert not await asyncio.wait_for(waiting, 5)


def stored_runs(storage: Path, question: str) -> int:
    """How many of the agent's stored runs hold ``question``."""
    path = storage / "mindroom_data" / "sessions" / "general.db"
    if not path.exists():
        return 0
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "agent_sessions_runs" not in tables:
            return 0
        rows = db.execute("SELECT run_data FROM agent_sessions_runs").fetchall()
    return sum(question in str(row[0]) for row in rows)


async def test_the_session_is_stored_once_the_answer_came_back_from_the_homeserver(
    bot: BotHarness, human: Human, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    room = unique("delivery")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [room]}}), room, human
    )
    release = asyncio.Event()
    held: list[str] = []
    heard: list[bool] = []
    heard_back = MatrixAccount.heard_back

    async def held_back(self: MatrixAccount, event_id: str, timeout: float) -> bool:
        held.append(event_id)
        await release.wait()  # as if the homeserver had not handed it back yet
        heard.append(await heard_back(self, event_id, timeout))
        return heard[-1]

    monkeypatch.setattr(MatrixAccount, "heard_back", held_back)
    model.push("Green tea, then.")

    asked = await human.send(room_id, "which tea today?")
    reply = await human.wait_for_reply(room_id, asked)
    await wait_until(lambda: held == [reply["event_id"]], "the answer's echo awaited", timeout=30)

    assert reply["content"]["body"] == "Green tea, then."
    assert stored_runs(bot.storage, "which tea today?") == 0  # posted, not stored yet

    release.set()
    await bot.settle(human, room_id)  # the control: the same turn then stores its run
    assert stored_runs(bot.storage, "which tea today?") == 1
    assert heard == [True]  # the bot did hear its answer back (no wait ran out)
