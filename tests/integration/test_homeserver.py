"""The embedded Synapse: start, register, chat through matrix-nio, restart, recover, fail well."""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import nio
import pytest

from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver, HomeserverError

pytestmark = pytest.mark.timeout(90)


@asynccontextmanager
async def _logged_in(url: str, user_id: str, password: str) -> AsyncIterator[nio.AsyncClient]:
    client = nio.AsyncClient(url, user_id, config=nio.AsyncClientConfig(encryption_enabled=False))
    try:
        response = await client.login(password)
        assert isinstance(response, nio.LoginResponse), response
        yield client
    finally:
        await client.close()


async def _timed_start(hs: EmbeddedHomeserver, label: str) -> float:
    began = time.monotonic()
    await hs.start()
    elapsed = time.monotonic() - began
    print(f"\n[homeserver] {label}: ready in {elapsed:.2f} s at {hs.url}")
    return elapsed


async def _wait_for_text(client: nio.AsyncClient, room_id: str, body: str) -> nio.RoomMessageText:
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        response = await client.sync(timeout=2000)
        assert isinstance(response, nio.SyncResponse), response
        joined = response.rooms.join.get(room_id)
        for event in joined.timeline.events if joined else []:
            if isinstance(event, nio.RoomMessageText) and event.body == body:
                return event
    raise AssertionError(f"{body!r} did not arrive in {room_id}")


@pytest.mark.asyncio
async def test_start_register_chat_and_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "hs"
    hs = EmbeddedHomeserver(data_dir, port=0)
    try:
        await _timed_start(hs, "first start")
        assert hs.url == f"http://127.0.0.1:{hs.port}"
        assert hs.server_name == "localhost"
        assert hs.data_dir == data_dir
        assert (data_dir.stat().st_mode & 0o777) == 0o700
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"{hs.url}/_matrix/client/versions") as response,
        ):
            assert response.status == 200
            assert "versions" in await response.json()

        alice_id = await hs.register_user("alice", "alice-pw", admin=True)
        bob_id = await hs.register_user("bob", "bob-pw")
        assert (alice_id, bob_id) == ("@alice:localhost", "@bob:localhost")

        with pytest.raises(HomeserverError) as excinfo:
            await hs.register_user("bob", "other-pw")
        assert excinfo.value.errcode == "M_USER_IN_USE"
        assert "M_USER_IN_USE" in str(excinfo.value)

        async with (
            _logged_in(hs.url, alice_id, "alice-pw") as alice,
            _logged_in(hs.url, bob_id, "bob-pw") as bob,
        ):
            created = await alice.room_create(name="lobby", preset=nio.RoomPreset.public_chat)
            assert isinstance(created, nio.RoomCreateResponse), created
            joined = await bob.join(created.room_id)
            assert isinstance(joined, nio.JoinResponse), joined
            await bob.sync(timeout=0, full_state=True)  # skip the backlog

            began = time.monotonic()
            sent = await alice.room_send(
                created.room_id, "m.room.message", {"msgtype": "m.text", "body": "hello bob"}
            )
            assert isinstance(sent, nio.RoomSendResponse), sent
            event = await _wait_for_text(bob, created.room_id, "hello bob")
            assert event.sender == alice_id
            print(f"[homeserver] send -> sync receipt: {(time.monotonic() - began) * 1000:.0f} ms")

        port, secret = hs.port, hs.shared_secret
        stop_began = time.monotonic()
        await hs.stop()
        print(f"[homeserver] stop: {time.monotonic() - stop_began:.2f} s")
        await hs.stop()  # idempotent
        assert not hs.running

        # A pid file pointing at a live process that is not our Synapse must not break start,
        # nor get that process killed.
        (data_dir / "homeserver.pid").write_text(f"{os.getpid()}\n")

        hs = EmbeddedHomeserver(data_dir)  # port=None: reuse the port in homeserver.yaml
        await _timed_start(hs, "restart on the same data dir")
        async with hs:  # already started: entering is a no-op, leaving stops it
            assert hs.port == port
            assert hs.shared_secret == secret
            async with _logged_in(hs.url, bob_id, "bob-pw") as bob:
                rooms = await bob.joined_rooms()
                assert isinstance(rooms, nio.JoinedRoomsResponse), rooms
                assert created.room_id in rooms.rooms
            with pytest.raises(HomeserverError) as excinfo:
                await hs.register_user("alice", "x")
            assert excinfo.value.errcode == "M_USER_IN_USE"
        assert not (data_dir / "homeserver.pid").exists()
    finally:
        await hs.stop()


@pytest.mark.asyncio
async def test_left_over_synapse_is_replaced(tmp_path: Path) -> None:
    old = EmbeddedHomeserver(tmp_path, port=0)
    new = EmbeddedHomeserver(tmp_path, port=0)
    try:
        await old.start()
        old_process = old._process
        assert old_process is not None
        # As if the owner of `old` had crashed: a new instance takes over the data dir.
        await _timed_start(new, "start over a left-over Synapse")
        assert old_process.returncode is not None
        assert new.shared_secret == old.shared_secret
        assert new.port != old.port
        assert await new.register_user("carol", "pw") == "@carol:localhost"
    finally:
        await old.stop()
        await new.stop()


@pytest.mark.asyncio
async def test_start_failure_reports_the_log(tmp_path: Path) -> None:
    # Valid YAML that Synapse rejects: open registration without the opt-out of verification.
    (tmp_path / "homeserver.yaml").write_text(
        "server_name: localhost\n"
        "report_stats: false\n"
        "enable_registration: true\n"
        "registration_shared_secret: s3cret\n"
        f"database: {{name: sqlite3, args: {{database: {tmp_path / 'homeserver.db'}}}}}\n"
        f"signing_key_path: {tmp_path / 'signing.key'}\n"
        "listeners:\n"
        "  - {port: 1, bind_addresses: [127.0.0.1], type: http, tls: false,\n"
        "     resources: [{names: [client], compress: false}]}\n"
    )
    hs = EmbeddedHomeserver(tmp_path, port=0)
    with pytest.raises(HomeserverError) as excinfo:
        await hs.start(timeout=30)
    message = str(excinfo.value)
    assert "exited" in message
    assert "enable_registration_without_verification" in message
    assert not hs.running
    await hs.stop()


@pytest.mark.asyncio
async def test_a_picked_port_taken_before_synapse_listens_is_replaced_by_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """port=0: the port was free when picked and taken before Synapse bound it (the race of
    a busy machine); the start goes on with another port."""
    from mindroom.adapters.matrix import homeserver as module
    from mindroom.adapters.matrix.synapse_process import free_port

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    picks = iter([taken.getsockname()[1]])
    monkeypatch.setattr(module, "free_port", lambda host: next(picks, None) or free_port(host))
    monkeypatch.setattr(module, "port_is_free", lambda host, port: True)  # free when checked
    hs = EmbeddedHomeserver(tmp_path, port=0)
    try:
        await hs.start(timeout=60)
        assert hs.port != taken.getsockname()[1]
        async with aiohttp.ClientSession() as session:
            versions = await session.get(f"{hs.url}/_matrix/client/versions")
            assert versions.status == 200
        # the control: the first Synapse really lost the port, and said so
        assert "Address already in use" in hs.stdout_file.read_text()
    finally:
        taken.close()
        await hs.stop()


@pytest.mark.asyncio
async def test_server_name_cannot_change(tmp_path: Path) -> None:
    (tmp_path / "homeserver.yaml").write_text("server_name: example.org\nlisteners: []\n")
    hs = EmbeddedHomeserver(tmp_path, port=0)
    with pytest.raises(HomeserverError, match="example.org"):
        await asyncio.wait_for(hs.start(), 5)


@pytest.mark.asyncio
async def test_a_new_port_keeps_the_accounts_and_client_rooms_get_the_configured_version(
    tmp_path: Path,
) -> None:
    """``run --local --port N`` on existing data: the accounts, saved by URL, keep working; a
    room a client creates itself (a DM) gets the configured room version, not the server's."""
    from mindroom.adapters.matrix.accounts import agent_credentials
    from mindroom.adapters.matrix.local import (
        ensure_local_user,
        follow_port_change,
        local_user_store,
    )

    data_dir = tmp_path / "mindroom_data"
    hs = EmbeddedHomeserver(data_dir / "homeserver", port=0, room_version="10")
    try:
        await hs.start()
        first = await ensure_local_user(data_dir, hs.url, hs.shared_secret)
        old_url = hs.url
    finally:
        await hs.stop()
    agents = agent_credentials(data_dir)
    creds = local_user_store(data_dir).get(old_url, "user")
    assert creds is not None
    agents.put(old_url, "mindroom_general", creds)  # stands in for an agent's saved account

    hs = EmbeddedHomeserver(data_dir / "homeserver", port=0, room_version="10")
    try:
        await hs.start()
        assert hs.previous_url == old_url
        assert hs.url != old_url
        follow_port_change(data_dir, hs.previous_url, hs.url)
        again = await ensure_local_user(data_dir, hs.url, hs.shared_secret)  # no "lost password"
        assert (again.user_id, again.password) == (first.user_id, first.password)
        assert agents.get(hs.url, "mindroom_general") == creds
        assert agents.get(old_url, "mindroom_general") is None

        async with _logged_in(hs.url, again.user_id, again.password) as client:
            created = await client.room_create(is_direct=True)
            assert isinstance(created, nio.RoomCreateResponse), created
            state = await client.room_get_state_event(created.room_id, "m.room.create")
            assert isinstance(state, nio.RoomGetStateEventResponse), state
            assert state.content.get("room_version") == "10"
            assert created.room_id.endswith(":localhost")  # a v10 id carries the server name
    finally:
        await hs.stop()
