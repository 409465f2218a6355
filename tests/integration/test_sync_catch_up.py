"""Catching up from a saved sync position: what arrived while an account was away is delivered."""

from __future__ import annotations

import asyncio
import contextlib

import nio
import pytest

from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.events import IncomingMessage
from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from tests.support.harness import Human, unique

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


async def logged_in(homeserver: EmbeddedHomeserver, username: str) -> nio.AsyncClient:
    client = nio.AsyncClient(
        homeserver.url, username, config=nio.AsyncClientConfig(encryption_enabled=False)
    )
    response = await client.login("secret-pw")
    assert isinstance(response, nio.LoginResponse), response
    return client


async def hear_one(homeserver: EmbeddedHomeserver, username: str, since: str) -> list[str]:
    """Start ``username`` afresh (a restart), catch up from ``since``: the first message heard."""
    heard: list[str] = []
    arrived = asyncio.Event()

    async def on_message(_account: MatrixAccount, message: IncomingMessage) -> None:
        heard.append(message.event_id)
        arrived.set()

    async def on_invite(_account: MatrixAccount, _room_id: str, _sender: str) -> None:
        return None

    after = MatrixAccount(username, await logged_in(homeserver, username))
    await after.first_sync()
    after.listen(on_message, on_invite)
    syncing = asyncio.create_task(after.sync_forever(since=since))
    try:
        await asyncio.wait_for(arrived.wait(), 20)
    finally:
        after.stop()
        syncing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await syncing
        await after.client.close()
    return heard


async def test_a_message_sent_while_away_is_delivered_when_nothing_else_moved_the_stream(
    synapse: EmbeddedHomeserver, human: Human
) -> None:
    """The catch-up sync from a saved position ends where the first sync of the new run ended.

    matrix-nio ignores a sync response whose ``next_batch`` equals the client's own
    ``next_batch`` ("already received"): the first sync after a restart sets it to the head of
    the stream, so the catch-up response, which ends at that same head, was thrown away.
    """
    username = unique("away")
    await synapse.register_user(username, "secret-pw")
    room = await human.client.room_create(invite=[f"@{username}:{synapse.server_name}"])
    assert isinstance(room, nio.RoomCreateResponse), room

    before = MatrixAccount("away", await logged_in(synapse, username))
    await before.join(room.room_id)
    await before.first_sync()
    saved = before.client.next_batch  # the position the previous run had handled
    await before.client.close()

    asked = await human.send(room.room_id, "sent while you were away")

    heard = await hear_one(synapse, username, since=saved)
    assert heard == [asked]


async def test_the_first_position_is_saved_before_anything_happens_so_a_quick_restart_catches_up(
    synapse: EmbeddedHomeserver, human: Human
) -> None:
    """A run stopped before its first long-poll returned must still leave a position to catch
    up from; without one the next run starts at the head and loses what was sent meanwhile."""
    username = unique("quick")
    await synapse.register_user(username, "secret-pw")
    room = await human.client.room_create(invite=[f"@{username}:{synapse.server_name}"])
    assert isinstance(room, nio.RoomCreateResponse), room

    saved: list[str] = []
    reported = asyncio.Event()

    async def on_synced(_account: MatrixAccount, token: str) -> None:
        saved.append(token)
        reported.set()

    first_run = MatrixAccount("quick", await logged_in(synapse, username))
    await first_run.join(room.room_id)
    await first_run.first_sync()
    syncing = asyncio.create_task(first_run.sync_forever(on_synced=on_synced))
    try:  # nothing happens in the room: a long-poll would not return for 30 s
        await asyncio.wait_for(reported.wait(), 10)
    finally:
        first_run.stop()
        syncing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await syncing
        await first_run.client.close()

    asked = await human.send(room.room_id, "sent right after you stopped")
    heard = await hear_one(synapse, username, since=saved[-1])
    assert heard == [asked]
