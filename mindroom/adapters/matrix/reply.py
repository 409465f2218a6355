"""Publishing one agent answer: one message, edited in place while it streams, split when long.

A streamed answer is sent as a message once it has taken a moment (a quick answer is posted
once, whole), then edited (``m.replace``) at a
throttled cadence: quickly at first, then at most about once a second. Streamed bodies carry an
in-progress marker; the final edit carries the whole text without it. An answer longer than one
event is split at paragraph boundaries into several messages, each finished before the next
starts.

A reply is resumable after a crash (``kill -9`` mid-stream): each part's message is recorded
durably (:class:`PostedParts`, the ledger) before and right after it is posted, so a resumed
reply *edits* the message an earlier run posted instead of posting another. A post's transaction
ID is derived from the triggering event, the agent and the part's index, so a post whose event
ID was never recorded is deduplicated by the homeserver (which returns the earlier event) and
then edited. An edit's transaction ID differs by content and by run: an edit from an earlier run
never swallows this run's, so the final text always lands.

A reply cut short (its task cancelled: the agent was removed, or shutdown outlasted its grace)
is finished with the text so far and :data:`INTERRUPTED_NOTE` rather than left showing the
in-progress marker; a shutdown leaves the event claimed, so the next start resumes the reply
and edits the note away.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Protocol

from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.send import (
    IN_PROGRESS_MARKER,
    MAX_BODY_CHARS,
    edit_content,
    message_content,
    split_message,
)

EDIT_INTERVALS_S: Sequence[float] = (0.25, 0.5, 1.0)
FIRST_POST_DELAY_S = 0.3
"""A quick answer is posted once, finished: streaming starts only for answers that take a while."""
INTERRUPTED_NOTE = "*(interrupted)*"
"""Ends a message whose answer was cut short, in place of the in-progress marker."""

logger = logging.getLogger(__name__)


class PostedParts(Protocol):
    """Where a writer durably records the messages it posted (the ledger implements it)."""

    async def reply_parts(self, trigger_id: str, agent: str) -> dict[int, str | None]:
        """Parts an earlier send began: index -> event ID (None: sent, ID not recorded)."""
        ...

    async def begin_reply_part(self, trigger_id: str, agent: str, part: int) -> None:
        """Part ``part`` is about to be posted."""
        ...

    async def record_reply_part(
        self, trigger_id: str, agent: str, part: int, event_id: str
    ) -> None:
        """Part ``part`` was posted as ``event_id``."""
        ...


class ReplyWriter:
    """Writes ``agent``'s answer to ``reply_to`` in ``room_id`` (in ``thread_root``'s thread
    when given). With ``posted`` (the ledger) the reply is resumable after a crash."""

    def __init__(
        self,
        account: MatrixAccount,
        room_id: str,
        *,
        thread_root: str | None,
        reply_to: str,
        agent: str,
        posted: PostedParts | None = None,
        limit: int = MAX_BODY_CHARS,
        mentions: Callable[[str], Sequence[str]] | None = None,
    ) -> None:
        self.account = account
        self.room_id = room_id
        self.thread_root = thread_root
        self.reply_to = reply_to
        self.agent = agent
        self.limit = limit
        self.mentions = mentions  # who a text means (m.mentions); None: nobody
        self._pinged: dict[int, set[str]] = {}  # per part: who its messages mentioned so far
        self.event_ids: list[str] = []  # one per message part
        self._posted = posted
        self._earlier: dict[int, str | None] | None = None  # parts an earlier run began
        self._run = secrets.token_hex(8)
        self._frozen_chars = 0  # text before this offset is in finished parts
        self._done_parts = 0
        self._shown = ""  # what the current part shows now
        self._edits = 0
        self._last_sent = 0.0
        self._first_chunk: float | None = None

    def _txn(self, *key: object) -> str:
        material = "|".join(str(k) for k in (self.reply_to, self.agent, *key))
        return f"mindroom-{hashlib.sha256(material.encode()).hexdigest()[:32]}"

    async def _earlier_parts(self) -> dict[int, str | None]:
        if self._earlier is None:
            self._earlier = (
                await self._posted.reply_parts(self.reply_to, self.agent) if self._posted else {}
            )
        return self._earlier

    def _meant(self, body: str) -> list[str]:
        return list(self.mentions(body.removesuffix(IN_PROGRESS_MARKER))) if self.mentions else []

    async def _post(self, index: int, body: str) -> str:
        """Post part ``index``, recorded before the send (a crash mid-send is known) and after."""
        meant = self._meant(body)
        self._pinged[index] = set(meant)
        content = message_content(
            body,
            thread_root=self.thread_root,
            reply_to=self.reply_to,
            mentions=meant,
            live=body.endswith(IN_PROGRESS_MARKER),
        )
        if self._posted:
            await self._posted.begin_reply_part(self.reply_to, self.agent, index)
        event_id = await self.account.send(self.room_id, content, self._txn("post", index))
        if self._posted:
            await self._posted.record_reply_part(self.reply_to, self.agent, index, event_id)
        return event_id

    async def _edit(self, body: str) -> None:
        index = len(self.event_ids) - 1
        meant = self._meant(body)
        pinged = self._pinged.setdefault(index, set())
        content = edit_content(
            self.event_ids[index],
            body,
            mentions=meant,
            newly_mentioned=[m for m in meant if m not in pinged],
            live=body.endswith(IN_PROGRESS_MARKER),
        )
        pinged.update(meant)
        await self.account.send(self.room_id, content, self._txn("edit", index, body, self._run))
        self._edits += 1

    async def _put(self, body: str) -> None:
        """Show ``body`` in the current part: post it if the part has no message yet, else edit."""
        if len(self.event_ids) == self._done_parts:
            index = self._done_parts
            earlier = await self._earlier_parts()
            event_id = earlier.get(index)
            if event_id is None:  # never posted, or posted without its ID being recorded
                event_id = await self._post(index, body)
            self.event_ids.append(event_id)
            self._edits = 0
            if index in earlier:  # an earlier run's message: it shows that run's text
                await self._edit(body)
        elif body != self._shown:
            await self._edit(body)
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
        """The whole answer: every part shows its final text, without the marker.

        Messages an earlier run posted for parts this answer does not have (a resumed answer
        can be shorter) are redacted.
        """
        await self._show(text, final=True)
        for index, event_id in sorted((await self._earlier_parts()).items()):
            if index >= len(self.event_ids) and event_id is not None:
                await self.account.redact(self.room_id, event_id, "superseded by the resumed reply")

    async def interrupt(self) -> None:
        """End a message left streaming with the text so far and :data:`INTERRUPTED_NOTE`."""
        if len(self.event_ids) == self._done_parts or not self._shown.endswith(IN_PROGRESS_MARKER):
            return  # nothing posted for the current part, or it shows its final text
        text = self._shown.removesuffix(IN_PROGRESS_MARKER).rstrip()
        self._shown = f"{text}\n\n{INTERRUPTED_NOTE}"
        await self._edit(self._shown)

    @contextlib.asynccontextmanager
    async def interruptible(self) -> AsyncIterator[None]:
        """Run the answer in this block; if it ends cut short (cancelled or failed), the message
        it was streaming is finished by :meth:`interrupt` instead of keeping the marker."""
        try:
            yield
        except (Exception, asyncio.CancelledError):
            try:
                await self.interrupt()
            except Exception:  # the answer's own failure is what propagates
                logger.exception("cannot finish the interrupted reply to %s", self.reply_to)
            raise
