"""What mindroom tells a room when it cannot do what was asked: the texts, and posting them.

Each notice is recorded in the :class:`~mindroom.store.ledger.Ledger` (a claim under its own key or
the message's), so a restart neither repeats nor loses it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Sequence

from mindroom.adapters.matrix.client import MatrixAccount, Undecryptable
from mindroom.adapters.matrix.events import IncomingMessage
from mindroom.adapters.matrix.send import notice_content
from mindroom.authorization import is_authorized
from mindroom.errors import MatrixError
from mindroom.store.ledger import Ledger

logger = logging.getLogger(__name__)

ENCRYPTED_ROOM_NOTICE = (
    "🔒 This room is end-to-end encrypted, and this mindroom was installed without encryption "
    "support (matrix-nio's e2e extra: pip install 'matrix-nio[e2e]>=0.26'), so its agents "
    "cannot read encrypted messages. Unencrypted messages in this room still work."
)
APPSERVICE_ENCRYPTED_NOTICE = (
    "🔒 This room is end-to-end encrypted, and this mindroom runs as an application service "
    "(matrix.mode: appservice), whose agents have no devices to receive room keys, so they "
    "cannot read encrypted messages. Unencrypted messages in this room still work."
)
UNDECRYPTABLE_NOTICE = (
    "🔒 I could not decrypt this message: its key did not reach me. Please send it again. If "
    "this keeps happening, let your client share keys with unverified devices, or verify "
    "{agent}."
)


def room_voice(
    room_id: str, router: MatrixAccount | None, room_agents: Sequence[MatrixAccount]
) -> MatrixAccount | None:
    """Who speaks for mindroom in a room (commands, notices): the router when it is there,
    else the room's first agent (a DM); None when no account of mindroom's is in it."""
    if router is not None and room_id in router.joined_rooms():
        return router
    return room_agents[0] if room_agents else None


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


async def tell_encrypted_room(
    ledger: Ledger, account: MatrixAccount, room_id: str, text: str = ENCRYPTED_ROOM_NOTICE
) -> None:
    """Say once per room, in the room and in the log, that mindroom cannot read it (``text``:
    why).

    Remembered in the ledger, so neither later encrypted messages nor restarts repeat it.
    """
    key = f"mindroom-encrypted-room-{room_id}"
    if not await ledger.claim(key, room_id, (), {"notice": "encrypted room"}, lead=account.name):
        return
    logger.warning(
        "room %s is end-to-end encrypted; mindroom cannot read it (told the room as %s)",
        room_id,
        account.name,
    )
    try:  # the ledger alone keeps it to one: the homeserver forgets transaction ids
        await account.send(room_id, notice_content(text))
    finally:
        await ledger.finish(key, "noticed")


UNDECRYPTABLE_GRACE_S = 2.0  # another account of mindroom's may decrypt the same event


def worth_asking(event: Undecryptable, own: Collection[str], allowed: Sequence[str]) -> bool:
    """Whether the sender of an undecryptable event is asked to send it again: a person
    allowed to talk to mindroom, in a room the account was in when it was sent."""
    if event.receiver_membership not in (None, "join") or event.sender in own:
        return False  # history from before the account joined; mindroom's own
    return is_authorized(event.sender, allowed)


async def ask_again_unless_read(
    ledger: Ledger, account: MatrixAccount, event: Undecryptable, seen: Callable[[str], bool]
) -> None:
    """Unless another account of mindroom's decrypts the event within a moment (``seen``
    says so), ask its sender to send it again (:func:`tell_undecryptable`)."""
    await asyncio.sleep(UNDECRYPTABLE_GRACE_S)
    # read here, or claimed by another process whose account could read it
    if not seen(event.event_id) and not await ledger.is_handled(event.event_id):
        await tell_undecryptable(ledger, account, event, account.user_id)


async def tell_undecryptable(
    ledger: Ledger, account: MatrixAccount, event: Undecryptable, agent: str
) -> None:
    """Ask the sender of an event nobody of mindroom's could decrypt to send it again, once
    (the ledger's claim on the event: no account answers it twice, nor a restart)."""
    key = f"mindroom-undecryptable-{event.event_id}"
    notice = {"notice": "undecryptable"}
    if not await ledger.claim(key, event.room_id, (), notice, lead=account.name):
        return
    logger.warning(
        "cannot decrypt %s from %s in %s (asked to re-send, as %s)",
        event.event_id,
        event.sender,
        event.room_id,
        account.name,
    )
    status = "noticed"
    try:
        content = notice_content(
            UNDECRYPTABLE_NOTICE.format(agent=agent),
            thread_root=event.thread_root,
            reply_to=event.event_id,
        )
        await account.send(event.room_id, content, f"mindroom-undecryptable-{event.event_id}")
    except MatrixError as exc:
        status = "failed"
        logger.warning("cannot ask for %s again: %s", event.event_id, exc)
    finally:
        await ledger.finish(key, status)


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


def malformed_notice(problem: str) -> str:
    """The notice for a message its client sent malformed (``problem``: what is wrong)."""
    return (
        f"I could not read this message: {problem}. This is a fault of the app that sent it; "
        "nothing was done with it. Please send it again (as plain text, or the file re-attached)."
    )


async def tell_malformed(
    ledger: Ledger, account: MatrixAccount | None, message: IncomingMessage
) -> None:
    """Answer ``message``, which cannot be read as sent (``message.problem``), with a notice
    saying why, as ``account`` (None: nobody of mindroom's can post there); then mark the
    message handled."""
    status = "noticed"
    try:
        if account is not None and message.problem is not None:
            content = notice_content(
                malformed_notice(message.problem),
                thread_root=message.thread_root,
                reply_to=message.event_id,
            )
            await account.send(message.room_id, content, f"mindroom-malformed-{message.event_id}")
    except MatrixError as exc:
        status = "failed"
        logger.warning("cannot post the malformed-message notice for %s: %s", message.event_id, exc)
    await ledger.finish(message.event_id, status)
