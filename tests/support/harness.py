"""Test harness: a human Matrix client, and the bot run in-process or as a subprocess.

Shared by the end-to-end tests and by ``bench/`` (which imports it), so both drive mindroom the
way a person would: over Matrix, through a real homeserver.
"""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nio

from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from mindroom.adapters.matrix.send import IN_PROGRESS_MARKER
from mindroom.app.bot import Bot, BotOptions
from mindroom.config import parse_config
from mindroom.store.ledger import Ledger
from mindroom.tasks import cancel_and_wait

Event = dict[str, Any]
_names = itertools.count(1)
# An event type no part of mindroom listens to: see Human.fence.
FENCE_EVENT = "org.mindroom.test.fence"
CONTROL_COMMAND = "!agents"
REPO = Path(__file__).resolve().parents[2]


def unique(prefix: str) -> str:
    """A name no other test in this session uses (rooms and human accounts are session-wide)."""
    return f"{prefix}{os.getpid()}x{next(_names)}"


async def client_api(
    client: nio.AsyncClient, method: str, path: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A raw client-server API call as ``client`` (what nio has no method for)."""
    headers = {"Authorization": f"Bearer {client.access_token}"}
    data = json.dumps(body) if body is not None else None
    response = await client.send(method, path, data, headers)
    try:
        return await response.json()
    finally:
        response.release()


async def encrypted_dm(human: Human, agent: str) -> str:
    """An end-to-end encrypted DM ``human`` opens with ``agent`` (once it joined): its ID."""
    created = await human.client.room_create(
        invite=[agent], is_direct=True, initial_state=[nio.EnableEncryptionBuilder().as_dict()]
    )
    assert isinstance(created, nio.RoomCreateResponse), created
    await human.wait_for(joined(agent, created.room_id))
    return created.room_id


DECRYPTED = "mindroom_test_decrypted"
"""Set on a recorded event that arrived encrypted (an encrypting Human decrypted it)."""


@dataclass
class Human:
    """A person with a Matrix client: sends messages and records everything they see."""

    client: nio.AsyncClient
    events: list[Event] = field(default_factory=list)
    _sync: asyncio.Task[None] | None = None
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def user_id(self) -> str:
        return self.client.user_id

    @classmethod
    async def create(
        cls,
        homeserver: EmbeddedHomeserver,
        name: str | None = None,
        *,
        keys: Path | None = None,
        sync: bool = True,
    ) -> Human:
        """Register a fresh account, log in and start syncing; with ``keys`` (a folder for
        the key store) the client encrypts, as Element does. With ``sync=False`` it only sends
        (it sees no events: another person in the room watches for the answers)."""
        username = name or unique("human")
        await homeserver.register_user(username, "secret-pw")
        if keys is not None:
            os.makedirs(keys, exist_ok=True)
            config = nio.AsyncClientConfig(encryption_enabled=True, pickle_key="test-key")
            client = nio.AsyncClient(homeserver.url, username, store_path=str(keys), config=config)
        else:
            client = nio.AsyncClient(
                homeserver.url, username, config=nio.AsyncClientConfig(encryption_enabled=False)
            )
        response = await client.login("secret-pw")
        assert isinstance(response, nio.LoginResponse), response
        human = cls(client)
        if not sync:
            return human
        await client.sync(timeout=0)
        client.add_event_callback(human._record, nio.Event)
        client.add_ephemeral_callback(human._record_typing, nio.TypingNoticeEvent)
        client.add_ephemeral_callback(human._record_receipts, nio.ReceiptEvent)
        # a large timeline limit: a test must see every event even when its sync lags behind;
        # uploaded once, as clients do (Synapse checks an inline filter at every sync)
        uploaded = await client.upload_filter(room={"timeline": {"limit": 1000}})
        assert isinstance(uploaded, nio.UploadFilterResponse), uploaded
        human._sync = asyncio.create_task(
            client.sync_forever(timeout=30_000, sync_filter=uploaded.filter_id)
        )
        return human

    async def _record(self, room: nio.MatrixRoom, event: nio.Event) -> None:
        source = dict(event.source)
        source["room_id"] = room.room_id
        if getattr(event, "decrypted", False):
            source[DECRYPTED] = True  # it arrived encrypted and this client decrypted it
        self.events.append(source)
        self._arrived.set()

    async def _record_typing(self, room: nio.MatrixRoom, event: nio.TypingNoticeEvent) -> None:
        self.events.append(
            {"type": "m.typing", "room_id": room.room_id, "content": {"user_ids": event.users}}
        )
        self._arrived.set()

    async def _record_receipts(self, room: nio.MatrixRoom, event: nio.ReceiptEvent) -> None:
        for receipt in event.receipts:
            self.events.append(
                {
                    "type": "m.receipt",
                    "room_id": room.room_id,
                    "event_id": receipt.event_id,
                    "sender": receipt.user_id,
                    "receipt_type": receipt.receipt_type,
                    "content": {"thread_id": getattr(receipt, "thread_id", None)},
                }
            )
        self._arrived.set()

    async def join(self, room: str) -> str:
        """Join by alias or ID; returns the room ID."""
        response = await self.client.join(room)
        assert isinstance(response, nio.JoinResponse), response
        return response.room_id

    async def send(
        self,
        room_id: str,
        body: str,
        *,
        mention: list[str] | None = None,
        thread_root: str | None = None,
        msgtype: str = "m.text",
        extra: dict[str, Any] | None = None,
    ) -> str:
        """Send a message (optionally mentioning user IDs, optionally in a thread)."""
        content: dict[str, Any] = {"msgtype": msgtype, "body": body}
        if mention is not None:
            content["m.mentions"] = {"user_ids": mention}
        if thread_root:
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": thread_root,
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": thread_root},
            }
        content.update(extra or {})
        response = await self.client.room_send(
            room_id, "m.room.message", content, ignore_unverified_devices=True
        )
        assert isinstance(response, nio.RoomSendResponse), response
        return response.event_id

    async def react(self, room_id: str, event_id: str, key: str) -> str:
        """React ``key`` to ``event_id`` (encrypted where the room is); the reaction's ID."""
        relates = {"rel_type": "m.annotation", "event_id": event_id, "key": key}
        response = await self.client.room_send(
            room_id, "m.reaction", {"m.relates_to": relates}, ignore_unverified_devices=True
        )
        assert isinstance(response, nio.RoomSendResponse), response
        return response.event_id

    def messages(self, room_id: str, sender: str | None = None) -> list[Event]:
        """Every m.room.message seen in ``room_id`` (from ``sender`` when given)."""
        return [
            e
            for e in self.events
            if e.get("type") == "m.room.message"
            and e["room_id"] == room_id
            and (sender is None or e.get("sender") == sender)
        ]

    async def wait_for(self, predicate: Callable[[Event], bool], timeout: float = 20.0) -> Event:
        """The first event (already seen or arriving) that satisfies ``predicate``."""
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for event in self.events[seen:]:
                if predicate(event):
                    return event
            seen = len(self.events)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no matching event; saw:\n" + self._summary())
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), remaining)

    async def wait_for_reply(self, room_id: str, to_event: str, timeout: float = 60.0) -> Event:
        """The first message answering ``to_event``, with its final content once streamed.

        The wait is a bound on failure, not a speed check (those are in bench/): a first turn
        that loads the embedding model in a process starved at load 7 took more than 20 s.

        A streamed reply arrives with an in-progress marker and is then edited; the returned
        event carries the content of the final edit (and the original's relation), and the
        original content under ``first_content``.
        """
        reply = await self.wait_for(
            lambda e: (
                e["room_id"] == room_id
                and e.get("type") == "m.room.message"
                and e.get("sender") != self.user_id
                and answers(e, to_event)
            ),
            timeout,
        )
        return await self.final(reply, timeout)

    async def final(self, message: Event, timeout: float = 20.0) -> Event:
        """``message`` with the content of its final edit (no in-progress marker)."""
        if not message["content"].get("body", "").endswith(IN_PROGRESS_MARKER):
            return message
        edit = await self.wait_for(
            lambda e: (
                relation(e).get("rel_type") == "m.replace"
                and relation(e).get("event_id") == message["event_id"]
                and not e["content"]["m.new_content"]["body"].endswith(IN_PROGRESS_MARKER)
            ),
            timeout,
        )
        content = dict(edit["content"]["m.new_content"])
        if "m.relates_to" in message["content"]:
            content["m.relates_to"] = message["content"]["m.relates_to"]
        return {**message, "content": content, "first_content": message["content"]}

    def edits_of(self, event_id: str) -> list[Event]:
        """Every edit of ``event_id`` seen so far, in order."""
        return [
            e
            for e in self.events
            if relation(e).get("rel_type") == "m.replace"
            and relation(e).get("event_id") == event_id
        ]

    def posted(self, room_id: str, sender: str) -> list[Event]:
        """Messages ``sender`` posted in ``room_id``, edits left out."""
        return [
            e for e in self.messages(room_id, sender) if relation(e).get("rel_type") != "m.replace"
        ]

    async def fence(self, room_id: str, timeout: float = 20.0) -> None:
        """Return once this client has seen every event posted in ``room_id`` before the call.

        Sends an event of a type no bot reads and waits for its own echo: the homeserver orders
        a room's events, so whatever was posted before the fence has arrived when it does.
        """
        response = await self.client.room_send(room_id, FENCE_EVENT, {"fence": next(_names)})
        assert isinstance(response, nio.RoomSendResponse), response
        await self.wait_for(lambda e: e.get("event_id") == response.event_id, timeout)

    def _summary(self) -> str:
        return "\n".join(
            f"  {e.get('sender')} {e.get('type')} {json.dumps(e.get('content'))[:160]}"
            for e in self.events[-15:]
        )

    async def close(self) -> None:
        if self._sync:
            await cancel_and_wait(self._sync)
        await self.client.close()


# The state event that makes a room end-to-end encrypted (what Element creates DMs with).
ENCRYPTION_STATE = {
    "type": "m.room.encryption",
    "state_key": "",
    "content": {"algorithm": "m.megolm.v1.aes-sha2"},
}


def joined(user_id: str, room_id: str) -> Callable[[Event], bool]:
    """A predicate for :meth:`Human.wait_for`: ``user_id`` joined ``room_id``."""
    return lambda e: (
        e.get("type") == "m.room.member"
        and e.get("room_id") == room_id
        and e.get("state_key") == user_id
        and e["content"].get("membership") == "join"
    )


def relation(event: Event) -> dict[str, Any]:
    return (event.get("content") or {}).get("m.relates_to") or {}


def answers(event: Event, to_event: str) -> bool:
    """True when ``event`` is in the thread of, or replies to, ``to_event``."""
    rel = relation(event)
    if rel.get("rel_type") == "m.replace":
        return False
    return (
        rel.get("event_id") == to_event
        or (rel.get("m.in_reply_to") or {}).get("event_id") == to_event
    )


def config_text(model_url: str, agents: dict[str, dict[str, Any]], **sections: Any) -> str:
    """A config.yaml for tests: one scripted model ``default`` and the given agents.

    The background memory flush is off unless a test configures ``memory`` itself: its
    extraction turns would otherwise interleave with the requests a test asserts on. So is the
    local embedder (memory search is keyword-only) unless the test configures ``memory``, and
    so is scheduled maintenance (a test running at a job's window would consolidate its memory).
    """
    doc: dict[str, Any] = {
        "models": {
            "default": {
                "provider": "openai",
                "id": "scripted",
                "base_url": model_url,
                "api_key": "test",
                "max_retries": 0,
                "timeout_seconds": 20,
            },
        },
        "agents": agents,
        # keyword-only: a bot process loading the local embedder in the background costs each
        # test seconds of CPU; the tests of semantic search ask for it (memory=...)
        "memory": {
            "auto_flush": {"enabled": False},
            "embedder": "none",
            "maintenance": {"enabled": False},
        },
    }
    doc.update(sections)
    return json.dumps(doc, indent=2)  # JSON is YAML


class CredentialCache:
    """Agent accounts live as long as the session's homeserver; so must their passwords.

    Each test has its own storage; the cache copies the saved credentials in before a bot starts
    and back after it stops, so ``@mindroom_general`` is one account for the whole session.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def keys(self) -> Path:
        """The accounts' encryption key stores (a device is only reused with its keys)."""
        return self.path.parent / "crypto"

    def install(self, storage: Path) -> None:
        target = storage / "mindroom_data" / "credentials.json"
        if self.path.exists() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(self.path, target)
            target.chmod(0o600)
            if self.keys.exists():
                shutil.copytree(self.keys, target.parent / "crypto", dirs_exist_ok=True)

    def collect(self, storage: Path, *, keys: bool = False) -> None:
        """Keep the storage's credentials (and, once its bot stopped, ``keys``: its key
        stores) for the next test."""
        source = storage / "mindroom_data" / "credentials.json"
        if not source.exists():
            return
        if keys and (source.parent / "crypto").exists():
            shutil.copytree(source.parent / "crypto", self.keys, dirs_exist_ok=True)
        merged: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            merged = json.loads(self.path.read_text())
        for homeserver, users in json.loads(source.read_text()).items():
            merged.setdefault(homeserver, {}).update(users)
        self.path.write_text(json.dumps(merged))


@dataclass
class BotHarness:
    """Write a config into a storage folder and run mindroom on it, in-process."""

    homeserver: EmbeddedHomeserver
    storage: Path
    credentials: CredentialCache
    bot: Bot | None = None

    def write_config(self, text: str) -> Path:
        self.storage.mkdir(parents=True, exist_ok=True)
        path = self.storage / "config.yaml"
        path.write_text(text)
        return path

    async def start(self, config: str | None = None) -> Bot:
        if config is not None:
            self.write_config(config)
        text = (self.storage / "config.yaml").read_text()
        self.credentials.install(self.storage)
        bot = Bot(
            parse_config(text, "config.yaml"),
            BotOptions(
                self.storage,
                self.homeserver.url,
                self.homeserver.shared_secret,
                config_path=self.storage / "config.yaml",
            ),
        )
        self.bot = bot
        try:
            await bot.start()
        finally:
            self.credentials.collect(self.storage)
        return bot

    async def start_in_room(self, config: str, room: str, human: Human) -> str:
        """Start with ``config`` and have ``human`` join configured room ``room``."""
        await self.start(config)
        return await human.join(f"#{room}:{self.homeserver.server_name}")

    async def settle(self, human: Human, room_id: str, timeout: float = 30.0) -> Event:
        """The positive control behind every "nothing else was answered" assertion.

        ``human`` sends a command that must be answered (``!agents``, which needs no model) and
        waits for its answer; see :func:`settle` for why, after that, anything the bot was going
        to post about earlier events has been posted and seen. Returns the control's answer.
        """
        return await settle(human, room_id, self.storage, timeout)

    async def stop(self) -> None:
        if self.bot is not None:
            with stack_dump_after(STOP_DUMP_S, "Bot.stop"):
                await self.bot.stop()
            self.credentials.collect(self.storage, keys=True)
            self.bot = None


STOP_DUMP_S = 60.0  # a stop this slow is a hang: say where everything waits


def _dump_tasks(what: str) -> None:
    print(f"--- {what} still running after {STOP_DUMP_S:.0f} s; its tasks:", file=sys.stderr)
    for task in asyncio.all_tasks():
        print(f"task {task.get_name()}:", file=sys.stderr)
        task.print_stack(file=sys.stderr)


@contextlib.contextmanager
def stack_dump_after(seconds: float, what: str) -> Iterator[None]:
    """Write every thread's and task's stack to stderr (the test's report) if the block is
    still running after ``seconds``: a teardown that hangs says where, not just "timeout"."""
    handle = asyncio.get_running_loop().call_later(seconds, _dump_tasks, what)
    faulthandler.dump_traceback_later(seconds, exit=False, file=sys.__stderr__)  # fd 2
    try:
        yield
    finally:
        handle.cancel()
        faulthandler.cancel_dump_traceback_later()


async def settle(human: Human, room_id: str, storage: Path, timeout: float = 30.0) -> Event:
    """Send a control command that must be answered and wait until the bot has gone quiet.

    Three conditions, each waited for, never slept on:

    1. the control's answer arrived: every account reads a room's events in order, so each
       event sent before the control has been read and routed (an event that was going to be
       answered has been claimed in the ledger by then: claims are queued in order too);
    2. the ledger (``<storage>/mindroom_data/ledger.db``) holds no claimed, unfinished event:
       every reply, edit and hand-off started for an earlier event has been sent (a hand-off is
       claimed before the turn that caused it finishes);
    3. ``human`` has seen everything posted in the room so far (:meth:`Human.fence`).

    Works for the in-process bot and for a bot process alike (it reads the ledger file). The
    control is a human message in the room's main timeline: like any, it resets the agent-hop
    count there (not in threads), and the router's notice answering it is in the room.
    """
    deadline = time.monotonic() + timeout
    control = await human.send(room_id, CONTROL_COMMAND)
    answer = await human.wait_for_reply(room_id, control, timeout)
    await wait_until_ledger_idle(storage / "mindroom_data" / "ledger.db", deadline)
    await human.fence(room_id, max(deadline - time.monotonic(), 1.0))
    return answer


async def wait_until_ledger_idle(path: Path, deadline: float) -> None:
    """Poll the ledger until no claimed event is unfinished (raises TimeoutError at deadline)."""
    ledger = await Ledger.open(path)
    try:
        while pending := await ledger.pending(newer_than=0):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the bot is still answering {[p.event_id for p in pending]}")
            await asyncio.sleep(0.05)
    finally:
        await ledger.close()


@dataclass
class BotProcess:
    """mindroom as a real process (``python -m mindroom run``), for restarts and kill -9."""

    homeserver: EmbeddedHomeserver
    storage: Path
    credentials: CredentialCache
    proc: subprocess.Popen[bytes] | None = None
    command_prefix: tuple[str, ...] = ()  # e.g. ("prlimit", "--nofile=160:160")
    # one dashboard port would be contended by runs that overlap: on only where a test asks
    run_options: tuple[str, ...] = ("--no-dashboard",)
    log_name: str = "bot.log"  # several processes on one storage: a log each

    def start(self) -> None:
        self.credentials.install(self.storage)
        env = dict(os.environ)
        env.update(
            MATRIX_HOMESERVER=self.homeserver.url,
            MATRIX_REGISTRATION_SHARED_SECRET=self.homeserver.shared_secret,
            AGNO_TELEMETRY="false",
        )
        log = (self.storage / self.log_name).open("ab")
        self.proc = subprocess.Popen(
            [
                *self.command_prefix,
                sys.executable,
                "-m",
                "mindroom",
                "run",
                "--config",
                str(self.storage / "config.yaml"),
                *self.run_options,
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.storage,
        )
        log.close()

    async def wait_running(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        log = self.storage / self.log_name
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError("bot exited:\n" + log.read_text()[-3000:])
            if log.exists() and "mindroom is running" in log.read_text().split("===")[-1]:
                self.credentials.collect(self.storage)
                return
            await asyncio.sleep(0.1)
        raise TimeoutError("bot did not start:\n" + log.read_text()[-3000:])

    async def settle(self, human: Human, room_id: str, timeout: float = 30.0) -> Event:
        """As :meth:`BotHarness.settle`, for the bot process."""
        return await settle(human, room_id, self.storage, timeout)

    def mark_log(self) -> None:
        with (self.storage / self.log_name).open("a") as handle:
            handle.write("\n===\n")

    async def stop(self, sig: int = signal.SIGTERM) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        code = await asyncio.to_thread(self.proc.wait, 30)
        self.credentials.collect(self.storage, keys=True)
        self.proc = None
        return code


def write_entries(root: Path, relative: str, lines: list[str]) -> Path:
    """A memory file at ``root/relative`` holding one ``- line`` entry per line, as a person
    would type them."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"- {line}\n" for line in lines))
    return path


def repo_config(folder: Path) -> Path:
    """A copy of the repository's config.yaml (a shared ``general``, a private ``mind``) and its
    ``mind_template`` in ``folder``; the config's path."""
    repo = Path(__file__).resolve().parents[2]
    path = folder / "config.yaml"
    shutil.copy(repo / "config.yaml", path)
    shutil.copytree(repo / "mind_template", folder / "mind_template")
    return path
