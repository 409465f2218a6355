"""The local default: an embedded homeserver and a human account to talk to the agents with.

``mindroom run --local`` starts Synapse under ``mindroom_data/homeserver/``, makes sure the
human account exists (credentials in ``mindroom_data/local_user.json``, mode 0600) and tells the
person how to log in. ``mindroom chat`` logs in as that account.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mindroom.adapters.matrix.accounts import (
    CredentialStore,
    agent_credentials,
    login_account,
    set_display_name,
)

DEFAULT_LOCAL_USER = "user"


@dataclass(frozen=True)
class LocalUser:
    """The human account on the embedded homeserver."""

    homeserver: str
    user_id: str
    password: str


def local_user_store(data_dir: Path) -> CredentialStore:
    """Where the local human's credentials are kept."""
    return CredentialStore(data_dir / "local_user.json")


async def ensure_local_user(
    data_dir: Path, homeserver: str, shared_secret: str, username: str = DEFAULT_LOCAL_USER
) -> LocalUser:
    """Register (first run) and log in the local human account; returns how to log in."""
    store = local_user_store(data_dir)
    client = await login_account(
        homeserver, username, store, device_name="mindroom chat", shared_secret=shared_secret
    )
    try:  # set only when it differs: a new name is a membership event in each of its rooms
        await set_display_name(client, username.title())
    finally:
        await client.close()
    creds = store.get(homeserver, username)
    assert creds is not None
    return LocalUser(homeserver, creds.user_id, creds.password)


def follow_port_change(data_dir: Path, old_url: str | None, new_url: str) -> None:
    """The embedded homeserver moved to ``new_url`` (``run --local --port``): its accounts,
    saved by URL, are the same accounts; move them along so logins keep working."""
    if old_url and old_url != new_url:
        for store in (local_user_store(data_dir), agent_credentials(data_dir)):
            store.rehome(old_url, new_url)
