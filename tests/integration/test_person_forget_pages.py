"""``/me`` and the map of a person's data: the download holds everything (the
person's conversations, expired and archived entries), a fact the person deletes comes back by
no recall path, and forget-me is a confirmed, CSRF-protected button that erases the person and
nobody else.

Real Synapse, real files and SQLite, real Agno; the scripted model plays the companion.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import html
import re
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import nio
import pytest
import pytest_asyncio

from mindroom.dashboard.person import person_link
from mindroom.dashboard.server import Dashboard
from mindroom.memory.files.archive import archive_entry_sync
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.store import FileMemory
from mindroom.memory.private import requester_key
from tests.support.dashboard import open_link, start_dashboard
from tests.support.harness import BotHarness, Human, config_text, joined, unique
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall, last_user_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

FACT = "my locker code is zq7731x9"


def companion(request: dict[str, Any]) -> Reply | str:
    """``please remember: X`` stores X; a question searches memory and past conversations
    with the tools; everything else echoes."""
    last = last_user_text(request)
    if request["messages"][-1]["role"] == "tool":
        return "Done."
    if "please remember:" in last:
        fact = last.split("please remember:", 1)[1].strip()
        return Reply(tool_calls=[ToolCall("add_memory", {"text": fact})])
    if "what is my locker code" in last:
        return Reply(
            tool_calls=[
                ToolCall("search_memories", {"query": "locker code"}),
                ToolCall("memory_search", {"query": "locker code"}),
            ]
        )
    return "echo: " + last


def holding(word: str, release: threading.Event) -> Callable[[dict[str, Any]], Reply | str]:
    """The companion, except that a message with ``word`` makes the model think until
    ``release`` is set, then store ``word`` with its memory tool."""

    def held(request: dict[str, Any]) -> Reply | str:
        if word in last_user_text(request) and request["messages"][-1]["role"] != "tool":
            release.wait(60)
            return Reply(tool_calls=[ToolCall("add_memory", {"text": f"{word} noted"})])
        return companion(request)

    return held


DELTA = re.compile(r"Memory changes since your last turn.*?\n\n", re.DOTALL)


def what_the_model_saw(request: dict[str, Any]) -> str:
    """Every message of a request: the system prompt (recall), the conversation's history and
    every tool result. The delta header ("Memory changes since your last turn") is left out:
    how it names a deletion is mindroom/memory/search/delta.py's business, not this test's."""
    texts = [str(m.get("content")) for m in request["messages"]]
    return DELTA.sub("", "\n".join(texts))


@pytest_asyncio.fixture
async def running(bot: BotHarness, model: ScriptedModel) -> AsyncIterator[Dashboard]:
    model.set_handler(companion)
    await bot.start(
        config_text(
            model.base_url,
            {"mind": {"private": {"per": "user"}, "streaming": False}},
            memory={
                "auto_flush": {"enabled": False},
                "maintenance": {"enabled": False},
                "sources": ["memory", "sessions"],
                "session_index_messages": 1,
            },
        )
    )
    dash = await start_dashboard(bot)
    yield dash
    await dash.stop()


async def dm(bot: BotHarness, person: Human) -> str:
    assert bot.bot is not None
    mind = bot.bot.agents["mind"].user_id
    created = await person.client.room_create(invite=[mind], is_direct=True)
    assert isinstance(created, nio.RoomCreateResponse), created
    await person.wait_for(joined(mind, created.room_id), timeout=30)
    return created.room_id


async def say(person: Human, room_id: str, text: str) -> None:
    sent = await person.send(room_id, text)
    await person.wait_for_reply(room_id, sent, timeout=60)


def holds(folder: Path, needle: bytes) -> bool:
    return any(needle in p.read_bytes() for p in folder.rglob("*") if p.is_file())


async def signed_in_as(dash: Dashboard, user: str) -> tuple[aiohttp.ClientSession, str]:
    link = person_link(dash.data_dir, dash.host.config.dashboard, user)
    assert link is not None
    session = aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True))
    home = await (await open_link(session, link)).text()
    return session, home


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None
    return found.group(1)


async def test_a_fact_deleted_on_me_comes_back_by_no_recall_path(
    bot: BotHarness, running: Dashboard, human: Human, model: ScriptedModel
) -> None:
    alice = human
    room_id = await dm(bot, alice)
    await say(alice, room_id, f"please remember: {FACT}")
    home_dir = bot.storage / "private_instances" / requester_key(alice.user_id)

    def stored() -> bool:
        state = home_dir / ".state" / "memory"
        return (state / "transcripts.db").exists() and holds(state, b"zq7731x9")

    await wait_until(lambda: asyncio.to_thread(stored), "her message is in her transcripts")

    await say(alice, room_id, "what is my locker code?")
    before = what_the_model_saw(model.requests[-1])
    assert "zq7731x9" in before  # the control: memory and past conversations do recall it

    session, home = await signed_in_as(running, alice.user_id)
    async with session:
        [action] = re.findall(r'action="(/me/s/[^"]+/e/[^"/]+)/delete"', home)
        deleted = await session.post(
            f"http://127.0.0.1:{running.port}{action}/delete", data={"csrf": csrf_of(home)}
        )
        assert deleted.status == 200
    # the bytes are gone from the person's transcripts (the session store, its index) and
    # everything derived, not only hidden
    holding = [
        p.relative_to(home_dir).as_posix()
        for p in (home_dir / ".state").rglob("*")
        if p.is_file() and b"zq7731x9" in p.read_bytes()
    ]
    # only the change history keeps it (so the person can undo a delete; forget-me erases it)
    assert holding == [".state/memory/history.jsonl"]
    await say(alice, room_id, "what is my locker code?")
    after = what_the_model_saw(model.requests[-1])

    assert "zq7731x9" not in after


async def test_the_me_download_holds_conversations_expired_and_archived_entries(
    bot: BotHarness, running: Dashboard, human: Human
) -> None:
    alice = human
    room_id = await dm(bot, alice)
    await say(alice, room_id, "hello from alicehello4417")
    assert bot.bot is not None
    memory = bot.bot.memories.for_agent("mind", requester=alice.user_id)
    assert isinstance(memory, FileMemory)
    expired = EntryFields(state="soft_deleted", purge=dt.date.today() + dt.timedelta(days=30))
    memory.add_sync("an expired note expx6632", actor="test", fields=expired, path="memory/x.md")
    old = memory.add_sync("an archived note archx5521", actor="test")
    await asyncio.to_thread(
        archive_entry_sync, memory, old, into=None, why="test", actor="test", today=dt.date.today()
    )

    session, home = await signed_in_as(running, alice.user_id)
    async with session:
        answer = await session.get(f"http://127.0.0.1:{running.port}/me/export")
        text = await answer.text()

    assert "Everything stored about you" in home
    # the page names the stores holding them
    assert "private companions' memory" in html.unescape(home)
    assert answer.status == 200
    assert "alicehello4417" in text  # the conversation
    assert "archx5521" in text  # the archived entry
    assert "expx6632" in text  # the entry TTL expired (in its file until its purge day)


async def test_forget_me_on_me_asks_twice_and_erases_only_that_person(
    bot: BotHarness, running: Dashboard, human: Human, synapse
) -> None:
    alice, bob = human, await Human.create(synapse)
    try:
        for person, word in ((alice, "aliceword3301"), (bob, "bobword4402")):
            await say(person, await dm(bot, person), f"please remember: {word}")
    finally:
        await bob.close()
    alice_dir = bot.storage / "private_instances" / requester_key(alice.user_id)
    bob_dir = bot.storage / "private_instances" / requester_key(bob.user_id)
    assert holds(alice_dir, b"aliceword3301")

    session, home = await signed_in_as(running, alice.user_id)
    async with session:
        base = f"http://127.0.0.1:{running.port}"
        forged = await session.post(f"{base}/me/forget/confirm", data={"confirm": "yes"})
        asked = await session.post(f"{base}/me/forget", data={"csrf": csrf_of(home)})
        question = await asked.text()
        assert holds(alice_dir, b"aliceword3301")  # asking erased nothing
        done = await session.post(
            f"{base}/me/forget/confirm", data={"csrf": csrf_of(question), "confirm": "yes"}
        )
        report = await done.text()
        after = await session.get(f"{base}/me", allow_redirects=False)

    assert forged.status == 403  # no CSRF field: refused
    assert "Yes, erase everything about me" in question
    assert done.status == 200
    assert "private_folder" in report
    assert after.status == 401  # signed out
    assert not alice_dir.exists()
    assert holds(bob_dir, b"bobword4402")  # Bob keeps everything


async def test_forget_me_while_the_persons_answer_is_being_written_leaves_nothing_of_it(
    bot: BotHarness, running: Dashboard, human: Human, model: ScriptedModel
) -> None:
    """Forget-me pressed while the companion is still answering the person: the turn in flight
    stores nothing of theirs after the erase (its session, its transcript, its memory write),
    and the person's next message starts afresh."""
    alice = human
    room_id = await dm(bot, alice)
    await say(alice, room_id, "please remember: earlyword5510")
    alice_dir = bot.storage / "private_instances" / requester_key(alice.user_id)
    assert holds(alice_dir, b"earlyword5510")  # the control: her folder holds her words

    release = threading.Event()
    model.set_handler(holding("heldword7720", release))
    asked = await alice.send(room_id, "please keep heldword7720 in mind")
    await wait_until(
        lambda: any("heldword7720" in last_user_text(r) for r in model.requests),
        "the companion's model was asked",
    )

    try:
        assert await forget_me_then_release(running, bot, alice.user_id, release) == 200
    finally:
        release.set()  # a failing test leaves no model thread waiting
    await alice.wait_for_reply(room_id, asked, timeout=60)
    await bot.settle(alice, room_id)

    left = [
        p.relative_to(bot.storage).as_posix()
        for p in bot.storage.rglob("*")
        if p.is_file() and b"heldword7720" in p.read_bytes()
    ]
    assert left == [], left
    assert not holds(bot.storage, b"earlyword5510")
    # her next message starts afresh: the model sees none of what went before
    held_request = next(r for r in model.requests if "heldword7720" in last_user_text(r))
    assert "earlyword5510" in what_the_model_saw(held_request)  # the control: history is seen
    await say(alice, room_id, "hello again")
    seen = what_the_model_saw(model.requests[-1])
    assert "hello again" in seen
    assert "earlyword5510" not in seen
    assert "heldword7720" not in seen


async def forget_me_then_release(
    dash: Dashboard, bot: BotHarness, user: str, release: threading.Event
) -> int:
    """``user`` presses forget-me on /me and confirms while a model answer is held; the model
    is let go once the erasure is waiting for it (or, without a gate, is done). The confirmation's
    HTTP status."""
    session, home = await signed_in_as(dash, user)
    async with session:
        base = f"http://127.0.0.1:{dash.port}"
        asked = await session.post(f"{base}/me/forget", data={"csrf": csrf_of(home)})
        question = await asked.text()
        confirm = asyncio.create_task(
            session.post(
                f"{base}/me/forget/confirm", data={"csrf": csrf_of(question), "confirm": "yes"}
            )
        )
        # the erase either waits for the answer (then the model must be let go first) or is
        # done; either way the model answers only after forget-me was confirmed
        await wait_until(lambda: confirm.done() or forgetting(bot), "forget-me started")
        release.set()
        return (await confirm).status


def forgetting(bot: BotHarness) -> bool:
    """Whether forget-me waits for work in progress to end."""
    assert bot.bot is not None
    return bot.bot.runtime.gate.erasure_waiting


async def test_a_memory_edit_on_the_dashboard_waits_while_a_forget_me_runs(
    bot: BotHarness, running: Dashboard, human: Human
) -> None:
    """A delete on /me (or the admin's memory pages) is work on the person's memory like an
    answer: it does not run beside an erasure, so it cannot write what the erasure removed."""
    alice = human
    room_id = await dm(bot, alice)
    await say(alice, room_id, "please remember: editword6630")
    alice_dir = bot.storage / "private_instances" / requester_key(alice.user_id)
    assert bot.bot is not None
    gate = bot.bot.runtime.gate

    session, home = await signed_in_as(running, alice.user_id)
    async with session:
        [action] = re.findall(r'action="(/me/s/[^"]+/e/[^"/]+)/delete"', home)
        async with gate.erasing():  # an erasure in progress (it erases nothing here)
            deleting = asyncio.create_task(
                session.post(
                    f"http://127.0.0.1:{running.port}{action}/delete",
                    data={"csrf": csrf_of(home)},
                )
            )
            await wait_until(lambda: gate.held_back == 1, "the delete waits for the erasure")
            assert holds(alice_dir / "mind_data", b"editword6630")  # nothing deleted yet
        deleted = await deleting

    assert deleted.status == 200  # the control: once the erasure is done, it runs
    assert not holds(alice_dir / "mind_data", b"editword6630")


async def test_forget_me_while_another_persons_answer_holds_the_shared_session_leaves_none_of_her(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse
) -> None:
    """Alice and Bob talk to a shared agent in one thread: its session holds both. Alice
    presses forget-me while Bob's answer is still being written, by a turn that read her words
    with the session's history and stores its run after the answer. None of her words remain
    anywhere in the storage afterwards, and Bob keeps his."""
    alice = human
    release = threading.Event()

    def held(request: dict[str, Any]) -> str:
        if "bobword8841" in last_user_text(request):
            release.wait(60)
        return "noted: " + last_user_text(request)

    model.set_handler(held)
    room = unique("shared")
    room_id = await bot.start_in_room(
        config_text(
            model.base_url,
            {"general": {"rooms": [room], "streaming": False}},
            memory={"auto_flush": {"enabled": False}, "maintenance": {"enabled": False}},
        ),
        room,
        alice,
    )
    dash = await start_dashboard(bot)
    bob = await Human.create(synapse)
    try:
        assert bot.bot is not None
        agent = bot.bot.agents["general"].user_id
        await bob.join(room_id)
        await alice.wait_for(joined(bob.user_id, room_id))
        root = await alice.send(room_id, "my word is aliceword7713", mention=[agent])
        await alice.wait_for_reply(room_id, root, timeout=60)
        asked = await bob.send(
            room_id, "and mine is bobword8841", mention=[agent], thread_root=root
        )
        await wait_until(
            lambda: any("bobword8841" in last_user_text(r) for r in model.requests),
            "Bob's turn asked the model",
        )
        bob_turn = next(r for r in model.requests if "bobword8841" in last_user_text(r))
        assert "aliceword7713" in what_the_model_saw(bob_turn)  # it read her words

        assert await forget_me_then_release(dash, bot, alice.user_id, release) == 200
        await bob.wait_for_reply(room_id, asked, timeout=60)
        await bot.settle(bob, room_id)
    finally:
        release.set()
        await bob.close()
        await dash.stop()

    assert not holds(bot.storage, b"aliceword7713")
    assert holds(bot.storage, b"bobword8841")  # the control: Bob's words are kept
