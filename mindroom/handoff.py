"""Agent hand-offs: an agent's finished answer that names other agents passes the turn on.

The cap on agent replies without a human message (``router.max_agent_hops``) is what keeps
agents from looping; see :func:`mindroom.routing.route_handoff`.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from mindroom.matrix.events import IncomingMessage, message_source
from mindroom.routing import route_handoff

if TYPE_CHECKING:
    from mindroom.bot import Bot

logger = logging.getLogger(__name__)


async def hand_off(
    bot: Bot,
    agent: str,
    message: IncomingMessage,
    thread_root: str | None,
    text: str,
    reply_event_id: str,
) -> None:
    """Let agents named in ``agent``'s finished answer take over, within the hop cap."""
    assert bot.ledger is not None
    key = (message.room_id, thread_root)
    hops = bot.state.count_agent_reply(key)
    route = route_handoff(
        text,
        from_agent=agent,
        room_agents=bot.room_agents(message.room_id),
        identities=bot.identities(),
        hops=hops,
        max_hops=bot.config.router.max_agent_hops,
    )
    if not route.responders:
        if "cap" in route.reason:
            logger.info("not handing off from %s in %s: %s", agent, message.room_id, route.reason)
        return
    handoff = IncomingMessage(
        event_id=reply_event_id,
        room_id=message.room_id,
        sender=bot.agents[agent].user_id,
        body=text,
        thread_root=thread_root,
        timestamp_ms=int(time.time() * 1000),
    )
    bot.state.first_sight(reply_event_id)
    if await bot.ledger.claim(
        reply_event_id, message.room_id, route.responders, message_source(handoff)
    ):
        logger.info("%s hands off to %s", agent, ", ".join(route.responders))
        bot.spawn(bot.handle(handoff, route), f"handoff:{reply_event_id}")
