"""``mindroom chat``: a small terminal Matrix client for the local human account.

It logs in with the credentials ``mindroom run --local`` saved, joins the room by alias, sends a
message (or reads lines from a prompt) and prints what others post in the room, threads
included, as it arrives. It is deliberately tiny: it is for trying mindroom out, not a client.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

import nio

from mindroom.errors import MatrixError
from mindroom.matrix.accounts import login_account
from mindroom.matrix.local import local_user_store
from mindroom.matrix.send import IN_PROGRESS_MARKER, message_content

QUIET_AFTER_REPLY_S = 3.0


def _homeserver_and_user(data_dir: Path) -> tuple[str, str]:
    store = local_user_store(data_dir)
    for homeserver, localpart in store.accounts():
        return homeserver, localpart
    raise MatrixError(
        f"no local user in {store.path}: start the bot with 'mindroom run --local' first"
    )


async def chat(
    data_dir: Path,
    room: str,
    message: str | None,
    *,
    timeout: float = 120.0,
    out: Callable[[str], None] = print,
) -> int:
    """Send ``message`` (or prompt for lines when None) to ``room`` and print the replies."""
    homeserver, localpart = _homeserver_and_user(data_dir)
    client = await login_account(
        homeserver, localpart, local_user_store(data_dir), device_name="mindroom chat"
    )
    try:
        server_name = client.user_id.split(":", 1)[1]
        alias = room if room.startswith(("#", "!")) else f"#{room}:{server_name}"
        joined = await client.join(alias)
        if not isinstance(joined, nio.JoinResponse):
            raise MatrixError(f"cannot join {alias}: {joined.message}")
        room_id = joined.room_id
        await client.sync(timeout=0, full_state=True)
        replies = asyncio.Queue[str]()
        streaming: set[str] = set()  # answers still being written

        async def on_message(matrix_room: nio.MatrixRoom, event: nio.RoomMessage) -> None:
            if matrix_room.room_id != room_id or event.sender == client.user_id:
                return
            content = event.source.get("content", {})
            relation = content.get("m.relates_to") or {}
            if relation.get("rel_type") == "m.replace":
                # A streamed answer is complete when an edit drops the in-progress marker.
                original = relation.get("event_id")
                content = content.get("m.new_content") or {}
                if original not in streaming:
                    return
            else:
                original = event.event_id
            body = str(content.get("body", ""))
            if body.endswith(IN_PROGRESS_MARKER):
                streaming.add(original)
                return
            streaming.discard(original)
            name = matrix_room.user_name(event.sender) or event.sender
            await replies.put(f"{name}: {body}")

        client.add_event_callback(on_message, nio.RoomMessage)
        sync_task = asyncio.create_task(client.sync_forever(timeout=30_000))
        try:
            if message is not None:
                return await _send_and_wait(client, room_id, message, replies, timeout, out)
            out(f"Talking in {alias} as {client.user_id}. Ctrl-D to quit.")
            printer = asyncio.create_task(_drain(replies, out, None))
            try:
                while line := await asyncio.to_thread(sys.stdin.readline):
                    if line.strip():
                        await client.room_send(
                            room_id, "m.room.message", message_content(line.strip())
                        )
                await asyncio.sleep(QUIET_AFTER_REPLY_S)  # let late replies print
                return 0
            finally:
                printer.cancel()
                await asyncio.gather(printer, return_exceptions=True)
        finally:
            sync_task.cancel()
            await asyncio.gather(sync_task, return_exceptions=True)
    finally:
        await client.close()


async def _send_and_wait(
    client: nio.AsyncClient,
    room_id: str,
    message: str,
    replies: asyncio.Queue[str],
    timeout: float,
    out: Callable[[str], None],
) -> int:
    sent = await client.room_send(room_id, "m.room.message", message_content(message))
    if not isinstance(sent, nio.RoomSendResponse):
        raise MatrixError(f"cannot send: {sent.message}")
    try:
        out(await asyncio.wait_for(replies.get(), timeout))
    except TimeoutError:
        out(f"(no reply within {timeout:.0f} s)")
        return 1
    await _drain(replies, out, QUIET_AFTER_REPLY_S)
    return 0


async def _drain(
    replies: asyncio.Queue[str], out: Callable[[str], None], quiet: float | None
) -> None:
    """Print replies until none has come for ``quiet`` seconds (forever when None)."""
    while True:
        try:
            out(await asyncio.wait_for(replies.get(), quiet))
        except TimeoutError:
            return
