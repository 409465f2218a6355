"""The intake: an event from Matrix, up to the job that answers it.

The path of a message starts here and goes down, never back up:

1. :meth:`Intake.on_message` takes a message an account heard. History from before the account
   joined is left out; each event is seen once (:meth:`ConversationState.first_sight`, the
   dedupe: several accounts in one room hear the same event).
2. It is routed (:func:`mindroom.pipeline.routing.route_message`, through the presence): who
   answers, or a command, or agents named that are not in the room.
3. Its *lead* decides which process claims it (:meth:`BotPresence.lead`); an account another
   process runs is left to that process.
4. The age policy: a message older than ``matrix.catch_up_seconds`` (sent long before a start)
   is claimed as skipped, never answered.
5. The claim: recorded in the :class:`~mindroom.store.ledger.Ledger` before anything is
   produced, so a restart or another process never answers it again.
6. The job: :meth:`mindroom.pipeline.answer.Answerer.handle` (plan the turns, run them, post),
   or the notice for a malformed event or an absent agent (:mod:`mindroom.pipeline.notices`).

Beside messages: reactions (the answers to the questions mindroom put to one person:
:mod:`mindroom.pipeline.prompts`), invites (accepted from mindroom's own accounts and allowed
users, declined otherwise), events no key reached (the "could not decrypt, send it again"
notice path), and the position each account's sync reached (saved for the next start, unless
its lease left).
Unfinished messages of a previous run, and rows taken over from another process, re-enter
through :meth:`Intake.resume`: routed again by step 2 (unless their row records who answers),
then step 6.

It does not log in, sync or open anything: :mod:`mindroom.app.bot` builds it once the ledger is
open and hands it every account's events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from mindroom.adapters.matrix.client import MatrixAccount, Undecryptable
from mindroom.adapters.matrix.crypto import E2E_AVAILABLE
from mindroom.adapters.matrix.events import IncomingMessage, IncomingReaction, message_source
from mindroom.authorization import is_authorized
from mindroom.config.schema import Config
from mindroom.errors import MatrixError
from mindroom.pipeline.answer import Answerer
from mindroom.pipeline.conversation import ConversationState
from mindroom.pipeline.notices import (
    APPSERVICE_ENCRYPTED_NOTICE,
    ask_again_unless_read,
    room_voice,
    tell_absent,
    tell_encrypted_room,
    tell_malformed,
    worth_asking,
)
from mindroom.pipeline.presence import ROUTE_KEY, BotPresence, resumed_requester
from mindroom.pipeline.prompts import PromptDesk
from mindroom.pipeline.routing import Route, RouteKind
from mindroom.store.ledger import Ledger, PendingEvent
from mindroom.tasks import within

logger = logging.getLogger(__name__)

SYNC_POSITION_DELAY_S = 1.0
"""How long a sync position waits before it is saved (with the other accounts' since)."""


def message_age(message: IncomingMessage, now: float | None = None) -> float:
    """How long ago ``message`` was sent, in seconds (by its server timestamp)."""
    return (time.time() if now is None else now) - message.timestamp_ms / 1000


async def save_sync_position(
    ledger: Ledger, runs: Callable[[str], bool], account: MatrixAccount, token: str
) -> None:
    """Save where ``account``'s sync reached, unless its lease left as it synced (``runs`` is
    False): what it deferred then is its next holder's, who must start before it."""
    if not runs(account.name):
        return
    try:
        await ledger.save_sync_token(account.user_id, token)
    except Exception:
        logger.exception("cannot save the sync position of %s", account.user_id)


class Intake:
    """Takes in every account's events: dedupes, routes, claims, and starts each job."""

    def __init__(
        self,
        *,
        config: Callable[[], Config],
        presence: BotPresence,
        state: ConversationState,
        ledger: Ledger,
        answers: Answerer,
        prompts: PromptDesk,
        devices: bool,
        handled: Callable[[], None] = lambda: None,
    ) -> None:
        self._config = config  # read at every use: a hot reload applies at the next event
        self._presence = presence
        self._state = state
        self._ledger = ledger
        self._answers = answers
        self._prompts = prompts
        self._handled = handled  # told after each job (a turn may have filed a proposal)
        self._devices = devices  # False in appservice mode: no device ever gets a room key
        self._positions: dict[str, tuple[MatrixAccount, str]] = {}  # synced, not saved yet
        self._saved: set[str] = set()  # accounts whose position this run saved once
        self._saving: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    # -- messages ------------------------------------------------------------------------------

    async def on_message(self, account: MatrixAccount, message: IncomingMessage) -> None:
        """A message ``account`` heard (live, or found by its catch-up sync)."""
        if message.receiver_membership not in (None, "join"):
            return  # history from before this account joined; a member account may route it
        if not self._state.first_sight(message.event_id):
            return
        try:
            await self._route_and_claim(account, message)
        except BaseException:
            self._state.forget(message.event_id)  # not claimed: a resend must be seen again
            raise

    async def _route_and_claim(self, account: MatrixAccount, message: IncomingMessage) -> None:
        presence = self._presence
        route = await self._route(account, message)
        self._state.note(message, presence.own_user_ids())
        if not (route.responders or route.command or route.absent):
            logger.debug("event %s in %s: %s", message.event_id, message.room_id, route.reason)
            return
        lead = presence.lead(message, route)
        if not presence.runs(lead):  # its holder (another process) hears it too and claims it
            self._state.defer(message.event_id)  # heard again if that account moves here
            return
        if await self._skipped_as_old(message, lead):
            return
        # Claimed durably before anything is produced: a restart will not answer it again.
        source = message_source(message)
        if not await self._ledger.claim(message.event_id, message.room_id, (), source, lead=lead):
            return
        logger.info(
            "event %s in %s: %s (via %s, %s)",
            message.event_id,
            message.room_id,
            route.reason,
            account.name,
            message.receiver_membership,
        )
        presence.spawn(
            self._job(message, route, message.sender, lead=lead), f"handle:{message.event_id}"
        )

    async def _route(self, account: MatrixAccount, message: IncomingMessage) -> Route:
        """Who answers ``message``, heard by ``account``: a thread's posters are asked of the
        homeserver the first time the thread is seen in this run (a live message and a resumed
        one alike)."""
        thread_senders = await self._presence.thread_senders(account, message)
        return self._presence.route(message, thread_senders)

    async def _skipped_as_old(self, message: IncomingMessage, lead: str) -> bool:
        """The age policy: a message older than ``matrix.catch_up_seconds`` is not answered
        (claimed as skipped, once, so no process answers it later). True when it was old."""
        age_s = message_age(message)
        limit = self._config().matrix.catch_up_seconds
        if age_s <= limit:
            return False
        source = message_source(message)
        if await self._ledger.claim(message.event_id, message.room_id, (), source, lead=lead):
            # said before it is recorded: whoever sees the ledger's "skipped" finds the reason
            logger.info(
                "skipping %s from %s in %s: %.0f s old, beyond catch_up_seconds (%.0f)",
                message.event_id,
                message.sender,
                message.room_id,
                age_s,
                limit,
            )
            await self._ledger.finish(message.event_id, "skipped")
        return True

    def resume(
        self, unfinished: Sequence[tuple[IncomingMessage, PendingEvent]], lead: str | None = None
    ) -> None:
        """Answer claimed but unfinished messages again (a previous run's, or rows taken over
        from another process); the reply writer edits what was posted."""
        for message, pending in unfinished:
            logger.info("resuming the unfinished reply to %s", message.event_id)
            self._presence.spawn(
                self._resumed(message, pending, lead), f"resume:{pending.event_id}"
            )

    async def _resumed(
        self, message: IncomingMessage, pending: PendingEvent, lead: str | None
    ) -> None:
        route = await self._resumed_route(message, pending)
        requester = resumed_requester(pending.source, message.sender)
        await self._job(message, route, requester, pending.event_id, lead)

    async def _resumed_route(self, message: IncomingMessage, pending: PendingEvent) -> Route:
        """The route of a resumed message: the one its row records (a hand-off's or a
        hand-over's), else decided again as it was live, by the same steps. After a restart
        nothing is known of the message's thread yet: its posters are asked of the homeserver
        as a live message's are, so a thread's agent finishes its own answer (deciding from
        the empty memory would let the router give it to another agent)."""
        if pending.responders:  # a hand-off or -over: its responders were decided already
            kind = RouteKind(pending.source.get(ROUTE_KEY, RouteKind.HANDOFF.value))
            return Route(kind, pending.responders, "resumed hand-off")
        accounts = self._presence.local_accounts_in(message.room_id)
        if not accounts:  # no account here is in the room any more: nobody here answers
            return self._presence.route(message, set())
        return await self._route(accounts[0], message)

    def _job(
        self,
        message: IncomingMessage,
        route: Route,
        requester: str,
        key: str | None = None,
        lead: str | None = None,
    ) -> Coroutine[Any, Any, None]:
        """The job for a claimed message: its answers, or the notice that no agent named is here."""
        if message.problem is not None:  # a client's malformed event: say so, answer nothing
            return self._tell_malformed(message)
        if route.kind is RouteKind.MENTIONED_ABSENT:
            return self._tell_absent(message, route)
        return self._then_handled(self._answers.handle(message, route, requester, key, lead))

    async def _then_handled(self, job: Coroutine[Any, Any, None]) -> None:
        try:
            await job
        finally:
            self._handled()

    def _voice(self, room_id: str) -> MatrixAccount | None:
        """The router if it is in the room, else the room's agent (see :func:`room_voice`)."""
        presence = self._presence
        agents = presence.agents
        here = [agents[n] for n in presence.room_agents(room_id) if n in agents]
        return room_voice(room_id, presence.router, here)

    async def _tell_malformed(self, message: IncomingMessage) -> None:
        await tell_malformed(self._ledger, self._voice(message.room_id), message)

    async def _tell_absent(self, message: IncomingMessage, route: Route) -> None:
        presence = self._presence
        absent = [
            (presence.member_config(n).display_name or n, user)
            for n in route.absent
            if (user := presence.user_of(n))
        ]
        await tell_absent(self._ledger, self._voice(message.room_id), message, absent)

    async def on_synced(self, account: MatrixAccount, token: str) -> None:
        """``account``'s sync delivered its events up to ``token``: saved for the next start.

        An account's first position of a run is saved at once; later ones a moment later
        (:data:`SYNC_POSITION_DELAY_S`), the latest of each account together, so no save waits
        on the ledger's one connection in front of the claim and the turn of the message the
        sync brought. A position saved late only makes a restart after a crash hear again what
        the ledger has claimed already; :meth:`stop` saves the last ones at once.
        """
        if account.user_id not in self._saved:
            self._saved.add(account.user_id)
            await save_sync_position(self._ledger, self._presence.runs, account, token)
            return
        if not self._presence.runs(account.name):  # as it synced (checked again when saved)
            return
        self._positions[account.user_id] = (account, token)
        if self._saving is None or self._saving.done():
            self._saving = self._presence.spawn(self._save_positions(), "sync-positions")

    async def _save_positions(self) -> None:
        while self._positions:
            if not self._stopping.is_set():
                with contextlib.suppress(TimeoutError):
                    await within(self._stopping.wait(), SYNC_POSITION_DELAY_S)
            positions, self._positions = self._positions, {}
            for account, token in positions.values():
                await save_sync_position(self._ledger, self._presence.runs, account, token)

    def stop(self) -> None:
        """Shutting down: the positions not saved yet are saved now (not a moment later)."""
        self._stopping.set()

    # -- reactions -----------------------------------------------------------------------------

    async def on_reaction(self, account: MatrixAccount, reaction: IncomingReaction) -> None:
        """A reaction ``account`` heard: maybe the answer to a question it asked someone."""
        await self._prompts.on_reaction(account, reaction)

    # -- invites -------------------------------------------------------------------------------

    async def on_invite(self, account: MatrixAccount, room_id: str, sender: str) -> None:
        """Accept an invite from mindroom's own accounts or an allowed user; decline others."""
        if room_id in account.joined_rooms():
            return
        presence = self._presence
        if sender in presence.own_user_ids() or is_authorized(sender, presence.allowed_users()):
            account.log.info("accepting invite to %s from %s", room_id, sender)
            try:
                await account.join(room_id)
            except MatrixError as exc:
                account.log.warning("%s", exc)
                return
        else:
            account.log.info("declining invite to %s from unauthorized %s", room_id, sender)
            await account.leave(room_id)

    async def answer_pending_invites(self, accounts: list[MatrixAccount]) -> None:
        """Answer what a first sync found: invites that arrived while an account was not
        running (accepted or declined like live ones)."""
        for account in accounts:
            for room_id, inviter in account.pending_invites():
                await self.on_invite(account, room_id, inviter)

    # -- events no key reached -----------------------------------------------------------------

    async def on_undecryptable(self, account: MatrixAccount, event: Undecryptable) -> None:
        """An event no key reached ``account`` for (see :func:`ask_again_unless_read`)."""
        for other in self._presence.local_accounts():
            if other.resting:  # it may hold the key: it polls now, before anyone asks again
                other.nudge()
        if not self._devices:  # an application service has no devices: no room keys, ever
            await tell_encrypted_room(
                self._ledger, account, event.room_id, APPSERVICE_ENCRYPTED_NOTICE
            )
        elif not E2E_AVAILABLE:  # installed without the e2e extra: say so, once per room
            await tell_encrypted_room(self._ledger, account, event.room_id)
        elif worth_asking(
            event, self._presence.own_user_ids(), self._presence.allowed_users(event.room_id)
        ):
            asking = ask_again_unless_read(self._ledger, account, event, self._state.seen)
            self._presence.spawn(asking, f"undecryptable:{event.event_id}")
