"""A bot that does no work, for ``reply_latency.py``: it answers every "null ..." message at once
(a plain reply), and every "shaped ..." one as mindroom answers (a thread reply with HTML and a
mention of the asker, made by mindroom's own ``message_content``).

Run as its own process, as mindroom is, with two logged-in accounts: the one that answers and
an idle one that only polls, as mindroom's router does where an agent hears each of its rooms
(it rests: ``MatrixAccount.rest_when``). What a reply costs through it is the homeserver's part
of a reply: two hops and the room's syncs, no bot work.

    python bench/null_bot.py HOMESERVER_URL ANSWERER_ID ANSWERER_TOKEN IDLE_ID IDLE_TOKEN

Prints "ready" once both accounts have synced; runs until killed.
"""

from __future__ import annotations

import asyncio
import sys

import nio

from mindroom.adapters.matrix.client import REST_POLL_S
from mindroom.adapters.matrix.send import message_content


def client(url: str, user_id: str, token: str) -> nio.AsyncClient:
    account = nio.AsyncClient(url, user_id, config=nio.AsyncClientConfig(encryption_enabled=False))
    account.restore_login(user_id, "NULLBOT", token)
    return account


async def main(url: str, answerer_id: str, answerer_token: str, idle_id: str, idle_token: str):
    answerer, idle = client(url, answerer_id, answerer_token), client(url, idle_id, idle_token)
    for account in (answerer, idle):
        await account.sync(timeout=0)  # from now on: no backlog

    async def answer(room: nio.MatrixRoom, event: nio.RoomMessageText) -> None:
        if event.sender == answerer_id:
            return
        if event.body.startswith("null "):
            content = {
                "msgtype": "m.text",
                "body": f"re: {event.body}",
                "m.relates_to": {"m.in_reply_to": {"event_id": event.event_id}},
            }
        elif event.body.startswith("shaped "):  # as mindroom answers: a thread, HTML, a mention
            content = message_content(
                f"re: {event.body}",
                thread_root=event.event_id,
                reply_to=event.event_id,
                mentions=[event.sender],
            )
        else:
            return
        await answerer.room_send(room.room_id, "m.room.message", content)

    answerer.add_event_callback(answer, nio.RoomMessageText)  # type: ignore[arg-type]
    print("ready", flush=True)
    await asyncio.gather(
        answerer.sync_forever(timeout=30_000),
        idle.sync_forever(timeout=0, loop_sleep_time=int(REST_POLL_S * 1000)),
    )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
