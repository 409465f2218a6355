"""``mindroom chat``: a small terminal Matrix client for the local human account.

It logs in with the credentials ``mindroom run --local`` saved, joins the room by alias, sends a
message (or reads lines from a prompt) and prints the answers to what it sent: messages in its
threads or replying to its own events, each answer's final text once (a streamed answer is
printed when its last edit drops the in-progress marker). Nothing else in the room is printed,
so running it again never shows earlier replies. At the prompt every line continues one thread,
so the agent has the conversation's history; ``/new`` starts another, ``/room NAME`` switches,
``/invite NAME`` brings an agent into the room (what the router's "not in this room" notice asks
for), ``/help`` lists these; any other ``/word`` is refused, not sent (``//`` sends a leading
``/``).
A one-shot message whose only answers are error notices exits 4, so scripts see the failure.
Before each message it asks ``bot_check`` whether a ``mindroom run`` is there to answer (the CLI
tests the storage's run lock, :mod:`mindroom.app.runlock`): a one-shot message is then not sent at
all, a line at the prompt is held back, each line asked anew, so a bot started meanwhile answers
the next one. It is deliberately tiny: it is for trying mindroom out, not a client.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import nio

from mindroom.adapters.matrix.accounts import login_account
from mindroom.adapters.matrix.local import local_user_store
from mindroom.adapters.matrix.send import IN_PROGRESS_MARKER, message_content
from mindroom.app.runlock import NOT_RUNNING_EXIT
from mindroom.errors import MatrixError, NotRunningError
from mindroom.invocation import README_COMMAND, invoked_as
from mindroom.tasks import within

QUIET_AFTER_REPLY_S = 3.0
PROBE_TIMEOUT_S = 5.0
HELP = (
    "Each line continues one thread; /new starts another, /room NAME switches, "
    "/invite AGENT brings an agent in, /help shows this, Ctrl-D quits."
)
ERROR_ANSWER_EXIT = 4  # a one-shot message got only error notices (a model failed, ...)
AGENT_PREFIX = "mindroom_"
_NOT_RUNNING = f"is '{README_COMMAND} run' running? Its log says why no agent answered"
_BUFFERED_EVENTS = 500  # events that arrived before the send that they answer returned


def _homeserver_and_user(data_dir: Path, start: str) -> tuple[str, str]:
    store = local_user_store(data_dir)
    for homeserver, localpart in store.accounts():
        return homeserver, localpart
    raise MatrixError(f"no local user in {store.path}: start the bot with '{start}' first")


async def _check_reachable(homeserver: str, start: str) -> None:
    """Fail within seconds when the homeserver does not answer (nio would retry forever)."""
    timeout = aiohttp.ClientTimeout(total=PROBE_TIMEOUT_S)
    try:
        async with (
            aiohttp.ClientSession(timeout=timeout) as session,
            session.get(f"{homeserver}/_matrix/client/versions") as response,
        ):
            if response.status == 200:
                return
            reason = f"HTTP {response.status}"
    except (aiohttp.ClientError, TimeoutError) as exc:
        reason = str(exc) or type(exc).__name__
    raise MatrixError(
        f"cannot reach the homeserver at {homeserver} ({reason}): is '{start}' running?"
    )


class _Answers:
    """Picks the answers to this chat's own messages out of everything the room shows.

    An answer is a message in a thread rooted at one of our events or replying to one; its
    edits are followed until the text is final, which is queued once. Events can arrive before
    the send they answer has returned its event id, so unmatched ones are kept (boundedly) and
    looked at again when :meth:`sent` learns a new id.
    """

    def __init__(self, user_id: str) -> None:
        self.user_id = user_id
        self.own: set[str] = set()
        self.answered: set[str] = set()  # own events that got an answer
        self.threaded: set[str] = set()  # own events answered inside a thread under them
        self.streaming: set[str] = set()  # answers whose final text has not come yet
        self.done: set[str] = set()
        self.errors = 0  # answers that were error notices
        self.queue = asyncio.Queue[str]()
        self._unmatched: deque[tuple[nio.MatrixRoom, dict[str, Any]]] = deque(
            maxlen=_BUFFERED_EVENTS
        )

    def sent(self, event_id: str) -> None:
        self.own.add(event_id)
        waiting = list(self._unmatched)
        self._unmatched.clear()
        for room, source in waiting:
            self.seen(room, source)

    def seen(self, room: nio.MatrixRoom, source: dict[str, Any]) -> None:
        if source.get("sender") == self.user_id or source.get("type") != "m.room.message":
            return
        content = source.get("content") or {}
        relation = content.get("m.relates_to") or {}
        if relation.get("rel_type") == "m.replace":
            answer = str(relation.get("event_id"))
            if answer in self.done:
                return
            if answer not in self.streaming:
                self._unmatched.append((room, source))
                return
            content = content.get("m.new_content") or {}
        else:
            answer = str(source.get("event_id"))
            if answer in self.done or answer in self.streaming:
                return
            reply_to = (relation.get("m.in_reply_to") or {}).get("event_id")
            root = relation.get("event_id") if relation.get("rel_type") == "m.thread" else None
            ours = [e for e in (root, reply_to) if e in self.own]
            if not ours:
                self._unmatched.append((room, source))
                return
            self.answered.update(ours)
            if root in self.own:
                self.threaded.add(root)
        body = str(content.get("body", ""))
        if body.endswith(IN_PROGRESS_MARKER):
            self.streaming.add(answer)
            return
        self.streaming.discard(answer)
        self.done.add(answer)
        if content.get("msgtype") == "m.notice" and body.startswith("⚠️"):
            self.errors += 1
        name = room.user_name(source["sender"]) or source["sender"]
        self.queue.put_nowait(f"{name}: {body}")


async def _lines_from_stdin() -> AsyncIterator[str]:
    while line := await asyncio.to_thread(sys.stdin.readline):
        yield line


async def chat(
    data_dir: Path,
    room: str,
    message: str | None,
    *,
    timeout: float = 60.0,
    out: Callable[[str], None] = print,
    lines: AsyncIterator[str] | None = None,
    bot_check: Callable[[], None] = lambda: None,
    start_command: str = "",
) -> int:
    """Send ``message`` (or prompt for ``lines``, stdin by default, when None) to ``room`` and
    print the answers. Returns 1 when a one-shot message got no answer within ``timeout``, 3
    when a line at the prompt was held back because ``bot_check`` raised NotRunningError (for a
    one-shot message the error propagates: nothing was sent)."""
    start = start_command or f"{invoked_as()} run --local"  # what the hints tell to run
    homeserver, localpart = _homeserver_and_user(data_dir, start)
    await _check_reachable(homeserver, start)
    if message is not None:
        bot_check()  # before logging in: says so within seconds, sends nothing
    client = await login_account(
        homeserver,
        localpart,
        local_user_store(data_dir),
        device_name="mindroom chat",
        encrypt=False,  # the configured rooms it talks in are not encrypted
    )
    try:
        await client.sync(timeout=0, full_state=True)  # skip the history: only new events count
        answers = _Answers(client.user_id)

        async def on_message(matrix_room: nio.MatrixRoom, event: nio.RoomMessage) -> None:
            answers.seen(matrix_room, event.source)

        client.add_event_callback(on_message, nio.RoomMessage)
        sync_task = asyncio.create_task(client.sync_forever(timeout=30_000))
        try:
            room_id, alias = await _join(client, room)
            if message is not None:
                return await _send_and_wait(client, room_id, message, answers, timeout, out)
            out(f"Talking in {alias} as {client.user_id}. {HELP}")
            try:
                bot_check()  # said when the prompt opens; each line asks again
            except NotRunningError as exc:
                out(f"({exc}; lines are not sent until it runs)")
            return await _prompt(client, room_id, answers, timeout, out, lines, bot_check)
        finally:
            sync_task.cancel()
            await asyncio.gather(sync_task, return_exceptions=True)
    finally:
        await client.close()


async def _join(client: nio.AsyncClient, room: str) -> tuple[str, str]:
    server_name = client.user_id.split(":", 1)[1]
    alias = room if room.startswith(("#", "!")) else f"#{room}:{server_name}"
    joined = await client.join(alias)
    if not isinstance(joined, nio.JoinResponse):
        raise MatrixError(f"cannot join {alias}: {joined.message}")
    return joined.room_id, alias


async def _send(client: nio.AsyncClient, room_id: str, content: dict[str, Any]) -> str:
    sent = await client.room_send(room_id, "m.room.message", content)
    if not isinstance(sent, nio.RoomSendResponse):
        raise MatrixError(f"cannot send: {sent.message}")
    return sent.event_id


async def _send_and_wait(
    client: nio.AsyncClient,
    room_id: str,
    message: str,
    answers: _Answers,
    timeout: float,
    out: Callable[[str], None],
) -> int:
    answers.sent(await _send(client, room_id, message_content(message)))
    try:
        out(await within(answers.queue.get(), timeout))
    except TimeoutError:
        out(f"(no answer within {timeout:.0f} s: {_NOT_RUNNING})")
        return 1
    await _drain(answers, out, QUIET_AFTER_REPLY_S, timeout)
    return ERROR_ANSWER_EXIT if answers.errors == len(answers.done) else 0


def invitee(name: str, server_name: str) -> str:
    """The Matrix ID ``/invite NAME`` means: an agent's name, an @localpart or a full ID."""
    name = name.strip().removeprefix("@")
    if ":" in name:
        return f"@{name}"
    return f"@{name if name.startswith(AGENT_PREFIX) else AGENT_PREFIX + name}:{server_name}"


async def _invite(client: nio.AsyncClient, room_id: str, name: str) -> str:
    user_id = invitee(name, client.user_id.split(":", 1)[1])
    profile = await client.get_profile(user_id)
    if isinstance(profile, nio.ProfileGetError):  # a typo would otherwise "invite" nobody
        return f"(no account {user_id} on this homeserver: is {name.strip()!r} in config.yaml?)"
    invited = await client.room_invite(room_id, user_id)
    if not isinstance(invited, nio.RoomInviteResponse):
        return f"(cannot invite {user_id}: {invited.message})"
    return f"(invited {user_id}; an agent in mindroom's config joins within seconds)"


@dataclass
class _Conversation:
    """Where the terminal chat's next line goes: the room, and the first event of the current
    conversation (None: the next line starts one)."""

    client: nio.AsyncClient
    room_id: str
    out: Callable[[str], None]
    root: str | None = None

    async def command(self, line: str) -> str | None:
        """Carry out ``line`` if it is one of the chat's own commands (None: it was); else the
        text to send (``//x`` sends ``/x``)."""
        if line == "/new":
            self.root = None
            self.out("(new conversation)")
            return None
        command, _, argument = line.partition(" ")
        if command == "/invite" and argument.strip():
            self.out(await _invite(self.client, self.room_id, argument))
            return None
        if command == "/room":
            await self._switch(argument.strip())
            return None
        if line.startswith("//"):
            return line[1:]  # a line that begins with "/" on purpose
        if line.startswith("/"):
            known = command in ("/help", "/invite")
            self.out(HELP if known else f"(unknown command {command}: not sent. {HELP})")
            return None
        return line

    async def _switch(self, name: str) -> None:
        if not name:
            self.out(HELP)
            return
        try:
            self.room_id, alias = await _join(self.client, name)
        except MatrixError as exc:
            self.out(f"({exc})")
            return
        self.root = None
        self.out(f"(now in {alias})")

    async def send(self, line: str, answers: _Answers) -> str:
        """Send ``line``; the conversation continues in the first line's thread unless the
        agent answered it in the room's timeline (a DM in room mode): then the timeline is the
        history."""
        in_room_mode = self.root in answers.answered and self.root not in answers.threaded
        in_thread = self.root is not None and not in_room_mode
        content = message_content(line, thread_root=self.root if in_thread else None)
        event_id = await _send(self.client, self.room_id, content)
        answers.sent(event_id)
        self.root = self.root or event_id
        return event_id


async def _prompt(
    client: nio.AsyncClient,
    room_id: str,
    answers: _Answers,
    timeout: float,
    out: Callable[[str], None],
    lines: AsyncIterator[str] | None,
    bot_check: Callable[[], None],
) -> int:
    printer = asyncio.create_task(_drain(answers, out, None, None))
    watchers: set[asyncio.Task[None]] = set()
    conversation = _Conversation(client, room_id, out)
    held_back = False
    try:
        async for raw in lines if lines is not None else _lines_from_stdin():
            line = await conversation.command(raw.strip()) if raw.strip() else None
            if line is None:
                continue
            try:
                bot_check()  # every line: a bot started since the last one answers this one
            except NotRunningError as exc:
                out(f"({exc}; this line was not sent)")
                held_back = True
                continue
            event_id = await conversation.send(line, answers)
            watcher = asyncio.create_task(_watch(answers, event_id, timeout, out))
            watchers.add(watcher)
            watcher.add_done_callback(watchers.discard)
        printer.cancel()
        await asyncio.gather(printer, return_exceptions=True)
        if answers.streaming or answers.own - answers.answered:
            await _drain(answers, out, QUIET_AFTER_REPLY_S, timeout)  # let late answers print
        return NOT_RUNNING_EXIT if held_back else 0
    finally:
        for task in (printer, *watchers):
            task.cancel()
        await asyncio.gather(printer, *watchers, return_exceptions=True)


async def _watch(
    answers: _Answers, event_id: str, timeout: float, out: Callable[[str], None]
) -> None:
    """Say so at the prompt when a line got no answer within ``timeout``."""
    await asyncio.sleep(timeout)
    if event_id not in answers.answered:
        out(f"(no answer within {timeout:.0f} s: {_NOT_RUNNING})")


async def _drain(
    answers: _Answers, out: Callable[[str], None], quiet: float | None, limit: float | None
) -> None:
    """Print answers until none has come for ``quiet`` seconds (forever when None); an answer
    still being written is waited for, up to ``limit`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = None if limit is None else loop.time() + limit
    while True:
        try:
            out(await within(answers.queue.get(), quiet))
        except TimeoutError:
            if not answers.streaming or (deadline is not None and loop.time() > deadline):
                return
