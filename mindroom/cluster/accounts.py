"""The bot as the lease rounds of :mod:`mindroom.cluster.share` see it: accounts started and stopped
as their leases come and go, and ledger rows taken over from other processes."""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from mindroom.adapters.matrix.events import IncomingMessage, parse_message
from mindroom.config.schema import ROUTER
from mindroom.errors import MatrixError
from mindroom.pipeline.presence import title
from mindroom.store.ledger import PendingEvent

if TYPE_CHECKING:
    from mindroom.app.bot import Bot

logger = logging.getLogger(__name__)


class SharedAccounts:
    """:class:`mindroom.cluster.share.Members` for one bot."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot

    async def start_account(self, name: str) -> None:
        """Run account ``name`` here: its lease was just taken."""
        member = None if name == ROUTER else self.bot.member_config(name)
        display = "Router" if member is None else member.display_name or title(name)
        account = await self.bot.start_member(name, display)
        await self.bot.note_accounts([account])
        if name == ROUTER:
            self.bot.router = account
            self.bot.listen(account)
            await self.bot.answer_first_sync([account])
        else:
            await self.bot.add_member(account)
        try:  # the account runs: a room it cannot be brought into yet is retried later
            await self.bot.prepare_rooms()
        except MatrixError as exc:
            logger.warning("preparing the rooms of %s: %s", name, exc)
        if self.bot.appservice is not None and self.bot.appservice.server is not None:
            # a homeserver backing off from a process that died sends its transactions now
            # (a ping that fails is logged: the account runs all the same)
            await self.bot.appservice.ping()

    async def stop_account(self, name: str) -> None:
        """Stop account ``name`` here (its lease went to another process): the messages it
        leads are cut off and stay claimed for the new holder, its other answers are handed
        over (:mod:`mindroom.app.running`). Safe to call for an account not running."""
        await self.bot.answers.running.abandon(name)
        account = self.bot.router if name == ROUTER else self.bot.agents.pop(name, None)
        self.bot.router = None if name == ROUTER else self.bot.router
        await self.bot.tasks.cancel(f"sync:{name}")
        if account is not None:
            account.stop()
            with contextlib.suppress(Exception):
                await account.close()

    async def remove_member(self, name: str) -> None:
        await self.bot.remove_member(name)

    def running(self) -> set[str]:
        return {account.name for account in self.bot.local_accounts()}

    async def find_rooms(self) -> None:
        if self.bot.router is None and set(self.bot.config.room_names) - set(self.bot.room_ids):
            await self.bot.prepare_rooms()

    def busy(self, name: str) -> bool:
        return self.bot.answers.running.busy(name)

    def take_over(
        self,
        key: str,
        lead: str | None,
        room_id: str,
        responders: tuple[str, ...],
        source: dict[str, Any],
    ) -> None:
        message = parse_message(room_id, source)
        if message is None:
            self.bot.spawn(self.bot.ledger.finish(key, "failed"), f"fail:{key}")
            return
        self.bot.state.first_sight(message.event_id)  # the catch-up sync must not claim it too
        pending = PendingEvent(key, room_id, responders, source)
        self.bot.spawn(self._take(message, pending, lead), f"take:{key}")

    async def _take(
        self, message: IncomingMessage, pending: PendingEvent, lead: str | None
    ) -> None:
        """Resume a taken row, once the thread's people are known (who is in a thread decides
        a private answer's recall and its mark, and a thread's agent)."""
        accounts = self.bot.local_accounts_in(message.room_id)
        if accounts and message.thread_root:
            await self.bot.thread_senders(accounts[0], message)
        self.bot.resume_rows([(message, pending)], lead)
