"""A private companion in a process of its own keeps each person's memory when that process is
killed and its agents move."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from tests.integration.test_cluster import pair, wait_holders
from tests.support.harness import (
    CredentialCache,
    Human,
    unique,
)
from tests.support.postgres import PostgresServer
from tests.support.scripted_model import ScriptedModel

pytestmark = [pytest.mark.asyncio, pytest.mark.synapse]


async def test_a_private_companion_in_another_process_keeps_each_persons_memory_across_kill_9(
    synapse: EmbeddedHomeserver,
    tmp_path: Path,
    credential_cache: CredentialCache,
    human: Human,
    model: ScriptedModel,
    postgres: PostgresServer,
) -> None:
    """The private companion runs in the other process and remembers for the person who told
    it in her DM. Its process is killed and the companion moves: it still knows that person in
    her DM, and a hand-off for the other person in the shared room still tells nothing."""
    from nio import RoomCreateResponse

    from mindroom.memory.private import requester_key
    from tests.integration.test_privacy import agents_play, lobby_config, said_by
    from tests.support.harness import joined

    alice, room, url = human, unique("pcluster"), postgres.database()
    model.set_handler(agents_play)
    storage = tmp_path / "storage"
    storage.mkdir()
    config = lobby_config(model, room, storage={"database": url, "failover_seconds": 3})
    (storage / "config.yaml").write_text(config)
    bob = await Human.create(synapse)
    try:
        async with pair(synapse, storage, credential_cache, url, "general", "mind") as (
            one,
            two,
        ):
            assert one.proc is not None
            room_id = await alice.join(f"#{room}:{synapse.server_name}")
            await bob.join(room_id)
            general = f"@mindroom_general:{synapse.server_name}"
            mind = f"@mindroom_mind:{synapse.server_name}"

            dm = await alice.client.room_create(invite=[mind], is_direct=True)
            assert isinstance(dm, RoomCreateResponse), dm
            await alice.wait_for(joined(mind, dm.room_id))
            told = await alice.send(dm.room_id, "please remember: SECRET-kiwi")  # her DM
            told_reply = await alice.wait_for_reply(dm.room_id, told, timeout=40)
            assert (await alice.final(told_reply))["content"]["body"] == "Remembered."

            await two.stop(signal.SIGKILL)
            await wait_holders(url, {"mind": one.proc.pid})  # the companion moved

            asked = await bob.send(room_id, "@general ask the companion", mention=[general])
            bobs_answer = await said_by(bob, mind, asked, "I know")
            control = await alice.send(dm.room_id, "what do you know?")
            reply = await alice.wait_for_reply(dm.room_id, control, timeout=40)
            alices_answer = (await alice.final(reply))["content"]["body"]
            assert await one.stop() == 0
    finally:
        await bob.close()

    assert alices_answer.startswith("I know: SECRET-kiwi")  # positive control, after the move
    assert bobs_answer.startswith("I know: nothing")
    private = storage / "private_instances"
    assert (
        "SECRET-kiwi"
        in (private / requester_key(alice.user_id) / "mind_data" / "MEMORY.md").read_text()
    )
    bob_memory = private / requester_key(bob.user_id) / "mind_data" / "MEMORY.md"
    assert not bob_memory.exists() or "SECRET" not in bob_memory.read_text()
