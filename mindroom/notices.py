"""What mindroom tells a room when it cannot do what was asked: the texts, as pure functions."""

from __future__ import annotations

from collections.abc import Sequence

ENCRYPTED_ROOM_NOTICE = (
    "🔒 This room is end-to-end encrypted; mindroom cannot read encrypted messages yet, so its "
    "agents will not answer them. Create the chat without encryption instead (in Element: "
    'start the chat, open "Show advanced" and turn off "Enable end-to-end encryption"; with '
    "matrix-commander: leave out --encrypted). Unencrypted messages in this room still work."
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
