"""Who answers a message: pure functions over plain data.

:func:`route_message` decides for a message heard in a room, in order:

1. Messages from mindroom's own accounts, edits (``m.replace``) and notices are never routed
   here: bots must not loop and corrections do not trigger a second answer. (Agents hand off
   to each other through :func:`route_handoff`, which sees their final text.)
2. Messages from unauthorized senders are never answered.
3. A command (``!name``, see :mod:`mindroom.pipeline.commands`) is answered by the router.
4. Agents mentioned in the message (and present in the room) answer. When every agent it
   mentions is absent from the room, no other agent answers in its place: the route says who is
   absent (``MENTIONED_ABSENT``) and the bot posts a notice on how to invite them.
5. A thread keeps its agent: when exactly one agent has posted in the thread it answers, unless
   several humans talk in that thread (then agents wait to be named).
6. A room with exactly one agent in it (a DM, say) is answered by that agent.
7. Several agents and no mention: the router model chooses among the room's agents.
8. Otherwise nobody answers.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from mindroom.adapters.matrix.events import AgentIdentity, IncomingMessage, mentioned_agents
from mindroom.pipeline.commands import parse_command


class RouteKind(enum.Enum):
    """What kind of decision a :class:`Route` is; code branches on this, never on ``reason``."""

    IGNORED = "ignored"  # nobody answers (own account, edit, notice, unauthorized, no agent)
    COMMAND = "command"  # the router answers a ``!command``
    MENTIONED = "mentioned"  # the named agents answer (several: as one ad hoc team)
    MENTIONED_ABSENT = "mentioned absent"  # only agents not in the room were named: a notice
    THREAD_AGENT = "thread agent"  # the agent of this thread continues
    ONLY_AGENT = "only agent"  # the room's only agent answers
    ROUTER = "router"  # the router model picks one of ``responders``
    HANDOFF = "hand-off"  # an agent's answer named other agents
    HANDOFF_CAPPED = "hand-off capped"  # it did, but the hop cap was reached
    RESUMED = "resumed"  # an unfinished answer from a previous run, responders known


@dataclass(frozen=True)
class Route:
    """The decision for one message: what kind, who answers, and why (for the log)."""

    kind: RouteKind
    responders: tuple[str, ...] = ()
    reason: str = ""
    absent: tuple[str, ...] = ()
    """Agents the message names that are not in the room (``MENTIONED_ABSENT``)."""

    @property
    def ask_router(self) -> bool:
        """True when the router model picks one of ``responders``."""
        return self.kind is RouteKind.ROUTER

    @property
    def command(self) -> bool:
        """True when the message is a command for the router."""
        return self.kind is RouteKind.COMMAND

    @property
    def team(self) -> bool:
        """True when several named agents answer together as one ad hoc team."""
        return self.kind is RouteKind.MENTIONED and len(self.responders) > 1


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

    ``room_agents`` are the names of the agents joined to the message's room (config order),
    ``identities`` every configured agent (for mention parsing), ``own_user_ids`` every account
    mindroom runs, ``thread_senders`` everyone who has posted in the message's thread.
    """
    skipped = _skipped(message, own_user_ids, authorized)
    if skipped is not None:
        return skipped
    in_room = set(room_agents)
    named = mentioned_agents(message, identities)
    mentioned = [a for a in named if a in in_room]
    if mentioned:
        return Route(RouteKind.MENTIONED, tuple(mentioned), "mentioned")
    if named:
        return Route(
            RouteKind.MENTIONED_ABSENT,
            reason="mentioned agents are not in the room",
            absent=tuple(named),
        )
    if message.thread_root and thread_senders:
        in_thread = _by_thread(message, in_room, identities, own_user_ids, thread_senders)
        if in_thread is not None:
            return in_thread
    if len(room_agents) == 1:
        return Route(RouteKind.ONLY_AGENT, (room_agents[0],), "only agent in room")
    if len(room_agents) > 1:
        return Route(RouteKind.ROUTER, tuple(room_agents), "no mention: the router chooses")
    return Route(RouteKind.IGNORED, reason="no agent in room")


def _skipped(
    message: IncomingMessage, own_user_ids: Collection[str], authorized: bool
) -> Route | None:
    """The route of a message no agent answers as a conversation (mindroom's own, an edit, a
    notice, an unauthorized sender) or a command; None for any other message."""
    if message.sender in own_user_ids:
        return Route(RouteKind.IGNORED, reason="own account")
    if message.is_edit:
        return Route(RouteKind.IGNORED, reason="edit")
    if message.is_notice:
        return Route(RouteKind.IGNORED, reason="notice")
    if not authorized:
        return Route(RouteKind.IGNORED, reason="sender not authorized")
    if parse_command(message.body) is not None:
        return Route(RouteKind.COMMAND, reason="command")
    return None


def _by_thread(
    message: IncomingMessage,
    in_room: set[str],
    identities: Sequence[AgentIdentity],
    own_user_ids: Collection[str],
    thread_senders: Collection[str],
) -> Route | None:
    """A thread keeps its agent; a thread several people talk in needs a mention. None when
    the thread decides nothing (no agent of the room has posted in it, or several have)."""
    by_id = {identity.user_id: identity.name for identity in identities}
    thread_agents = sorted({by_id[s] for s in thread_senders if by_id.get(s) in in_room})
    humans = {s for s in thread_senders if s not in own_user_ids} | {message.sender}
    if len(humans) > 1:
        return Route(RouteKind.IGNORED, reason="thread with several humans and no mention")
    if len(thread_agents) == 1:
        return Route(RouteKind.THREAD_AGENT, (thread_agents[0],), "agent of this thread")
    return None


def route_handoff(
    text: str,
    *,
    from_agent: str,
    room_agents: Sequence[str],
    identities: Sequence[AgentIdentity],
    hops: int,
    max_hops: int,
) -> Route:
    """Which agents an agent's finished answer hands off to, by mentioning them.

    ``hops`` counts agent answers since the last human message in this conversation; once it
    reaches ``max_hops`` nobody is handed off to, so agents can never loop.
    """
    probe = IncomingMessage(event_id="", room_id="", sender="", body=text)
    in_room = set(room_agents)
    named = [a for a in mentioned_agents(probe, identities) if a in in_room and a != from_agent]
    if not named:
        return Route(RouteKind.IGNORED, reason="no hand-off")
    if hops >= max_hops:
        return Route(
            RouteKind.HANDOFF_CAPPED, reason=f"hand-off cap of {max_hops} agent replies reached"
        )
    return Route(RouteKind.HANDOFF, tuple(named), f"hand-off from {from_agent}")


def fallback_choice(candidates: Sequence[str]) -> str:
    """The deterministic choice when the router model cannot decide: the first in config order."""
    return candidates[0]
