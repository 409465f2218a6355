"""Which lines of a session one flush extracts: bounded in size, and only the requester's.

Pure functions over the session's chat lines (any object with ``role``, ``text``, ``user_id``
and ``line``, as :class:`mindroom.adapters.agno.extraction.ChatLine` has them): memory does not
import the model adapters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


class ChatLine(Protocol):
    """One message of a session's chat history, and whose turn it belongs to."""

    @property
    def role(self) -> str: ...

    @property
    def text(self) -> str: ...

    @property
    def user_id(self) -> str | None: ...

    @property
    def line(self) -> str:
        """The transcript's line: ``speaker: text``."""
        ...


Line = TypeVar("Line", bound=ChatLine)


def bounded_chunk(lines: Sequence[ChatLine], max_messages: int, max_chars: int) -> int:
    """How many of ``lines`` (from the start) one extraction takes: at least one."""
    taken, chars = 0, 0
    for line in lines[:max_messages]:
        size = len(line.line) + 1  # as the transcript writes it
        if taken and chars + size > max_chars:
            break
        taken += 1
        chars += size
    return taken


def next_chunk(
    lines: Sequence[Line],
    cursor: int,
    requester: str | None,
    *,
    max_messages: int,
    max_chars: int,
) -> tuple[list[Line], int]:
    """The next lines to extract after ``cursor``, and the cursor once they are stored.

    With a ``requester`` only the lines of that person's runs are taken (their messages and
    the replies to them): a session several people share never puts one person's words into
    another's memory. Other people's lines are passed over, and the cursor (an index into all
    ``lines``) stops right before the first own line not taken, so nothing is skipped.
    """
    own = [
        (index, line)
        for index, line in enumerate(lines)
        if index >= cursor and (requester is None or line.user_id in (requester, None))
    ]
    count = bounded_chunk([line for _, line in own], max_messages, max_chars)
    chunk = [line for _, line in own[:count]]
    end = own[count][0] if count < len(own) else len(lines)
    return chunk, max(end, cursor)
