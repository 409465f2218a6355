"""Publishing one agent answer: one message, edited in place while it streams, split when long.

A streamed answer is sent as a message once it has taken a moment (a quick answer is posted
once, whole), then edited (``m.replace``) at a
throttled cadence: quickly at first, then at most about once a second. Streamed bodies carry an
in-progress marker; the final edit carries the whole text without it. An answer longer than one
event is split at paragraph boundaries into several messages, each finished before the next
starts.

Every request carries a transaction ID derived from the triggering event, so publishing the same
answer again after a crash does not post it twice: the homeserver returns the earlier event.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence

from mindroom.matrix.client import MatrixAccount
from mindroom.matrix.send import (
    IN_PROGRESS_MARKER,
    MAX_BODY_CHARS,
    edit_content,
    message_content,
    split_message,
)

EDIT_INTERVALS_S: Sequence[float] = (0.25, 0.5, 1.0)
FIRST_POST_DELAY_S = 0.3
"""A quick answer is posted once, finished: streaming starts only for answers that take a while."""


class ReplyWriter:
    """Writes one answer to ``room_id`` (in ``thread_root``'s thread when given)."""

    def __init__(
        self,
        account: MatrixAccount,
        room_id: str,
        *,
        thread_root: str | None,
        reply_to: str,
        txn_key: str,
        limit: int = MAX_BODY_CHARS,
        mentions: Sequence[str] = (),
    ) -> None:
        self.account = account
        self.room_id = room_id
        self.thread_root = thread_root
        self.reply_to = reply_to
        self.limit = limit
        self.mentions = list(mentions)
        self.event_ids: list[str] = []  # one per message part
        self._txn_key = txn_key
        self._txn_count = 0
        self._frozen_chars = 0  # text before this offset is in finished parts
        self._done_parts = 0
        self._shown = ""  # what the current part shows now
        self._edits = 0
        self._last_sent = 0.0
        self._first_chunk: float | None = None

    def _txn(self) -> str:
        self._txn_count += 1
        digest = hashlib.sha256(f"{self._txn_key}|{self._txn_count}".encode()).hexdigest()
        return f"mindroom-{digest[:32]}"

    async def _put(self, body: str) -> None:
        """Show ``body`` in the current part: post it if the part has no message yet, else edit."""
        if len(self.event_ids) == self._done_parts:
            content = message_content(body, thread_root=self.thread_root, reply_to=self.reply_to)
            if self.mentions:
                content["m.mentions"] = {"user_ids": self.mentions}
            self.event_ids.append(await self.account.send(self.room_id, content, self._txn()))
            self._edits = 0
        elif body != self._shown:
            content = edit_content(self.event_ids[-1], body)
            await self.account.send(self.room_id, content, self._txn())
            self._edits += 1
        else:
            return
        self._shown, self._last_sent = body, time.monotonic()

    def _due(self) -> bool:
        interval = EDIT_INTERVALS_S[min(self._edits, len(EDIT_INTERVALS_S) - 1)]
        return time.monotonic() - self._last_sent >= interval

    async def _show(self, text: str, *, final: bool) -> None:
        """Bring the messages up to ``text``, the whole answer so far."""
        parts = split_message(text[self._frozen_chars :].lstrip(), self.limit)
        for part in parts[:-1]:  # complete parts: show their final text and move on
            await self._put(part)
            self._frozen_chars = text.index(part, self._frozen_chars) + len(part)
            self._done_parts += 1
            self._shown = ""
        last = parts[-1]
        if not last.strip():
            return
        if final:
            await self._put(last)
        elif len(self.event_ids) == self._done_parts:
            first = self._first_chunk or time.monotonic()
            if self._done_parts or time.monotonic() - first >= FIRST_POST_DELAY_S:
                await self._put(last + IN_PROGRESS_MARKER)
        elif self._due():
            await self._put(last + IN_PROGRESS_MARKER)

    async def update(self, text: str) -> None:
        """The answer so far (streaming): posted or edited when the throttle allows."""
        if self._first_chunk is None:
            self._first_chunk = time.monotonic()
        await self._show(text, final=False)

    async def finish(self, text: str) -> None:
        """The whole answer: every part shows its final text, without the marker."""
        await self._show(text, final=True)
