"""Plain data parsed from Matrix events: what a message says, where it sits, whom it names.

Pure functions over event JSON (``event.source``); no I/O and no nio types leave this module, so
routing and tests work on plain dataclasses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

_PILL_RE = re.compile(r"https://matrix\.to/#/(@[^\"'?<>\s/]+)")


@dataclass(frozen=True)
class IncomingMessage:
    """A text message as the router sees it."""

    event_id: str
    room_id: str
    sender: str
    body: str
    msgtype: str = "m.text"
    formatted_body: str | None = None
    thread_root: str | None = None
    reply_to: str | None = None
    is_edit: bool = False
    relation: str | None = None
    """The ``rel_type`` of any relation other than a thread (``m.reference``, an unknown one):
    such a message is answered like a plain one, but cannot root a thread."""
    mention_ids: frozenset[str] = field(default_factory=frozenset)
    timestamp_ms: int = 0
    receiver_membership: str | None = None
    """The receiving account's membership when the event was sent (``unsigned.membership``):
    anything but ``join`` means history from before it joined."""

    @property
    def threadable(self) -> bool:
        """False when the homeserver refuses a thread rooted at this message (it has a relation)."""
        return self.relation is None

    @property
    def is_notice(self) -> bool:
        """Notices are for bots' status output and never start a conversation."""
        return self.msgtype == "m.notice"


def _mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a JSON object, else empty: event content is untrusted input."""
    return value if isinstance(value, Mapping) else {}


def parse_message(room_id: str, source: Mapping[str, Any]) -> IncomingMessage | None:
    """Parse an ``m.room.message`` event; None for anything that is not one with a body."""
    if source.get("type") != "m.room.message":
        return None
    content = _mapping(source.get("content"))
    body = content.get("body")
    if not isinstance(body, str):
        return None
    relates = _mapping(content.get("m.relates_to"))
    rel_type = relates.get("rel_type")
    in_reply_to = _mapping(relates.get("m.in_reply_to")).get("event_id")
    formatted = content.get("formatted_body") if content.get("format") else None
    mentioned = _mapping(content.get("m.mentions")).get("user_ids")
    mention_ids = (
        {u for u in mentioned if isinstance(u, str)} if isinstance(mentioned, list) else set()
    )
    if isinstance(formatted, str):
        mention_ids.update(_PILL_RE.findall(formatted))
    return IncomingMessage(
        event_id=str(source.get("event_id", "")),
        room_id=room_id,
        sender=str(source.get("sender", "")),
        body=body,
        msgtype=str(content.get("msgtype", "m.text")),
        formatted_body=formatted if isinstance(formatted, str) else None,
        thread_root=_str_or_none(relates.get("event_id")) if rel_type == "m.thread" else None,
        reply_to=in_reply_to if isinstance(in_reply_to, str) else None,
        is_edit=rel_type == "m.replace",
        relation=rel_type if isinstance(rel_type, str) and rel_type != "m.thread" else None,
        mention_ids=frozenset(mention_ids),
        timestamp_ms=_int(source.get("origin_server_ts")),
        receiver_membership=_str_or_none(_mapping(source.get("unsigned")).get("membership")),
    )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class AgentIdentity:
    """How an agent can be named in a message: its user ID, agent name and display name."""

    name: str
    user_id: str
    display_name: str = ""


def named_agents(text: str, agents: Iterable[AgentIdentity]) -> list[str]:
    """Names of the agents ``text`` names as ``@name`` (see :func:`mentioned_agents`)."""
    return mentioned_agents(IncomingMessage("", "", "", text), agents)


def mentioned_agents(message: IncomingMessage, agents: Iterable[AgentIdentity]) -> list[str]:
    """Names of the agents ``message`` mentions, in config order.

    A mention is the agent's user ID in ``m.mentions`` or a pill, or ``@name``,
    ``@mindroom_name`` or ``@mindroom_name:server`` typed in the body (case-insensitive,
    on a word boundary so ``@general`` does not match ``@generalist``).
    """
    found = []
    body = message.body.lower()
    for agent in agents:
        if agent.user_id in message.mention_ids:
            found.append(agent.name)
            continue
        localpart = agent.user_id[1:].split(":", 1)[0].lower()
        names = {agent.name.lower(), localpart}
        alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
        pattern = rf"(?<![\w@])@(?:{alternatives})(?::[\w.\-]+(?::\d+)?)?(?![\w-])"
        if re.search(pattern, body):
            found.append(agent.name)
    return found


def message_source(message: IncomingMessage) -> dict[str, Any]:
    """Enough of the event to route and answer it again after a restart."""
    content: dict[str, Any] = {"msgtype": message.msgtype, "body": message.body}
    if message.thread_root:
        content["m.relates_to"] = {"rel_type": "m.thread", "event_id": message.thread_root}
    elif message.relation:
        content["m.relates_to"] = {"rel_type": message.relation}
    if message.mention_ids:
        content["m.mentions"] = {"user_ids": sorted(message.mention_ids)}
    return {
        "type": "m.room.message",
        "event_id": message.event_id,
        "sender": message.sender,
        "origin_server_ts": message.timestamp_ms,
        "content": content,
    }
