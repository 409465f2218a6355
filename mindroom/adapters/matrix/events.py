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


ATTACHMENT_KINDS = {"m.image": "image", "m.file": "file", "m.audio": "audio", "m.video": "video"}


@dataclass(frozen=True)
class Attachment:
    """A file sent with a message (an image, a document, a voice message, a video)."""

    kind: str  # image, file, audio or video
    url: str  # its mxc:// URI
    name: str
    mimetype: str = ""
    size: int = 0  # bytes, as the sender said (0: not said)
    encryption: Mapping[str, Any] | None = None  # an encrypted room's file: key, iv, hashes

    @property
    def mxc(self) -> tuple[str, str]:
        """(server name, media ID) of :attr:`url`; ValueError when it is not an mxc URI."""
        if not self.url.startswith("mxc://") or self.url.count("/") != 3:
            raise ValueError(f"not an mxc URI: {self.url!r}")
        server, media_id = self.url.removeprefix("mxc://").split("/", 1)
        return server, media_id


def _attachment(msgtype: str, content: Mapping[str, Any]) -> tuple[Attachment | None, str]:
    """The attachment of a media message and its caption ('' when it has none: MSC2530, a
    caption is a ``body`` beside a ``filename`` that differs from it)."""
    kind = ATTACHMENT_KINDS.get(msgtype)
    if kind is None:
        return None, str(content.get("body", ""))
    body = str(content.get("body", ""))
    filename = content.get("filename")
    name = filename if isinstance(filename, str) and filename else body
    caption = body if isinstance(filename, str) and filename and body != filename else ""
    encrypted = _mapping(content.get("file"))
    url = content.get("url") if not encrypted else encrypted.get("url")
    if not isinstance(url, str):
        return None, caption
    info = _mapping(content.get("info"))
    return (
        Attachment(
            kind,
            url,
            name or "file",
            str(info.get("mimetype") or ""),
            _int(info.get("size")),
            dict(encrypted) if encrypted else None,
        ),
        caption,
    )


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
    attachment: Attachment | None = None
    """The file of a media message; ``body`` is then its caption ('' without one)."""
    problem: str | None = None
    """Why the message cannot be read as its client sent it (:func:`content_problem`): it is
    answered with a notice saying so, never handed to a model."""

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


_SHOWN_NAME_CHARS = 80  # of a file name quoted back in a notice


def _kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return "null" if value is None else "not text"


def content_problem(content: Mapping[str, Any]) -> str | None:
    """Why a message's ``content`` breaks the Matrix spec so that it cannot be read as sent
    (None: it can): a ``formatted_body`` that is not text, a file without its ``url``.

    The text ends a sentence that starts "I could not read this message: "; it quotes at most
    :data:`_SHOWN_NAME_CHARS` characters of what the sender wrote.
    """
    if "formatted_body" in content and not isinstance(content["formatted_body"], str):
        return f"its formatted_body is {_kind_of(content['formatted_body'])}, not text"
    if str(content.get("msgtype")) not in ATTACHMENT_KINDS:
        return None
    encrypted = content.get("file")
    url = _mapping(encrypted).get("url") if encrypted is not None else content.get("url")
    if isinstance(url, str) and url:
        return None
    filename = content.get("filename")
    body = content.get("body")
    name = filename if isinstance(filename, str) and filename else body
    shown = name[:_SHOWN_NAME_CHARS] if isinstance(name, str) and name else "file"
    where = "its encrypted file has no url" if encrypted is not None else "it came with no url"
    return f"the file {shown!r} cannot be downloaded: {where}"


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
    msgtype = str(content.get("msgtype", "m.text"))
    attachment, body = _attachment(msgtype, content)
    return IncomingMessage(
        event_id=str(source.get("event_id", "")),
        room_id=room_id,
        sender=str(source.get("sender", "")),
        body=body,
        msgtype=msgtype,
        formatted_body=formatted if isinstance(formatted, str) else None,
        thread_root=_str_or_none(relates.get("event_id")) if rel_type == "m.thread" else None,
        reply_to=in_reply_to if isinstance(in_reply_to, str) else None,
        is_edit=rel_type == "m.replace",
        relation=rel_type if isinstance(rel_type, str) and rel_type != "m.thread" else None,
        mention_ids=frozenset(mention_ids),
        timestamp_ms=_int(source.get("origin_server_ts")),
        receiver_membership=_str_or_none(_mapping(source.get("unsigned")).get("membership")),
        attachment=attachment,
        problem=content_problem(content),
    )


@dataclass(frozen=True)
class IncomingReaction:
    """An ``m.reaction``: ``sender`` annotated ``reacts_to`` with ``key`` (an emoji, usually)."""

    event_id: str
    room_id: str
    sender: str
    reacts_to: str
    key: str
    timestamp_ms: int = 0


def parse_reaction(room_id: str, source: Mapping[str, Any]) -> IncomingReaction | None:
    """Parse an ``m.reaction`` event (an ``m.annotation`` of another event); None otherwise."""
    if source.get("type") != "m.reaction":
        return None
    relates = _mapping(_mapping(source.get("content")).get("m.relates_to"))
    target, key = relates.get("event_id"), relates.get("key")
    if relates.get("rel_type") != "m.annotation" or not isinstance(target, str):
        return None
    if not isinstance(key, str):
        return None
    return IncomingReaction(
        event_id=str(source.get("event_id", "")),
        room_id=room_id,
        sender=str(source.get("sender", "")),
        reacts_to=target,
        key=key,
        timestamp_ms=_int(source.get("origin_server_ts")),
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
    if (attached := message.attachment) is not None:  # as sent: a resumed turn reads it again
        content["body"] = message.body or attached.name
        content["filename"] = attached.name
        content["info"] = {"mimetype": attached.mimetype, "size": attached.size}
        if attached.encryption is not None:
            content["file"] = dict(attached.encryption)
        else:
            content["url"] = attached.url
    return {
        "type": "m.room.message",
        "event_id": message.event_id,
        "sender": message.sender,
        "origin_server_ts": message.timestamp_ms,
        "content": content,
    }
