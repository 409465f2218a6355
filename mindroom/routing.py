"""Who answers a message: a pure function over plain data.

The rules, in order:

1. Messages from mindroom's own accounts, edits (``m.replace``) and notices are never answered,
   so bots cannot loop and corrections do not trigger a second answer.
2. Messages from unauthorized senders are never answered.
3. Agents mentioned in the message (and present in the room) answer.
4. With no mention, a thread keeps its agent: when exactly one agent has posted in the thread
   it answers, unless several humans talk in that thread (then agents wait to be named).
5. With no mention, a room with exactly one agent in it (a DM, say) is answered by that agent.
6. Otherwise nobody answers.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from mindroom.matrix.events import AgentIdentity, IncomingMessage, mentioned_agents


@dataclass(frozen=True)
class Route:
    """The decision for one message: who answers, and why (for the log)."""

    responders: tuple[str, ...]
    reason: str


def route_message(
    message: IncomingMessage,
    *,
    room_agents: Sequence[str],
    identities: Sequence[AgentIdentity],
    own_user_ids: Collection[str],
    authorized: bool,
    thread_senders: Collection[str] = (),
) -> Route:
    """Decide which agents answer ``message``.

    ``room_agents`` are the names of the agents joined to the message's room, ``identities``
    every configured agent (for mention parsing), ``own_user_ids`` every account mindroom runs,
    ``thread_senders`` everyone who has posted in the message's thread (root included).
    """
    if message.sender in own_user_ids:
        return Route((), "own account")
    if message.is_edit:
        return Route((), "edit")
    if message.is_notice:
        return Route((), "notice")
    if not authorized:
        return Route((), "sender not authorized")
    in_room = set(room_agents)
    mentioned = [a for a in mentioned_agents(message, identities) if a in in_room]
    if mentioned:
        return Route(tuple(mentioned), "mentioned")
    if message.thread_root and thread_senders:
        by_id = {identity.user_id: identity.name for identity in identities}
        thread_agents = [by_id[s] for s in thread_senders if by_id.get(s) in in_room]
        humans = {s for s in thread_senders if s not in own_user_ids} | {message.sender}
        if len(humans) > 1:
            return Route((), "thread with several humans and no mention")
        if len(thread_agents) == 1:
            return Route((thread_agents[0],), "agent of this thread")
    if len(room_agents) == 1:
        return Route((room_agents[0],), "only agent in room")
    return Route((), "no agent mentioned")
