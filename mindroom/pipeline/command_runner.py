"""Carry out a chat command for the bot: pick the account that answers, act, reply as a notice.

The texts come from :mod:`mindroom.pipeline.commands` (pure); ``!config`` is the reloader's. The
bot is
seen through :class:`CommandHost`, the few things a command reads or does.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Protocol

from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.events import IncomingMessage
from mindroom.adapters.matrix.send import notice_content
from mindroom.authorization import is_authorized
from mindroom.config.schema import Config
from mindroom.dashboard.person import person_link
from mindroom.errors import MatrixError
from mindroom.memory.policy.consent import Person
from mindroom.memory.policy.consent_chat import memory_command
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.registry import MemoryRegistry
from mindroom.people import memory_chat
from mindroom.pipeline import commands
from mindroom.pipeline.notices import room_voice
from mindroom.pipeline.prompts import PromptDesk
from mindroom.sessions.keeper import SessionKeeper
from mindroom.sessions.status import gather, status_text
from mindroom.store.ledger_tables import MemoryForgets
from mindroom.store.prompts import Prompts

logger = logging.getLogger(__name__)


class SessionLedger(Protocol):
    """Where ``!new`` starts a fresh session, and ``!memory forget`` waits for its
    confirmation."""

    async def new_session(self, room_id: str, thread_root: str | None) -> int:
        """Start a fresh conversation in the room or thread; returns the new generation."""
        ...

    @property
    def forgets(self) -> MemoryForgets:
        """Pending and confirmed ``!memory forget`` requests."""
        ...

    @property
    def prompts(self) -> Prompts:
        """The questions a reaction answers (a forget's listing is one)."""
        ...


class Answers(Protocol):
    """The answer path's sessions (``!compact``, ``!status``)."""

    @property
    def sessions(self) -> SessionKeeper:
        """The session keeper."""
        ...


class ConfigChat(Protocol):
    """Who answers ``!config ...``."""

    async def chat(self, argument: str, is_admin: bool) -> str:
        """The answer to ``!config <argument>``."""
        ...


class CommandHost(Protocol):
    """What running a command needs from the bot."""

    @property
    def config(self) -> Config:
        """The config in use."""
        ...

    @property
    def router(self) -> MatrixAccount | None:
        """The router's account (answers commands in rooms it is in)."""
        ...

    @property
    def agents(self) -> Mapping[str, MatrixAccount]:
        """The running account of each agent and team, by name."""
        ...

    @property
    def ledger(self) -> SessionLedger:
        """Session generations (``!new``)."""
        ...

    @property
    def answers(self) -> Answers:
        """The answer path (sessions)."""
        ...

    @property
    def reloader(self) -> ConfigChat | None:
        """The config reloader, when a config file is watched."""
        ...

    @property
    def memories(self) -> MemoryRegistry:
        """The memories (``!memory`` answers consent proposals)."""
        ...

    @property
    def prompts(self) -> PromptDesk:
        """Questions put to one person that a reaction answers (``!memory forget``'s)."""
        ...

    def room_agents(self, room_id: str) -> Sequence[str]:
        """Agents and teams joined to ``room_id``, in config order."""
        ...

    def user_of(self, name: str) -> str | None:
        """The Matrix user of account ``name``, wherever it runs."""
        ...

    def own_user_ids(self) -> set[str]:
        """Every account mindroom runs, in any process."""
        ...

    def audience(self, room_id: str, person: str) -> RoomAudience:
        """Who can read ``room_id`` now (see :class:`~mindroom.pipeline.presence.Presence`)."""
        ...

    def room_humans(self, room_id: str) -> frozenset[str]:
        """The people joined to ``room_id``, as the accounts in it last synced."""
        ...

    def display_name(self, room_id: str, user_id: str) -> str | None:
        """``user_id``'s display name in ``room_id`` (None when unknown)."""
        ...


async def run_command(bot: CommandHost, message: IncomingMessage) -> None:
    """Answer the command in ``message``, in its thread, from the router (or a DM's agent)."""
    command = commands.parse_command(message.body)
    if command is None:
        return
    room_agents = bot.room_agents(message.room_id)
    here = [bot.agents[n] for n in room_agents if n in bot.agents]  # several processes: ours
    account = room_voice(message.room_id, bot.router, here)
    if account is None:
        return
    members = [*bot.config.agents, *bot.config.teams]
    user_ids = {name: user for name in members if (user := bot.user_of(name))}
    said = None  # a !memory answer (it may list a pending forget)
    if command.name == "help":
        text = commands.help_text(bot.config, room_agents, user_ids)
    elif command.name == "agents":
        text = commands.agents_text(bot.config, user_ids)
    elif command.name in ("new", "reset"):  # !reset: the name other assistants use
        generation = await bot.ledger.new_session(message.room_id, message.thread_root)
        text = commands.new_session_text(generation, message.thread_root is not None)
    elif command.name in ("compact", "status"):
        text = await session_command(bot, bot.answers.sessions, message, command)
    elif command.name == "memory":
        said = await _memory(bot, message, command.argument, room_agents)
        text = said.text
    elif command.name == "config":
        if bot.reloader is None:
            text = "This bot was started without a config file to watch."
        else:
            admin = is_authorized(message.sender, bot.config.authorization.admins)
            text = await bot.reloader.chat(command.argument, admin)
    else:
        text = commands.unknown_text(command)
    await _post(bot, account, message, command.name, text, said)


async def _post(
    bot: CommandHost,
    account: MatrixAccount,
    message: IncomingMessage,
    name: str,
    text: str,
    said: memory_chat.ChatAnswer | None,
) -> None:
    """Post the command's answer. One that lists a pending forget is a prompt (a ✅ or ❌
    answers it): posted and recorded as one posting, which a quick reaction waits for."""
    if said is None or said.forget is None:
        await _answer(account, message, name, text)
        return
    with bot.prompts.posting(message.room_id):
        event_id = await _answer(account, message, name, text)
        await _listed(bot, account, message, said, event_id)


async def _listed(
    bot: CommandHost,
    account: MatrixAccount,
    message: IncomingMessage,
    said: memory_chat.ChatAnswer | None,
    event_id: str | None,
) -> None:
    """Record the message (``event_id``) that listed a pending forget: ``!memory forget
    confirm`` and a ✅ (or ❌) reaction to it answer it (:mod:`mindroom.pipeline.prompts`)."""
    if said is None or said.forget is None or event_id is None:
        return
    await memory_chat.record_prompt(bot.ledger.forgets, said, event_id)
    ref = f"{said.forget.requester}@{said.forget.created_at}"
    await bot.ledger.prompts.add(
        event_id, message.room_id, account.name, message.sender, "forget", ref
    )


async def _memory(
    bot: CommandHost,
    message: IncomingMessage,
    argument: str,
    room_agents: Sequence[str],
) -> memory_chat.ChatAnswer:
    """``!memory ...``: what is known about a person and what waits for their consent; the
    texts are shown only to them alone (:func:`_alone_with`)."""
    in_dm = _alone_with(bot, message)
    if memory_chat.is_action(argument):
        return await memory_chat.answer(
            bot.config,
            bot.memories,
            bot.ledger.forgets,
            room_agents,
            message.sender,
            argument,
            room_id=message.room_id,
            in_dm=in_dm,
            people=_people(bot, message),
            room=bot.audience(message.room_id, message.sender),
        )
    text = await asyncio.to_thread(
        partial(memory_command, in_dm=in_dm),
        bot.config,
        bot.memories,
        room_agents,
        message.sender,
        argument,
    )
    return memory_chat.ChatAnswer(_with_memory_link(bot, message, argument, text))


def _alone_with(bot: CommandHost, message: IncomingMessage) -> bool:
    """Whether the message's room is its sender's alone with mindroom's accounts, as the room's
    audience decides it (every account here in it must find it so)."""
    return bot.audience(message.room_id, message.sender).only_person == message.sender


def _people(bot: CommandHost, message: IncomingMessage) -> list[Person]:
    """The people of the message's room (not mindroom's accounts), with their names there."""
    members = bot.room_humans(message.room_id)
    return [
        Person(user_id, bot.display_name(message.room_id, user_id))
        for user_id in sorted(members | {message.sender})
    ]


async def _answer(
    account: MatrixAccount, message: IncomingMessage, name: str, text: str
) -> str | None:
    """Post ``text`` as the answer to the command ``message``; its event ID. When the
    homeserver refuses it (too large, say), a short notice says so instead of silence (None)."""
    content = notice_content(text, thread_root=message.thread_root, reply_to=message.event_id)
    try:
        return await account.send(message.room_id, content, f"mindroom-command-{message.event_id}")
    except MatrixError as exc:
        logger.warning("the answer to !%s (%s) was refused: %s", name[:40], message.event_id, exc)
        refused = notice_content(
            f"My answer to this command could not be posted: the homeserver refused it "
            f"({str(exc).rsplit(': ', 1)[-1][:200]}).",
            thread_root=message.thread_root,
            reply_to=message.event_id,
        )
        await account.send(message.room_id, refused, f"mindroom-command-refused-{message.event_id}")
        return None


def _with_memory_link(bot: CommandHost, message: IncomingMessage, argument: str, text: str) -> str:
    """``!memory`` in a DM also answers with the person's own link to what the companions know
    about them (``!memory link``: only that); never in a room others could open it from
    (:func:`_alone_with` decides: the one check for what is meant for one person)."""
    action = argument.strip().lower()
    if action not in ("", "link"):
        return text
    if not _alone_with(bot, message):
        if action == "link":
            return (
                "I send that link only in a direct message with me: a room whose join rule is "
                "invite-only (not restricted to a space), with nobody else joined or invited, "
                "and whose history is not readable from outside. Anyone else who is in this "
                "room, or may join it, could open it."
            )
        return text
    data_dir = bot.memories.storage / "mindroom_data"
    link = person_link(data_dir, bot.config.dashboard, message.sender)
    if link is None:
        line = "The dashboard is not running here, so there is no link to what I know about you."
    else:
        line = (
            f"Read, correct, delete or download what I know about you: {link} "
            "(for you only, for 15 minutes: do not forward it)"
        )
    return line if action == "link" else f"{text}\n\n{line}"


async def session_command(
    bot: CommandHost, keeper: SessionKeeper, message: IncomingMessage, command: commands.Command
) -> str:
    """``!status`` / ``!compact [instructions]``: the sender's conversations here (shared ones
    and their own private ones, never another person's)."""
    records = [
        r
        for r in await keeper.book.in_room(message.room_id, message.thread_root)
        if r.requester in ("", message.sender)
    ]
    if not records:
        return commands.no_session_text(message.thread_root is not None)
    now = time.time()
    parts = []
    for record in records:
        if command.name == "status":
            config = bot.config
            model = config.agent_model(record.owner) if record.owner in config.agents else None
            budget = config.chat_model(model).context_tokens if model in config.models else None
            status = await gather(keeper.compactor.ledger, record)
            parts.append(status_text(status, now, budget))
        elif record.owner not in bot.config.agents:
            parts.append(commands.compact_text(record.owner, None, team=True))
        else:
            done = await keeper.compact(record, instructions=command.argument)
            parts.append(commands.compact_text(record.owner, done))
    return "\n\n".join(parts)
