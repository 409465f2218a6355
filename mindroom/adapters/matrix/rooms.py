"""Configured rooms: find or create them by alias, and bring the right accounts in.

Each configured room name ``lobby`` is the alias ``#lobby:<server_name>``. The router account
creates a missing room (join rule public but not published in the directory, unless the config
says ``invite``), invites the accounts that belong there and they join. A room that can neither
be found nor created is an error that says why: silently waiting for it helps nobody.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence

import nio

from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.config.schema import AgentConfig, Config, RoomConfig, TeamConfig
from mindroom.errors import MatrixError

logger = logging.getLogger(__name__)


def room_alias(name: str, server_name: str) -> str:
    """The alias of configured room ``name``."""
    return f"#{name}:{server_name}"


DEFAULT_ROOM_VERSION = "10"


async def ensure_room(
    router: MatrixAccount,
    name: str,
    *,
    join_rule: str = "public",
    topic: str | None = None,
    room_version: str = DEFAULT_ROOM_VERSION,
) -> str:
    """The room ID of configured room ``name``, creating the room when it does not exist.

    A new room gets ``room_version`` (``matrix.room_version``): the homeserver's own default
    may be one that common clients cannot handle yet. Its members may invite. An existing room
    keeps its version and power levels.
    """
    alias = room_alias(name, router.server_name)
    client = router.client
    resolved = await client.room_resolve_alias(alias)
    if isinstance(resolved, nio.RoomResolveAliasResponse):
        if resolved.room_id not in router.joined_rooms():
            response = await client.join(resolved.room_id)
            if not isinstance(response, nio.JoinResponse):
                raise MatrixError(
                    f"room {alias} exists but {router.user_id} cannot join it "
                    f"({response.message}); invite {router.user_id} or remove the alias"
                )
            router.note_joined(resolved.room_id)
        return resolved.room_id
    created = await client.room_create(
        visibility=nio.RoomVisibility.private,
        alias=name,
        name=name,
        topic=topic,
        room_version=room_version,
        preset=nio.RoomPreset.public_chat if join_rule == "public" else nio.RoomPreset.private_chat,
        initial_state=[
            {"type": "m.room.history_visibility", "content": {"history_visibility": "shared"}}
        ],
        # Members may invite (an agent the router's notice names, a colleague): anyone on the
        # homeserver can join a public room by alias anyway, and a private one is theirs.
        power_level_override={"invite": 0},
    )
    if not isinstance(created, nio.RoomCreateResponse):
        raise MatrixError(f"cannot create room {alias}: {created.message}")
    router.note_joined(created.room_id)  # it speaks for the room at once (room_voice)
    logger.info(
        "created room %s (%s, join rule %s, room version %s)",
        alias,
        created.room_id,
        join_rule,
        room_version,
    )
    return created.room_id


async def bring_into_room(router: MatrixAccount, room_id: str, member: MatrixAccount) -> None:
    """Invite ``member`` (unless already joined) and have it join ``room_id``."""
    if room_id in member.joined_rooms():
        return
    invited = await router.client.room_invite(room_id, member.user_id)
    if isinstance(invited, nio.RoomInviteError) and "already in the room" not in invited.message:
        logger.debug("invite of %s to %s: %s", member.user_id, room_id, invited.message)
    await member.join(room_id)


async def invite_user(router: MatrixAccount, room_id: str, user_id: str) -> None:
    """Invite a human to ``room_id`` unless they are already in it or invited."""
    room = router.client.rooms.get(room_id)
    if room and (user_id in room.users or user_id in room.invited_users):
        return
    response = await router.client.room_invite(room_id, user_id)
    if isinstance(response, nio.RoomInviteError) and "already" not in response.message:
        logger.warning("cannot invite %s to %s: %s", user_id, room_id, response.message)


async def prepare_room(
    router: MatrixAccount,
    name: str,
    settings: RoomConfig,
    members: Sequence[MatrixAccount],
    invite_users: Sequence[str] = (),
    room_version: str = DEFAULT_ROOM_VERSION,
) -> str:
    """Make configured room ``name`` exist with ``members`` in it and people invited."""
    room_id = await ensure_room(
        router,
        name,
        join_rule=settings.join_rule,
        topic=settings.topic,
        room_version=room_version,
    )
    await asyncio.gather(*(bring_into_room(router, room_id, member) for member in members))
    for user_id in invite_users:
        await invite_user(router, room_id, user_id)
    return room_id


async def prepare_rooms(
    router: MatrixAccount,
    config: Config,
    accounts: Mapping[str, MatrixAccount],
    invite_users: Sequence[str] = (),
    elsewhere: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """Make every room ``config`` names exist with its agents' and teams' ``accounts`` in it
    (idempotent); room name -> room ID. Members run by another process (``elsewhere``: name
    -> user) are invited; their process accepts."""
    everyone: dict[str, AgentConfig | TeamConfig] = {**config.agents, **config.teams}
    elsewhere = elsewhere or {}
    found = {}
    for name in config.room_names:
        listed = [n for n, cfg in everyone.items() if name in cfg.rooms]
        members = [accounts[n] for n in listed if n in accounts]
        invited = [elsewhere[n] for n in listed if n not in accounts and n in elsewhere]
        found[name] = await prepare_room(
            router,
            name,
            config.room_config(name),
            members,
            [*invite_users, *invited],
            config.matrix.room_version,
        )
    return found


async def find_rooms(account: MatrixAccount, names: Sequence[str]) -> dict[str, str]:
    """The IDs of the configured rooms ``names`` that exist (the router, run by another
    process, makes them): room name -> room ID."""
    found = {}
    for name in names:
        resolved = await account.client.room_resolve_alias(room_alias(name, account.server_name))
        if isinstance(resolved, nio.RoomResolveAliasResponse):
            found[name] = resolved.room_id
    return found
