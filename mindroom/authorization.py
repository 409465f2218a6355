"""Who may talk to mindroom: Matrix user IDs and globs, a pure check."""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase


def default_allowed_users(server_name: str) -> list[str]:
    """With no ``allowed_users`` configured: everyone on the bot's own homeserver."""
    return [f"@*:{server_name}"]


def is_authorized(user_id: str, allowed: Sequence[str]) -> bool:
    """True when ``user_id`` matches one of the IDs or globs in ``allowed``."""
    return any(fnmatchcase(user_id, pattern) for pattern in allowed)
