"""The router speaks for a configured room from the moment it made or joined it, not only after
its next sync: a person who joins and writes at once gets the router's notices (room_voice).

A CI run on a fast machine showed the race: a person's message naming an absent agent reached
the room's agent before the router's sync had seen the room it had just created, so the room's
agent, not the router, posted the notice. Here the router never syncs at all."""

from __future__ import annotations

import nio
import pytest

from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from mindroom.adapters.matrix.rooms import ensure_room
from mindroom.pipeline.notices import room_voice
from tests.support.harness import unique

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


async def account(homeserver: EmbeddedHomeserver, name: str) -> MatrixAccount:
    username = unique(name)
    await homeserver.register_user(username, "secret-pw")
    client = nio.AsyncClient(
        homeserver.url, username, config=nio.AsyncClientConfig(encryption_enabled=False)
    )
    response = await client.login("secret-pw")
    assert isinstance(response, nio.LoginResponse), response
    return MatrixAccount(name, client)


async def test_a_room_the_router_creates_or_joins_is_its_to_speak_for_before_any_sync(
    synapse: EmbeddedHomeserver,
) -> None:
    router = await account(synapse, "router")
    other = await account(synapse, "router")  # another process's router, say
    agent = await account(synapse, "agent")
    try:
        name = unique("voice")
        created = await ensure_room(router, name)
        joined = await ensure_room(other, name)  # the alias exists now: joined, not created

        assert joined == created
        assert router.client.rooms == {}  # neither has synced
        assert other.client.rooms == {}
        assert room_voice(created, router, [agent]) is router
        assert room_voice(created, other, [agent]) is other
        # the control: an account that is not in the room does not speak for it
        assert room_voice(created, agent, []) is None
    finally:
        for each in (router, other, agent):
            await each.client.close()
