"""Everything about a person, by construction: the map of a person's data.

Two people plant unique markers through every path a person's words can take: a DM with a
private companion, a thread with a shared agent, a tool write into shared memory, the
background flush, a team, a private companion on mem0, an attachment in a DM with a shared
agent. Then a byte search of the whole storage (every file, SQLite databases with their
``-wal`` and ``-shm`` files included) is compared with ``mindroom memory export --user`` and,
after ``mindroom memory forget --user``, must find none of Alice's markers while every one of
Bob's it found before is still there (the positive control).

The homeserver's own database is not under the storage at all (the session's Synapse keeps
it in its own temporary folder): it is Matrix's record of the rooms, not mindroom's, and
forgetting a person in it is the homeserver's business (its admin API's redaction and user
erasure), so it is excluded here by construction.

Real Synapse, real files and SQLite, real Agno and mem0 (local Chroma, the bundled embedder);
the scripted model plays every model call.
"""

from __future__ import annotations

import fnmatch
import io
import json
import re
import secrets
import sys
from pathlib import Path
from typing import Any

import nio
import pytest

from mindroom.cli.main import main as cli_main
from mindroom.memory.private import requester_key
from mindroom.people.data import STORES
from tests.integration.test_mem0_e2e import flushed, stored
from tests.support.harness import BotHarness, Human, config_text, joined, unique
from tests.support.scripted_model import (
    Reply,
    ScriptedModel,
    ToolCall,
    all_text,
    is_mem0_extraction,
    last_user_text,
    mem0_new_messages,
    mem0_reply,
    system_text,
)
from tests.support.waiting import wait_until

PATHS = ("dm", "thread", "tool", "flush", "team", "mem0", "file")
FLUSH_MARK = "You maintain the long-term memory"
MARKER = re.compile(r"\b(?:dm|thread|tool|flush|team|mem0|file)x[0-9a-z]{12}9\b")


def markers(person: str) -> dict[str, str]:
    """One unique marker per path. Each ends in a digit (no stemmer changes it) and is
    searched for by its random tail, which no FTS prefix compression splits."""
    return {path: f"{path}x{secrets.token_hex(6)}9" for path in PATHS}


def tail(marker: str) -> bytes:
    return marker.split("x", 1)[1].encode()


def play(request: dict[str, Any]) -> Reply | str:
    """Every model call: mem0's and the flush's extraction keep the markers they are shown;
    the team leader answers; a request to remember becomes an add_memory call; the rest echo
    (so replies copy the person's words, as real replies do)."""
    if is_mem0_extraction(request):
        said = MARKER.findall(mem0_new_messages(request))
        return mem0_reply([f"The user said {m}" for m in said if m.startswith("mem0")])
    if FLUSH_MARK in system_text(request):
        said = all_text(request).split("Conversation:\n", 1)[-1]
        facts = [f"- The user mentioned {m}" for m in MARKER.findall(said) if m.startswith("flush")]
        return "\n".join(facts) or "NO_REPLY"
    if request["messages"][-1]["role"] == "tool":
        return "Done."
    tools = [t["function"]["name"] for t in request.get("tools") or []]
    last = last_user_text(request)
    if any(name.startswith("delegate_task") for name in tools):
        return "Team answer: " + last
    if "please remember" in last and "add_memory" in tools:
        said = [m for m in MARKER.findall(last) if m.startswith("tool")]
        return Reply(tool_calls=[ToolCall("add_memory", {"text": f"Remember {said[0]}"})])
    return "echo: " + last


def forget_config(model: ScriptedModel, room: str) -> str:
    return config_text(
        model.base_url,
        {
            "general": {"rooms": [room], "streaming": False},
            "coder": {"rooms": [room], "streaming": False},
            "mind": {"rooms": [room], "private": {"per": "user"}, "streaming": False},
            "keeper": {
                "rooms": [room],
                "private": {"per": "user"},
                "memory_backend": "mem0",
                "streaming": False,
            },
        },
        teams={"crew": {"agents": ["general", "coder"], "mode": "coordinate", "rooms": [room]}},
        memory={
            "auto_flush": {"enabled": True, "idle_seconds": 0.3, "flush_interval_seconds": 60},
            "maintenance": {"enabled": False},
            "sources": ["memory", "sessions"],
            "session_index_messages": 1,
        },
    )


async def ask(person: Human, room_id: str, agent: str, body: str, **extra: Any) -> None:
    """``person`` says ``body`` to ``agent`` (mentioned) and waits for its answer."""
    sent = await person.send(room_id, body, mention=[agent], **extra)
    await person.wait_for_reply(room_id, sent, timeout=60)


async def direct(person: Human, agent: str) -> str:
    created = await person.client.room_create(invite=[agent], is_direct=True)
    assert isinstance(created, nio.RoomCreateResponse), created
    await person.wait_for(joined(agent, created.room_id), timeout=30)
    return created.room_id


async def send_text_file(person: Human, room_id: str, text: str) -> str:
    data = text.encode()
    upload, _ = await person.client.upload(
        io.BytesIO(data), content_type="text/plain", filename="notes.txt", filesize=len(data)
    )
    assert isinstance(upload, nio.UploadResponse), upload
    info = {"mimetype": "text/plain", "size": len(data)}
    content = {
        "msgtype": "m.file",
        "body": "notes.txt",
        "filename": "notes.txt",
        "url": upload.content_uri,
        "info": info,
    }
    sent = await person.client.room_send(room_id, "m.room.message", content)
    assert isinstance(sent, nio.RoomSendResponse), sent
    return sent.event_id


async def plant(bot: BotHarness, person: Human, room_id: str, marks: dict[str, str]) -> None:
    """Every path a person's words can take, each with its own marker."""
    assert bot.bot is not None
    ids = {name: bot.bot.agents[name].user_id for name in ("general", "mind", "keeper", "crew")}
    dm = await direct(person, ids["mind"])
    await ask(person, dm, ids["mind"], f"in private: {marks['dm']}")
    root = await person.send(room_id, "@general a thread", mention=[ids["general"]])
    await person.wait_for_reply(room_id, root, timeout=60)
    await ask(
        person, room_id, ids["general"], f"@general more: {marks['thread']}", thread_root=root
    )
    await ask(person, room_id, ids["general"], f"@general please remember {marks['tool']}")
    await ask(person, room_id, ids["general"], f"@general by the way {marks['flush']}")
    await ask(person, room_id, ids["crew"], f"@crew team task {marks['team']}")
    await ask(person, room_id, ids["keeper"], f"@keeper note {marks['mem0']}")
    shared_dm = await direct(person, ids["general"])
    sent = await send_text_file(person, shared_dm, f"my notes: {marks['file']}\n")
    await person.wait_for_reply(shared_dm, sent, timeout=60)


def storage_files(storage: Path) -> list[Path]:
    return sorted(p for p in storage.rglob("*") if p.is_file())


def byte_search(storage: Path, marks: dict[str, str]) -> dict[str, list[str]]:
    """For each marker, the files (relative) whose bytes hold it."""
    found: dict[str, list[str]] = {path: [] for path in marks}
    for file in storage_files(storage):
        data = file.read_bytes()
        for path, marker in marks.items():
            if tail(marker) in data:
                found[path].append(file.relative_to(storage).as_posix())
    return found


def claimed(relative: str) -> bool:
    """Whether a registered store of the map covers this file."""
    return any(fnmatch.fnmatch(relative, pattern) for s in STORES for pattern in s.claims)


def cli(storage: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``mindroom memory ARGS`` on ``storage``: exit code and standard output."""
    capsys.readouterr()
    code = cli_main(["memory", *args, "--config", str(storage / "config.yaml")])
    out, err = capsys.readouterr()
    return code, out + err


def databases(found: dict[str, list[str]]) -> dict[str, set[str]]:
    """Where each mark was found, by database: a SQLite file's ``-wal``, ``-shm`` and
    ``-journal`` files count as the file itself."""
    return {
        mark: {re.sub(r"-(?:wal|shm|journal)$", "", path) for path in paths}
        for mark, paths in found.items()
    }


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_forget_me_erases_every_byte_of_one_person_that_export_showed_and_nothing_else(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse, capsys
) -> None:
    alice, room = human, unique("forget")
    bob = await Human.create(synapse)
    alice_marks, bob_marks = markers("alice"), markers("bob")
    model.set_handler(play)
    try:
        room_id = await bot.start_in_room(forget_config(model, room), room, alice)
        await bob.join(room_id)
        await plant(bot, alice, room_id, alice_marks)
        await plant(bot, bob, room_id, bob_marks)
        await wait_until(lambda: flushed(bot), timeout=90)
        for person in (alice, bob):
            await wait_until(lambda p=person: _holds_mem0(bot, p.user_id), timeout=90)
    finally:
        await bob.close()
    await bot.stop()
    storage = bot.storage
    before_alice = byte_search(storage, alice_marks)
    before_bob = byte_search(storage, bob_marks)
    # every path left Alice's words somewhere (else this test would prove nothing about it)
    assert all(before_alice.values()), before_alice
    assert all(before_bob.values()), before_bob
    # every file holding a person's words is claimed by a store of the map
    unclaimed = {
        f
        for files in [*before_alice.values(), *before_bob.values()]
        for f in files
        if not claimed(f)
    }
    assert not unclaimed, f"files no store of the map registers: {sorted(unclaimed)}"

    code, exported = cli(
        storage, "export", "--user", alice.user_id, "--format", "json", capsys=capsys
    )
    assert code == 0, exported
    data = json.loads(exported)
    text = json.dumps(data, ensure_ascii=False)
    missing = [m for m in alice_marks.values() if tail(m).decode() not in text]
    assert not missing, f"found in storage but not in the export: {missing}"
    assert not [m for m in bob_marks.values() if tail(m).decode() in text]
    mem0_texts = [e["text"] for s in data["private_memory"] for e in s["entries"]]
    assert f"The user said {alice_marks['mem0']}" in mem0_texts  # a mem0 memory of hers

    code, out = cli(storage, "forget", "--user", alice.user_id, "--yes", capsys=capsys)
    assert code == 0, out
    assert "private_folder" in out

    after_alice = byte_search(storage, alice_marks)
    after_bob = byte_search(storage, bob_marks)
    assert not any(after_alice.values()), after_alice
    # Bob's data, to the database, is untouched (the erase's checkpoint may move his rows from a
    # database's write-ahead log into the database itself: the same store, another file)
    assert databases(after_bob) == databases(before_bob)
    assert not (storage / "private_instances" / requester_key(alice.user_id)).exists()


async def _holds_mem0(bot: BotHarness, user_id: str) -> bool:
    return any(t.startswith("The user said mem0") for t in await stored(bot, "keeper", user_id))


def test_forget_without_a_terminal_refuses_without_yes(
    tmp_path: Path, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    storage = tmp_path / "storage"
    storage.mkdir()
    (storage / "config.yaml").write_text(config_text(model.base_url, {"general": {"rooms": []}}))
    kept = storage / "private_instances" / requester_key("@alice:localhost") / "mind_data"
    kept.mkdir(parents=True)
    (kept / "MEMORY.md").write_text("- Alice keeps this\n")
    sys.stdin, stdin = io.StringIO(""), sys.stdin
    try:
        code, out = cli(storage, "forget", "--user", "@alice:localhost", capsys=capsys)
    finally:
        sys.stdin = stdin
    assert code != 0
    assert "no terminal to confirm on; add --yes" in out
    assert (kept / "MEMORY.md").read_text() == "- Alice keeps this\n"  # nothing was erased
