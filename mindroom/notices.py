"""What mindroom tells a room when it cannot do what was asked: the texts, and posting them.

Each notice is recorded in the :class:`~mindroom.ledger.Ledger` (a claim under its own key or
the message's), so a restart neither repeats nor loses it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from mindroom.errors import MatrixError
from mindroom.ledger import Ledger
from mindroom.matrix.client import MatrixAccount
from mindroom.matrix.events import IncomingMessage
from mindroom.matrix.send import notice_content

logger = logging.getLogger(__name__)

ENCRYPTED_ROOM_NOTICE = (
    "🔒 This room is end-to-end encrypted; mindroom cannot read encrypted messages yet, so its "
    "agents will not answer them. Create the chat without encryption instead (in Element: "
    'start the chat, open "Show advanced" and turn off "Enable end-to-end encryption"; with '
    "matrix-commander: --room-dm-create AGENT --plain --room-dm-create-allow-duplicates, as it "
    "otherwise returns this room). Unencrypted messages in this room still work."
)


def absent_notice(agents: Sequence[tuple[str, str]]) -> str:
    """The notice for a message naming agents that are not in the room.

    ``agents`` are ``(display name, user ID)`` pairs; the text says how to invite each one.
    """
    names = ", ".join(name for name, _ in agents)
    one = len(agents) == 1
    invites = "  ".join(f"/invite {user_id}" for _, user_id in agents)
    return (
        f"{names} {'is' if one else 'are'} not in this room, so nobody answered in "
        f"{'its' if one else 'their'} place. To bring {'it' if one else 'them'} in: {invites}"
    )


async def tell_encrypted_room(ledger: Ledger, account: MatrixAccount, room_id: str) -> None:
    """Say once per room, in the room and in the log, that mindroom cannot read it.

    Remembered in the ledger, so neither later encrypted messages nor restarts repeat it.
    """
    key = f"mindroom-encrypted-room-{room_id}"
    if not await ledger.claim(key, room_id, (), {"notice": "encrypted room"}):
        return
    logger.warning(
        "room %s is end-to-end encrypted; mindroom cannot read it (told the room as %s)",
        room_id,
        account.name,
    )
    try:  # the ledger alone keeps it to one: the homeserver forgets transaction ids
        await account.send(room_id, notice_content(ENCRYPTED_ROOM_NOTICE))
    finally:
        await ledger.finish(key, "noticed")


async def tell_absent(
    ledger: Ledger,
    account: MatrixAccount | None,
    message: IncomingMessage,
    absent: Sequence[tuple[str, str]],
) -> None:
    """Answer ``message`` with who of ``absent`` (display name, user ID) is not in the room and
    how to invite them, as ``account`` (None: nobody of mindroom's can post there); then mark
    the message handled."""
    status = "noticed"
    try:
        if account is not None and absent:
            content = notice_content(
                absent_notice(absent), thread_root=message.thread_root, reply_to=message.event_id
            )
            await account.send(message.room_id, content, f"mindroom-absent-{message.event_id}")
    except MatrixError as exc:
        status = "failed"
        logger.warning("cannot post the absent-agent notice for %s: %s", message.event_id, exc)
    await ledger.finish(message.event_id, status)
