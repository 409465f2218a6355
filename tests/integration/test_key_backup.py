"""Server-side key backup: a re-installed bot reads its encrypted rooms again.

The recovery key and the sealed sessions are checked on their own first; then, on a real
Synapse with an encrypting nio client as the person: an agent whose key stores are wiped (a
re-install) restores its room keys from the backup and reads a message sent while it was gone,
a re-install with the wrong recovery key leaves the backup alone (and the message gets the
"send it again" notice instead: the control), and a key that only the backup holds is looked
up when a message needs it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nio
import pytest
import pytest_asyncio
import vodozemac
from nio.crypto.sessions import InboundGroupSession

from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from mindroom.adapters.matrix.key_backup import (
    RECOVERY_ENV,
    RECOVERY_FILE,
    backup_secret_key,
    decode_recovery_key,
    encode_recovery_key,
    last_outcome,
    recovery_key,
    seal,
    unseal,
)
from mindroom.cli.doctor import run_doctor
from mindroom.cli.main import main
from mindroom.errors import ConfigError
from tests.support.harness import (
    DECRYPTED,
    BotHarness,
    Human,
    client_api,
    config_text,
    encrypted_dm,
)
from tests.support.scripted_model import ScriptedModel, last_user_text
from tests.support.waiting import wait_until

_VERSION = "/_matrix/client/v3/room_keys/version"


def _fresh(name: str) -> str:
    """An agent name no other test on the session's shared homeserver has used.

    A Matrix account's key backup outlives the test that made it: another test's ``keeper``
    would leave a backup made with another recovery key, which mindroom rightly refuses.
    """
    return f"{name}_{os.urandom(3).hex()}"


# -- the recovery key and one sealed session ------------------------------------------------------


def test_a_recovery_key_round_trips_and_a_typo_is_refused() -> None:
    key = os.urandom(32)
    text = encode_recovery_key(key)

    assert decode_recovery_key(text) == key
    assert decode_recovery_key(text.replace(" ", "")) == key  # spaces are for reading only
    assert text.startswith("Es")  # written like Element's recovery keys
    i = next(i for i, c in enumerate(text) if c not in " 1")  # not a leading-zero digit
    typo = text[:i] + ("2" if text[i] != "2" else "3") + text[i + 1 :]
    with pytest.raises(ValueError, match="mistyped|not a recovery key"):
        decode_recovery_key(typo)
    with pytest.raises(ValueError, match="not a character"):
        decode_recovery_key(text[:-1] + "0")  # 0 is not in base58
    with pytest.raises(ValueError, match="not a recovery key"):
        decode_recovery_key(encode_recovery_key(key)[:-5])


def mistyped(key: str) -> str:
    """``key`` with its last character mistyped so that its check digit no longer matches (a
    random change passes the 8-bit check once in 256 times: the first one that fails)."""

    def valid(text: str) -> bool:
        try:
            decode_recovery_key(text)
        except ValueError:
            return False
        return True

    return next(bad for char in "zyxwvutsrq" if not valid(bad := key[:-1] + char) and bad != key)


def test_the_recovery_key_is_made_once_and_a_bad_one_in_the_environment_stops_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(RECOVERY_ENV, raising=False)
    assert recovery_key(tmp_path, create=False) is None
    made = recovery_key(tmp_path)
    assert made is not None
    path = tmp_path / "crypto" / RECOVERY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().strip() == made.text
    again = recovery_key(tmp_path)
    assert again is not None
    assert again.key == made.key  # the next start reads the same one

    given = encode_recovery_key(os.urandom(32))
    monkeypatch.setenv(RECOVERY_ENV, given)
    from_env = recovery_key(tmp_path)
    assert from_env is not None
    assert from_env.text == given
    assert from_env.source == RECOVERY_ENV

    monkeypatch.setenv(RECOVERY_ENV, mistyped(given))
    with pytest.raises(ConfigError, match=RECOVERY_ENV):
        recovery_key(tmp_path)
    assert path.read_text().strip() == made.text  # the saved key is left as it was


def test_mindroom_keys_recovery_key_prints_the_key_a_reinstall_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(RECOVERY_ENV, raising=False)
    config = tmp_path / "config.yaml"
    config.write_text("agents: {}\n")
    assert main(["keys", "recovery-key", "--config", str(config)]) == 1  # none made yet
    assert "no recovery key yet" in capsys.readouterr().err

    made = recovery_key(tmp_path / "mindroom_data")
    assert made is not None
    assert main(["keys", "recovery-key", "--config", str(config)]) == 0
    printed = capsys.readouterr()
    assert printed.out.strip() == made.text
    assert RECOVERY_ENV in printed.err
    assert decode_recovery_key(printed.out) == made.key  # what is printed is what restores


def test_each_account_has_its_own_backup_key_and_a_session_comes_back_whole() -> None:
    recovery = os.urandom(32)
    mine = backup_secret_key(recovery, "@mindroom_a:example.org")
    assert mine.to_bytes() == backup_secret_key(recovery, "@mindroom_a:example.org").to_bytes()
    other = backup_secret_key(recovery, "@mindroom_b:example.org")
    assert other.to_bytes() != mine.to_bytes()

    outbound = vodozemac.GroupSession()
    session = InboundGroupSession(
        outbound.session_key.to_base64(), "ed25519-key", "curve-key", "!room:example.org"
    )
    ciphertext = outbound.encrypt(b"the sealed words").to_base64()
    sealed = seal(mine.public_key(), session)

    assert "the sealed words" not in json.dumps(sealed)
    back = unseal(mine, "!room:example.org", sealed)
    assert back.id == session.id
    assert (back.sender_key, back.ed25519) == ("curve-key", "ed25519-key")
    assert back.decrypt(ciphertext)[0] == "the sealed words"
    with pytest.raises(ValueError, match="MAC"):
        unseal(other, "!room:example.org", sealed)  # another account's key reads nothing


# -- on a real homeserver -------------------------------------------------------------------------


@pytest_asyncio.fixture
async def person(synapse: EmbeddedHomeserver, tmp_path: Path) -> AsyncIterator[Human]:
    """A person whose client encrypts, as Element does."""
    someone = await Human.create(synapse, keys=tmp_path / "keys")
    yield someone
    await someone.close()


async def _backed_up(client: nio.AsyncClient, room_id: str) -> dict[str, Any]:
    """The room's sessions in the account's current backup, read as the account."""
    version = await client_api(client, "GET", _VERSION)
    keys = await client_api(
        client, "GET", f"/_matrix/client/v3/room_keys/keys?version={version['version']}"
    )
    return keys.get("rooms", {}).get(room_id, {}).get("sessions", {})


def _echo_config(model: ScriptedModel, agent: str) -> str:
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    return config_text(model.base_url, {agent: {"rooms": [], "streaming": False}})


async def _backed_up_then_lost(
    bot: BotHarness, model: ScriptedModel, person: Human, name: str
) -> tuple[str, str, dict[str, Any]]:
    """Agent ``name`` answers ``person`` in an encrypted DM, its room key goes to the backup,
    then the bot stops and its key stores are deleted (a re-install): (the room, the old
    device, the backup version as it was)."""
    await bot.start(_echo_config(model, name))
    assert bot.bot is not None
    agent = bot.bot.agents[name]
    device = agent.client.device_id
    room_id = await encrypted_dm(person, agent.user_id)
    first = await person.send(room_id, "the first words")
    await person.wait_for_reply(room_id, first, timeout=40)
    await wait_until(lambda: _backed_up(agent.client, room_id), "the room key went to the backup")
    version = await client_api(agent.client, "GET", _VERSION)
    await bot.stop()
    shutil.rmtree(bot.storage / "mindroom_data" / "crypto")  # keys and recovery key gone
    return room_id, device, version


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_a_reinstalled_agent_reads_what_was_sent_while_it_was_gone_from_the_backup(
    bot: BotHarness, model: ScriptedModel, person: Human, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RECOVERY_ENV, encode_recovery_key(os.urandom(32)))
    name = _fresh("keeper")
    room_id, first_device, _ = await _backed_up_then_lost(bot, model, person, name)
    gone = await person.send(room_id, "sent while you were gone: the code is 4711")
    await bot.start()
    assert bot.bot is not None
    again = bot.bot.agents[name]
    reply = await person.wait_for_reply(room_id, gone, timeout=40)
    outcome = last_outcome(Path(again.client.store_path))
    doctor = await run_doctor(bot.storage / "config.yaml", bot.storage, bot.homeserver.url)

    assert again.client.device_id != first_device  # really a new device, with an empty store
    assert reply["content"]["body"] == "echo: sent while you were gone: the code is 4711"
    assert reply.get(DECRYPTED)
    assert "sent while you were gone: the code is 4711" in [
        last_user_text(r) for r in model.requests
    ]
    assert not [
        e
        for e in person.messages(room_id, again.user_id)
        if "could not decrypt" in e["content"].get("body", "")
    ]
    assert outcome is not None
    assert outcome[1] == "on"
    assert outcome[3] >= 1
    [summary] = [c for c in doctor if c.name == "key backup" and not c.warning]
    assert "recovery key from MINDROOM_RECOVERY_KEY" in summary.detail
    assert not [c for c in doctor if c.name == "key backup" and f"{name}:" in c.detail]


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_a_reinstall_with_another_recovery_key_leaves_the_backup_alone_and_asks_again(
    bot: BotHarness, model: ScriptedModel, person: Human, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RECOVERY_ENV, encode_recovery_key(os.urandom(32)))
    name = _fresh("keeper")
    room_id, _, before = await _backed_up_then_lost(bot, model, person, name)
    monkeypatch.setenv(RECOVERY_ENV, encode_recovery_key(os.urandom(32)))  # not the one
    gone = await person.send(room_id, "sent while you were gone")
    await bot.start()
    assert bot.bot is not None
    again = bot.bot.agents[name]
    notice = await person.wait_for(
        lambda e: (
            e.get("sender") == again.user_id and "could not decrypt" in e["content"].get("body", "")
        ),
        timeout=40,
    )
    after = await client_api(again.client, "GET", _VERSION)
    outcome = last_outcome(Path(again.client.store_path))
    doctor = await run_doctor(bot.storage / "config.yaml", bot.storage, bot.homeserver.url)

    assert notice["content"]["m.relates_to"]["m.in_reply_to"]["event_id"] == gone
    assert after["version"] == before["version"]  # not replaced by a backup of the wrong key
    assert after["auth_data"]["public_key"] == before["auth_data"]["public_key"]
    assert outcome is not None
    assert outcome[1] == "off"
    assert RECOVERY_ENV in outcome[2]
    [warned] = [c for c in doctor if c.name == "key backup" and f"{name}:" in c.detail]
    assert warned.warning
    assert "another recovery key" in warned.detail
    assert RECOVERY_ENV in warned.fix


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_a_key_only_the_backup_holds_is_looked_up_when_a_message_needs_it(
    bot: BotHarness, model: ScriptedModel, person: Human, monkeypatch: pytest.MonkeyPatch
) -> None:
    recovery = os.urandom(32)
    monkeypatch.setenv(RECOVERY_ENV, encode_recovery_key(recovery))
    name = _fresh("keeper")
    await bot.start(_echo_config(model, name))
    assert bot.bot is not None
    agent = bot.bot.agents[name]
    room_id = await encrypted_dm(person, agent.user_id)
    readable = await person.send(room_id, "a readable one first")
    await person.wait_for_reply(room_id, readable, timeout=40)

    # A Megolm session of the person's that this device was never sent, only backed up
    # (as another device of the account would have: before a re-install, or elsewhere).
    outbound = vodozemac.GroupSession()
    olm = person.client.olm
    assert olm is not None
    keys = olm.account.identity_keys
    session = InboundGroupSession(
        outbound.session_key.to_base64(), keys["ed25519"], keys["curve25519"], room_id
    )
    public = backup_secret_key(recovery, agent.user_id).public_key()
    version = await client_api(agent.client, "GET", _VERSION)
    put = await client_api(
        agent.client,
        "PUT",
        f"/_matrix/client/v3/room_keys/keys?version={version['version']}",
        {"rooms": {room_id: {"sessions": {session.id: seal(public, session)}}}},
    )
    assert put.get("count", 0) >= 1, put
    payload = {
        "type": "m.room.message",
        "room_id": room_id,
        "content": {"msgtype": "m.text", "body": "only the backup knows this one"},
    }
    encrypted = {
        "algorithm": "m.megolm.v1.aes-sha2",
        "sender_key": keys["curve25519"],
        "ciphertext": outbound.encrypt(json.dumps(payload).encode()).to_base64(),
        "session_id": session.id,
        "device_id": person.client.device_id,
    }
    sent = await client_api(
        person.client,
        "PUT",
        f"/_matrix/client/v3/rooms/{room_id}/send/m.room.encrypted/backup-only-1",
        encrypted,
    )
    reply = await person.wait_for_reply(room_id, sent["event_id"], timeout=40)
    await bot.settle(person, room_id)

    assert reply["content"]["body"] == "echo: only the backup knows this one"
    assert not [
        e
        for e in person.messages(room_id, agent.user_id)
        if "could not decrypt" in e["content"].get("body", "")
    ]


def test_processes_starting_at_once_on_one_storage_make_one_recovery_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several ``mindroom run`` sharing a storage start together: one key is made and every
    process uses it (a key overwritten by another would leave backups nobody can read)."""
    import multiprocessing

    monkeypatch.delenv("MINDROOM_RECOVERY_KEY", raising=False)
    context = multiprocessing.get_context("fork")
    start, results = context.Barrier(8), context.Queue()
    workers = [context.Process(target=_make_key, args=(tmp_path, start, results)) for _ in range(8)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    used = {results.get(timeout=5) for _ in workers}
    kept = recovery_key(tmp_path, create=False)
    assert kept is not None
    assert used == {kept.text}  # every process uses the one key that was kept


def _make_key(data_dir: Path, start: Any, results: Any) -> None:
    start.wait(10)
    made = recovery_key(data_dir)
    assert made is not None
    results.put(made.text)
