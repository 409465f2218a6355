"""One process's reading of the shared appservice inbox (:mod:`mindroom.cluster.inbox`).

Several ``mindroom run`` in appservice mode share one database: the homeserver's transactions
reach any of them (they all listen on the registration's port), are appended to the inbox,
and acknowledged once committed there. Each process reads the inbox and hands every event to
the accounts it runs (through the same :class:`TransactionFeed` a single process uses), each
from its own position:

* An account's position is saved before its first sync (:meth:`InboxTail.begin`), so what
  arrives from then on is its own whichever process runs it.
* It moves only while the account runs here: an event an account was handed as its lease
  left (it deferred it, claiming nothing) is its next holder's to read again.
* An account taken over from a dead process reads on from where that process saved it. An
  event is never skipped, and (the ledger's claims) never answered twice.
* Positions are saved at most every :data:`SAVE_S` (and when an account stops here): after a
  crash, at most that much is read again, and answered once all the same.
* An account whose events cannot be handed to it (a failed claim, a homeserver not
  answering) waits, backing off, at that event; the others go on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mindroom.cluster.inbox import KEPT_S, Inbox
from mindroom.tasks import within

if TYPE_CHECKING:
    from mindroom.adapters.matrix.appservice import TransactionFeed
    from mindroom.adapters.matrix.client import MatrixAccount

logger = logging.getLogger(__name__)

POLL_S = 0.2  # how often another process's appends are looked for
SAVE_S = 1.0  # how often positions are saved
_BATCH = 200  # events read at once
_PRUNE_EVERY_S = 3600.0
_RETRY_S = (1.0, 60.0)  # the back-off of an account whose delivery failed: first, most


class InboxTail:
    """Reads the inbox for this process's accounts (run :meth:`run` as a task once
    :attr:`feed` is set)."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox
        self.feed: TransactionFeed | None = None  # this process's accounts
        self.keeps: Callable[[MatrixAccount], bool] = lambda account: True  # still runs here
        self.prunes: Callable[[], bool] = lambda: False  # whether this process prunes
        self.positions: dict[str, int] = {}  # user -> the last event handed to it here
        self._unsaved: dict[str, int] = {}
        self._saved_at = 0.0
        self._retry: dict[str, tuple[float, float]] = {}  # user -> (when, back-off)
        self._pruned_at = 0.0
        self._wake = asyncio.Event()

    async def begin(self, user_id: str) -> None:
        """An account is about to start here (before its first sync): one new to the inbox
        starts at its head."""
        await self.inbox.begin(user_id)

    async def receive(self, events: list[dict[str, Any]]) -> None:
        """A transaction's events: appended (once each), then read here at once. Raises when
        they are not committed (the transaction is refused and sent again)."""
        if events:
            await self.inbox.append(events)
        self._wake.set()

    async def run(self) -> None:
        """Hand new events to the accounts, as they are appended, until cancelled."""
        try:
            while True:
                self._wake.clear()
                await self.step()
                with contextlib.suppress(TimeoutError):
                    await within(self._wake.wait(), POLL_S)
        finally:
            with contextlib.suppress(Exception):
                await self._save(force=True)

    async def step(self) -> int:
        """Hand every account the events it has not had yet; how many were read."""
        assert self.feed is not None, "InboxTail.feed is set before the tail runs"
        accounts = {a.user_id: a for a in self.feed.accounts()}
        gone = set(self.positions) - set(accounts)
        for user_id in gone:  # stopped here: from now on its saved position counts
            del self.positions[user_id]
        for user_id in set(accounts) - set(self.positions):
            saved = await self.inbox.position(user_id)
            self.positions[user_id] = await self.inbox.head() if saved is None else saved
        now = time.monotonic()
        ready = {u: a for u, a in accounts.items() if self._retry.get(u, (0.0, 0.0))[0] <= now}
        start = min((self.positions[u] for u in ready), default=None)
        events = [] if start is None else await self.inbox.since(start, _BATCH)
        left: set[str] = set()
        for seq, event in events:
            for user_id, account in ready.items():
                if user_id in left or self.positions[user_id] >= seq:
                    continue
                if not await self._hand(account, event):
                    left.add(user_id)
                elif not self.keeps(account):  # its lease left meanwhile: not its event now
                    left.add(user_id)
                    gone.add(user_id)
                    self.positions.pop(user_id)
                else:
                    self.positions[user_id] = self._unsaved[user_id] = seq
        await self._save(force=bool(gone))
        await self._prune()
        if len(events) == _BATCH:
            self._wake.set()  # more to read
        return len(events)

    async def _hand(self, account: MatrixAccount, event: dict[str, Any]) -> bool:
        """Hand ``event`` to ``account``; False when it must come again (after a back-off)."""
        assert self.feed is not None
        try:
            await self.feed.deliver([event], [account])
        except Exception as exc:  # what must come again (TransactionFeed.deliver)
            _, delay = self._retry.get(account.user_id, (0.0, _RETRY_S[0] / 2))
            delay = min(delay * 2, _RETRY_S[1])
            self._retry[account.user_id] = (time.monotonic() + delay, delay)
            logger.warning(
                "inbox event %s not handed to %s (%s); again in %.0f s",
                event.get("event_id"),
                account.user_id,
                exc,
                delay,
            )
            return False
        self._retry.pop(account.user_id, None)
        return True

    async def _save(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if self._unsaved and (force or now - self._saved_at >= SAVE_S):
            unsaved, self._unsaved = self._unsaved, {}
            try:
                await self.inbox.save_positions(unsaved)
            except BaseException:
                self._unsaved = unsaved | self._unsaved  # saved next time
                raise
            self._saved_at = now

    async def _prune(self) -> None:
        now = time.monotonic()
        if not self.prunes() or now - self._pruned_at < _PRUNE_EVERY_S:
            return
        self._pruned_at = now
        forgotten = await self.inbox.prune(time.time() - KEPT_S)
        if forgotten:
            logger.info("forgot %d inbox events older than a day", forgotten)
