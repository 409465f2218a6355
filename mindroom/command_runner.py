"""Carry out a chat command for the bot: pick the account that answers, act, reply as a notice.

The texts come from :mod:`mindroom.commands` (pure); ``!config`` is the reloader's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mindroom import commands
from mindroom.authorization import is_authorized
from mindroom.matrix.events import IncomingMessage
from mindroom.matrix.send import notice_content

if TYPE_CHECKING:
    from mindroom.bot import Bot


async def run_command(bot: Bot, message: IncomingMessage) -> None:
    """Answer the command in ``message``, in its thread, from the router (or a DM's agent)."""
    assert bot.ledger is not None
    assert bot.router is not None
    command = commands.parse_command(message.body)
    if command is None:
        return
    room_agents = bot.room_agents(message.room_id)
    if message.room_id in bot.router.joined_rooms():
        account = bot.router
    elif room_agents:
        account = bot.agents[room_agents[0]]  # a DM: the router is not there
    else:
        return
    user_ids = {name: acc.user_id for name, acc in bot.agents.items()}
    if command.name == "help":
        text = commands.help_text(bot.config, room_agents, user_ids)
    elif command.name == "agents":
        text = commands.agents_text(bot.config, user_ids)
    elif command.name == "new":
        generation = await bot.ledger.new_session(message.room_id, message.thread_root)
        text = commands.new_session_text(generation, message.thread_root is not None)
    elif command.name == "config":
        if bot.reloader is None:
            text = "This bot was started without a config file to watch."
        else:
            admin = is_authorized(message.sender, bot.config.authorization.admins)
            text = await bot.reloader.chat(command.argument, admin)
    else:
        text = commands.unknown_text(command)
    content = notice_content(text, thread_root=message.thread_root, reply_to=message.event_id)
    await account.send(message.room_id, content, f"mindroom-command-{message.event_id}")
