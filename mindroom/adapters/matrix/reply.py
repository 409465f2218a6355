"""Publishing one agent answer: one message, edited in place while it streams, split when long.

A streamed answer is paced (:class:`StreamPacing`, :class:`EditPacer`): its message is sent
once it has streamed for a moment (about a second: an answer done by then is posted once, whole,
and never edited), then edited (``m.replace``) at most once per interval (1.5 s by default), so
clients that show every edit as a message of its own stay readable. Streamed bodies carry an
in-progress marker; the final edit carries the whole text without it and is sent at once, so it
is always the last edit. The pace is judged when text arrives: a stream that pauses shows its
latest text at the next chunk or at the end. An answer longer than one event is split at
paragraph boundaries into several messages, each finished before the next starts.

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
from dataclasses import dataclass
from typing import Protocol

from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.send import (
    IN_PROGRESS_MARKER,
    MAX_BODY_CHARS,
    edit_content,
    message_content,
    split_message,
)

INTERRUPTED_NOTE = "*(interrupted)*"
"""Ends a message whose answer was cut short, in place of the in-progress marker."""

DELIVERY_WAIT_S = 1.0
"""The longest :meth:`ReplyWriter.delivered` waits for the homeserver to hand the answer back."""

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamPacing:
    """How often a streamed answer is shown (``defaults.stream_first_send_seconds`` and
    ``defaults.stream_edit_interval_seconds``, or an agent's own)."""

    first_send_s: float = 1.0
    """Seconds from the first streamed text to the first message: a quicker answer is posted
    once, finished."""
    edit_interval_s: float = 1.5
    """The least time between a message's sends (its post, then each in-progress edit)."""


class EditPacer:
    """Decides when the text streaming into one message is shown; it does no I/O.

    ``clock`` gives monotonic seconds (injectable: a test drives time itself).
    """

    def __init__(self, pacing: StreamPacing, clock: Callable[[], float] = time.monotonic) -> None:
        self.pacing = pacing
        self.clock = clock
        self._started: float | None = None
        self._last_sent: float | None = None  # None: the message is not sent yet

    def start(self) -> None:
        """Text arrived: the stream's clock starts at its first text (later calls do nothing)."""
        if self._started is None:
            self._started = self.clock()

    def due(self) -> bool:
        """Whether the text so far may be sent now: the first message once the stream has run
        ``first_send_s``, then an edit once ``edit_interval_s`` has passed since the last send."""
        now = self.clock()
        if self._started is None:
            self._started = now
        if self._last_sent is None:
            return now - self._started >= self.pacing.first_send_s
        return now - self._last_sent >= self.pacing.edit_interval_s

    def sent(self) -> None:
        """The message was just sent (posted or edited): the next edit waits an interval."""
        self._last_sent = self.clock()


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
        pacing: StreamPacing | None = None,
        clock: Callable[[], float] = time.monotonic,
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
        self._pacer = EditPacer(pacing or StreamPacing(), clock)
        self._finished: str | None = None  # the text :meth:`finish` last showed
        self._first_begun: asyncio.Task[None] | None = None  # see :meth:`_begin_first`
        self._last_sent: str | None = None  # the event of the last post or edit

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

    async def _begin_first(self) -> None:
        """The ledger's part of the first post, done while the answer still streams: the
        earlier run's parts read, and part 0 recorded as begun unless an earlier run did."""
        if self._posted is not None and 0 not in await self._earlier_parts():
            await self._posted.begin_reply_part(self.reply_to, self.agent, 0)

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
        if index == 0 and self._first_begun is not None:
            await self._first_begun  # begun while the answer streamed
        elif self._posted:
            await self._posted.begin_reply_part(self.reply_to, self.agent, index)
        event_id = await self.account.send(self.room_id, content, self._txn("post", index))
        self._last_sent = event_id
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
        self._last_sent = await self.account.send(
            self.room_id, content, self._txn("edit", index, body, self._run)
        )

    async def _put(self, body: str) -> None:
        """Show ``body`` in the current part: post it if the part has no message yet, else edit."""
        if len(self.event_ids) == self._done_parts:
            index = self._done_parts
            if index == 0 and self._first_begun is not None:
                await self._first_begun  # read the earlier parts too
            earlier = await self._earlier_parts()
            event_id = earlier.get(index)
            if event_id is None:  # never posted, or posted without its ID being recorded
                event_id = await self._post(index, body)
            self.event_ids.append(event_id)
            if index in earlier and await self._shows_earlier_text(index, event_id, body):
                await self._edit(body)
        elif body != self._shown:
            await self._edit(body)
        else:
            return
        self._shown = body
        self._pacer.sent()

    async def _shows_earlier_text(self, index: int, event_id: str, body: str) -> bool:
        """Whether part ``index``'s message, which an earlier run began, shows that run's text
        rather than ``body``. A recorded message does. One begun without its ID recorded was
        posted by this run with the earlier run's transaction ID: the homeserver hands back
        the earlier run's message when that run did send it (a crash mid-send), a new one when
        it crashed before (part 0 is begun as the turn starts): asked, not guessed."""
        if self._earlier and self._earlier.get(index) is not None:
            return True
        return await self.account.body_of(self.room_id, event_id) != body

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
        if final:  # at once, whatever the pace: the final text is always the last edit
            await self._put(last)
        elif self._pacer.due() or (self._done_parts and len(self.event_ids) == self._done_parts):
            # (a part after the first continues a message already shown: it is posted at once)
            await self._put(last + IN_PROGRESS_MARKER)

    def begin(self) -> None:
        """Start the ledger's part of the first post now, while the answer is being made, so
        the post waits for none of it (else the first streamed text starts it)."""
        if self._first_begun is None and self._posted is not None:
            self._first_begun = asyncio.create_task(self._begin_first(), name="reply part 0")
            # its failure is raised where the post awaits it; a post never made needs none
            self._first_begun.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def update(self, text: str) -> None:
        """The answer so far (streaming): posted or edited when the pace allows."""
        if text.strip():
            self.begin()
        self._pacer.start()
        await self._show(text, final=False)

    async def finish(self, text: str) -> None:
        """The whole answer: every part shows its final text, without the marker.

        Messages an earlier run posted for parts this answer does not have (a resumed answer
        can be shorter) are redacted. Finishing again with the same text does nothing.
        """
        if text == self._finished:
            return
        await self._show(text, final=True)
        self._finished = text
        for index, event_id in sorted((await self._earlier_parts()).items()):
            if index < len(self.event_ids):
                continue
            if event_id is None:  # begun, and maybe sent before the process died: found by
                event_id = await self.account.sent_with(  # its transaction, if it was sent
                    self.room_id, self._txn("post", index)
                )
            if event_id is not None:
                await self.account.redact(self.room_id, event_id, "superseded by the resumed reply")

    async def delivered(self, timeout: float = DELIVERY_WAIT_S) -> bool:
        """Return once the homeserver handed the last message or edit sent back to the account
        (it is then handing it out to the room), at most ``timeout`` s. The turn's bookkeeping
        (the session's save) waits for it: with the homeserver on the same machine it would
        compete with the delivery for the CPU. False when nothing was sent or it did not come
        back in time."""
        if self._last_sent is None:
            return False
        return await self.account.heard_back(self._last_sent, timeout)

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
        finally:
            if self._first_begun is not None:  # no ledger write outlives the answer
                await asyncio.wait([self._first_begun])
