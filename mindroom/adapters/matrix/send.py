"""Build the content of messages mindroom sends: replies in threads, notices, markdown as HTML.

Pure functions returning event content dicts; sending them is the client's job. The HTML is
always sanitised to the subset the Matrix spec lets clients render (``m.room.message``
msgtypes): text from a model or a person may carry raw HTML, and markdown passes it through.
Notices (command answers, status and error reports) are bot output that every member of the
room reads; they lose their secrets (:func:`mindroom.redact.redact_text`) here, in one place.
An agent's own reply (``m.text``) is the model's answer to a person and is kept as written.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import markdown as _markdown
import nh3

from mindroom.redact import redact_text

_MD_EXTENSIONS = ["fenced_code", "tables", "sane_lists", "nl2br"]

# The client-server spec's "HTML tags to permit", with their attributes.
_TAGS = frozenset(
    {
        *("font", "del", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "p", "a", "ul"),
        *("ol", "sup", "sub", "li", "b", "i", "u", "strong", "em", "strike", "code", "hr"),
        *("br", "div", "table", "thead", "tbody", "tr", "th", "td", "caption", "pre", "span"),
        *("img", "details", "summary"),
    }
)
_ATTRIBUTES = {
    "font": {"data-mx-bg-color", "data-mx-color", "color"},
    "span": {"data-mx-bg-color", "data-mx-color", "data-mx-spoiler"},
    "a": {"name", "target", "href"},
    "img": {"width", "height", "alt", "title", "src"},
    "ol": {"start"},
    "code": {"class"},
}
_LINK_SCHEMES = frozenset({"https", "http", "ftp", "mailto", "magnet"})
_IMAGE_SCHEMES = frozenset({"mxc"})  # clients must not fetch images from anywhere else
_LANGUAGE_CLASS = re.compile(r"language-[A-Za-z0-9_+#.-]+")


def _keep_attribute(tag: str, attribute: str, value: str) -> str | None:
    """Drop URLs whose scheme the spec does not allow (relative ones too), and any code class
    but ``language-*``."""
    if attribute in ("href", "src"):
        schemes = _IMAGE_SCHEMES if tag == "img" else _LINK_SCHEMES
        return value if urlsplit(value.strip()).scheme.lower() in schemes else None
    if attribute == "class":
        languages = [c for c in value.split() if _LANGUAGE_CLASS.fullmatch(c)]
        return languages[0] if languages else None
    return value


def sanitize_html(html: str) -> str:
    """``html`` reduced to the Matrix HTML subset: no scripts, handlers, styles or bad URLs."""
    return nh3.clean(
        html,
        tags=set(_TAGS),
        clean_content_tags={"script", "style"},
        attributes={tag: set(names) for tag, names in _ATTRIBUTES.items()},
        attribute_filter=_keep_attribute,
        url_schemes=set(_LINK_SCHEMES | _IMAGE_SCHEMES),
        link_rel=None,
    )


def markdown_to_html(text: str) -> str:
    """Render markdown (lists, code blocks, links, tables) as sanitised ``formatted_body`` HTML."""
    html = _renderer().reset().convert(text)
    return sanitize_html(html).strip()


_renderers = threading.local()


def _renderer() -> _markdown.Markdown:
    """This thread's markdown renderer. Building one loads its extensions, which costs more
    than rendering a short answer; an instance is reused once reset, but not shared between
    threads."""
    renderer: _markdown.Markdown | None = getattr(_renderers, "markdown", None)
    if renderer is None:
        renderer = _renderers.markdown = _markdown.Markdown(
            extensions=_MD_EXTENSIONS, output_format="html"
        )
    return renderer


LIVE_MARKER = "org.matrix.msc4357.live"
"""MSC4357: on a message (and its edits) while it is being streamed; the final edit drops it."""


def _mentions(user_ids: Sequence[str]) -> dict[str, Any]:
    return {"user_ids": list(user_ids)} if user_ids else {}


def message_content(
    text: str,
    *,
    thread_root: str | None = None,
    reply_to: str | None = None,
    msgtype: str = "m.text",
    mentions: Sequence[str] = (),
    live: bool = False,
) -> dict[str, Any]:
    """Content of a markdown message, in a thread when ``thread_root`` is given.

    A thread reply carries ``m.in_reply_to`` with ``is_falling_back`` so clients without thread
    support still show what it answers (the thread fallback; no reply fallback is written in
    the body: the spec removed those). ``m.mentions`` names exactly who is meant
    (``mentions``; nobody by default). ``live`` marks a message still being streamed
    (:data:`LIVE_MARKER`). A notice is posted with its secrets redacted.
    """
    text = _shown(text, msgtype)
    content: dict[str, Any] = {
        "msgtype": msgtype,
        "body": text,
        "format": "org.matrix.custom.html",
        "formatted_body": markdown_to_html(text),
        "m.mentions": _mentions(mentions),
    }
    if live:
        content[LIVE_MARKER] = {}
    if thread_root:
        content["m.relates_to"] = {
            "rel_type": "m.thread",
            "event_id": thread_root,
            "is_falling_back": True,
            "m.in_reply_to": {"event_id": reply_to or thread_root},
        }
    elif reply_to:
        content["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
    return content


def _shown(text: str, msgtype: str) -> str:
    return redact_text(text) if msgtype == "m.notice" else text


def notice_content(
    text: str, *, thread_root: str | None = None, reply_to: str | None = None
) -> dict[str, Any]:
    """A notice (status or error output that bots never answer)."""
    return message_content(text, thread_root=thread_root, reply_to=reply_to, msgtype="m.notice")


MAX_BODY_CHARS = 12_000
"""Where replies split: far below Matrix's 65,536-byte event limit even with the HTML copy."""

IN_PROGRESS_MARKER = " ⋯"


def split_message(text: str, limit: int = MAX_BODY_CHARS) -> list[str]:
    """Split ``text`` into parts of at most ``limit`` characters.

    Parts end at a paragraph boundary when one fits, else at a line end, else at a space, and
    only as a last resort inside a word. No part is empty; joining the parts with the separators
    they were split at gives back ``text`` (modulo the whitespace at the cut).
    """
    parts: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[: limit + 1]
        cut = -1
        for separator in ("\n\n", "\n", " "):
            cut = window.rfind(separator)
            if cut > 0:
                break
        if cut <= 0:
            cut = limit
        head, rest = rest[:cut].rstrip(), rest[cut:].lstrip()
        if head:
            parts.append(head)
    if rest.strip() or not parts:
        parts.append(rest)
    return parts


def edit_content(
    original_event_id: str,
    text: str,
    *,
    msgtype: str = "m.text",
    mentions: Sequence[str] = (),
    newly_mentioned: Sequence[str] = (),
    live: bool = False,
) -> dict[str, Any]:
    """An ``m.replace`` edit setting the message ``original_event_id`` to ``text``.

    The new content names everyone it mentions (``mentions``); the edit itself only those it
    mentions for the first time (``newly_mentioned``), so an edit pings nobody twice.
    """
    text = _shown(text, msgtype)
    new_content = message_content(text, msgtype=msgtype, mentions=mentions, live=live)
    content = {
        "msgtype": msgtype,
        "body": f"* {text}",
        "format": "org.matrix.custom.html",
        "formatted_body": f"* {new_content['formatted_body']}",
        "m.new_content": new_content,
        "m.relates_to": {"rel_type": "m.replace", "event_id": original_event_id},
        "m.mentions": _mentions(newly_mentioned),
    }
    if live:
        content[LIVE_MARKER] = {}
    return content
