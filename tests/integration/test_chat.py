"""``mindroom chat``, the terminal client: one thread per prompt, only its own answers, and a
clear word when nobody is there to answer. Real Synapse, real bot, the scripted model."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mindroom.adapters.matrix.accounts import Credentials
from mindroom.adapters.matrix.chat import chat
from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from mindroom.adapters.matrix.local import ensure_local_user, local_user_store
from tests.support.harness import (
    REPO,
    BotHarness,
    Human,
    config_text,
    joined,
    relation,
    unique,
)
from tests.support.scripted_model import Reply, ScriptedModel, all_text

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(120)]


class Terminal:
    """Lines typed at the chat prompt, and what the chat printed."""

    def __init__(self) -> None:
        self.typed = asyncio.Queue[str | None]()
        self.printed: list[str] = []

    async def lines(self) -> AsyncIterator[str]:
        while (line := await self.typed.get()) is not None:
            yield line

    async def wait_printed(self, text: str, count: int = 1, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while sum(text in line for line in self.printed) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not printed {count}x: {self.printed}")
            await asyncio.sleep(0.05)


async def _local_user(synapse: EmbeddedHomeserver, data_dir: Path) -> str:
    user = await ensure_local_user(data_dir, synapse.url, synapse.shared_secret, unique("chatter"))
    return user.user_id


async def _local_chat(synapse: EmbeddedHomeserver, tmp_path: Path) -> Path:
    """The data folder of a terminal chat whose local user exists on ``synapse``."""
    data_dir = tmp_path / "chat_data"
    await _local_user(synapse, data_dir)
    return data_dir


async def _one_agent_room(bot: BotHarness, model: ScriptedModel) -> str:
    room = unique("talk")
    await bot.start(config_text(model.base_url, {"general": {"role": "Helps.", "rooms": [room]}}))
    return room


async def test_the_prompt_continues_one_thread_and_new_starts_another(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse: EmbeddedHomeserver, tmp_path: Path
) -> None:
    data_dir = await _local_chat(synapse, tmp_path)
    room = await _one_agent_room(bot, model)
    room_id = await human.join(f"#{room}:{synapse.server_name}")
    model.push("First answer.")
    model.push("Second answer.")
    model.push("Third answer.")
    terminal = Terminal()
    session = asyncio.create_task(
        chat(data_dir, room, None, out=terminal.printed.append, lines=terminal.lines())
    )
    await terminal.wait_printed("/new")  # the help line comes first
    await terminal.typed.put("my cat is called Tiber")
    await terminal.wait_printed("First answer.")
    await terminal.typed.put("what is my cat called?")
    await terminal.wait_printed("Second answer.")
    await terminal.typed.put("/new")
    await terminal.typed.put("a fresh start")
    await terminal.wait_printed("Third answer.")
    await terminal.typed.put(None)
    assert await session == 0

    # The second line was sent in the first line's thread, so the agent saw the history ...
    assert "Tiber" in all_text(model.requests[1])
    # ... and /new started a conversation without it.
    assert "Tiber" not in all_text(model.requests[2])
    await human.fence(room_id)
    sent = {e["content"]["body"]: e for e in human.messages(room_id) if "body" in e["content"]}
    first = sent["my cat is called Tiber"]
    assert relation(sent["what is my cat called?"]).get("event_id") == first["event_id"]
    assert relation(sent["what is my cat called?"]).get("rel_type") == "m.thread"
    assert relation(sent["a fresh start"]).get("rel_type") is None


async def test_room_switches_the_room_the_prompt_talks_in(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse: EmbeddedHomeserver, tmp_path: Path
) -> None:
    data_dir = await _local_chat(synapse, tmp_path)
    first, second = unique("one"), unique("two")
    agents = {
        "general": {"role": "Helps.", "rooms": [first]},
        "coder": {"role": "Codes.", "rooms": [second]},
    }
    await bot.start(config_text(model.base_url, agents))
    model.push("From the first room.")
    model.push("From the second room.")
    terminal = Terminal()
    session = asyncio.create_task(
        chat(data_dir, first, None, out=terminal.printed.append, lines=terminal.lines())
    )
    await terminal.typed.put("hello one")
    await terminal.wait_printed("General: From the first room.")
    await terminal.typed.put(f"/room {second}")
    await terminal.typed.put("hello two")
    await terminal.wait_printed("Coder: From the second room.")
    await terminal.typed.put(None)
    assert await session == 0


async def test_repeated_one_shot_chats_print_only_their_own_answer_once(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse: EmbeddedHomeserver, tmp_path: Path
) -> None:
    data_dir = await _local_chat(synapse, tmp_path)
    room = await _one_agent_room(bot, model)
    room_id = await human.join(f"#{room}:{synapse.server_name}")
    for attempt in range(3):
        printed: list[str] = []
        # Someone else's message and its answer arrive while the chat waits: not ours.
        model.push(f"Answer to the other person {attempt}.")
        other = asyncio.create_task(human.send(room_id, f"other person {attempt}"))
        assert await chat(data_dir, room, "!agents", timeout=30, out=printed.append) == 0
        await human.wait_for_reply(room_id, await other)
        answers = [line for line in printed if "general" in line and "Router" in line]
        assert len(answers) == 1, printed  # the positive control: our answer, exactly once
        assert not any("other person" in line for line in printed), printed


async def test_chat_names_an_unreachable_homeserver_and_exits_non_zero(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    local_user_store(tmp_path / "mindroom_data").put(
        url, "user", Credentials("@user:localhost", "pw", "token", "DEVICE")
    )
    result = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "mindroom", "chat", "--storage", str(tmp_path), "hello"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0
    assert url in result.stderr, result.stderr
    assert "mindroom run" in result.stderr
    # the hint starts the run of this storage, not of the default one
    assert f"run --local --storage {tmp_path}" in result.stderr


async def test_chat_says_no_agent_answered_when_the_bot_is_not_running(
    bot: BotHarness, model: ScriptedModel, synapse: EmbeddedHomeserver, tmp_path: Path
) -> None:
    data_dir = await _local_chat(synapse, tmp_path)
    room = await _one_agent_room(bot, model)
    await bot.stop()
    printed: list[str] = []
    assert await chat(data_dir, room, "hello?", timeout=2, out=printed.append) == 1
    assert any("no answer" in line and "mindroom run" in line for line in printed), printed


async def test_a_streamed_answer_is_printed_once_with_its_final_text(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse: EmbeddedHomeserver, tmp_path: Path
) -> None:
    data_dir = await _local_chat(synapse, tmp_path)
    room = await _one_agent_room(bot, model)
    room_id = await human.join(f"#{room}:{synapse.server_name}")
    text = " ".join(f"word{i}" for i in range(40))
    model.push(Reply(text=text, chunks=20, chunk_delay=0.15))
    printed: list[str] = []
    assert await chat(data_dir, room, "tell me a lot", timeout=30, out=printed.append) == 0
    assert printed == [f"General: {text}"]
    # The positive control: the answer really was streamed, as a message and its edits.
    await human.fence(room_id)
    answer = next(e for e in human.posted(room_id, bot.bot.agents["general"].user_id))
    assert human.edits_of(answer["event_id"])


async def test_the_prompt_invites_an_agent_and_refuses_unknown_commands(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse: EmbeddedHomeserver, tmp_path: Path
) -> None:
    """The router's "not in this room" notice says /invite: the prompt can do it. A /word it
    does not know is not sent to the room as a message."""
    data_dir = await _local_chat(synapse, tmp_path)
    room = unique("talk")
    agents = {"general": {"role": "Helps.", "rooms": [room]}, "coder": {"role": "Codes."}}
    await bot.start(config_text(model.base_url, agents))
    room_id = await human.join(f"#{room}:{synapse.server_name}")
    assert bot.bot is not None
    coder = bot.bot.agents["coder"].user_id
    model.set_handler(lambda request: "Coder here.")
    terminal = Terminal()
    session = asyncio.create_task(
        chat(data_dir, room, None, out=terminal.printed.append, lines=terminal.lines())
    )
    await terminal.wait_printed("/invite")  # the help line names it
    await terminal.typed.put("/frobnicate now")
    await terminal.wait_printed("unknown command /frobnicate")
    await terminal.typed.put("/invite codr")  # a typo invites nobody, and says so
    await terminal.wait_printed("no account @mindroom_codr:")
    await terminal.typed.put("/invite coder")
    await terminal.wait_printed(f"invited {coder}")
    await human.wait_for(joined(coder, room_id))
    await terminal.typed.put("@coder are you here?")
    await terminal.wait_printed("Coder here.")
    await terminal.typed.put(None)
    assert await session == 0

    await human.fence(room_id)
    bodies = [e["content"].get("body", "") for e in human.messages(room_id)]
    assert "@coder are you here?" in bodies  # the control: lines typed do reach the room
    assert not any("frobnicate" in body for body in bodies)


async def test_a_one_shot_answered_only_by_an_error_notice_exits_4(
    bot: BotHarness, human: Human, model: ScriptedModel, synapse: EmbeddedHomeserver, tmp_path: Path
) -> None:
    data_dir = await _local_chat(synapse, tmp_path)
    room = await _one_agent_room(bot, model)
    model.push(Reply(status=500, error_message="the model is down", retryable=False))
    printed: list[str] = []
    assert await chat(data_dir, room, "hello", timeout=30, out=printed.append) == 4
    assert any("the model is down" in line for line in printed), printed
    model.push("Fine now.")  # the control: a real answer exits 0
    assert await chat(data_dir, room, "hello again", timeout=30, out=printed.append) == 0
    assert any("Fine now." in line for line in printed), printed
