"""The composition root: logs every account in, prepares rooms, listens, and shuts down.

:class:`Bot` is wiring and lifecycle only. It owns every task through a
:class:`~mindroom.tasks.TaskSupervisor` (a sync loop per account, the memory watcher, the flush
loop, the config watcher, the maintenance loop, one job per handled message). A message goes down
from here and never climbs back: :meth:`Bot._on_message` dedupes, routes
(:mod:`mindroom.pipeline.routing`)
and claims it in the :class:`~mindroom.store.ledger.Ledger`, then
:class:`mindroom.pipeline.answer.Answerer`
plans, runs and posts the answers. Everything derived from the config is derived from the current
config, so a hot reload applies at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mindroom.adapters.agno.probe import warn_at_start
from mindroom.adapters.agno.runner import AgentRuntime
from mindroom.adapters.matrix.accounts import agent_credentials, open_account, set_display_name
from mindroom.adapters.matrix.appservice import Appservice
from mindroom.adapters.matrix.client import MatrixAccount, Undecryptable
from mindroom.adapters.matrix.crypto import E2E_AVAILABLE
from mindroom.adapters.matrix.events import IncomingMessage, message_source
from mindroom.adapters.matrix.key_backup import open_backup
from mindroom.adapters.matrix.probe import wait_for_homeserver
from mindroom.adapters.matrix.rooms import find_rooms, prepare_rooms
from mindroom.app import resume
from mindroom.app.reload import ConfigReloader
from mindroom.authorization import is_authorized
from mindroom.cluster.accounts import SharedAccounts
from mindroom.cluster.share import Cluster, flushed_by, join_cluster
from mindroom.config.schema import ROUTER, AgentConfig, Config, TeamConfig
from mindroom.errors import MatrixError
from mindroom.memory.files.watch import watch_memory_files
from mindroom.memory.flush.loop import FlushWorker
from mindroom.memory.jobs.maintenance.loop import MaintenanceLoop
from mindroom.memory.registry import MemoryRegistry
from mindroom.pipeline.answer import Answerer
from mindroom.pipeline.command_runner import run_command
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
from mindroom.pipeline.presence import ROUTE_KEY, BotPresence, resumed_requester, title
from mindroom.pipeline.routing import Route, RouteKind
from mindroom.store.ledger import Ledger, ledger_target
from mindroom.tasks import TaskSupervisor

logger = logging.getLogger(__name__)

_SHUTDOWN_GRACE_S = 10.0


@dataclass(frozen=True)
class BotOptions:
    """Where the bot runs: storage, homeserver, and who to invite (``--local``)."""

    storage: Path
    homeserver: str
    shared_secret: str | None = None
    invite_users: tuple[str, ...] = field(default_factory=tuple)
    config_dir: Path | None = None  # where relative paths in the config (templates) start
    config_path: Path | None = None  # the file to watch for hot reload
    pins: tuple[str, ...] = ()  # mindroom run --agents: the accounts this process is home to
    leases: bool = True  # share the accounts with other processes on storage.database (not --local)

    @property
    def data_dir(self) -> Path:
        """Runtime state (credentials, sessions, ledger, homeserver) under ``<storage>``."""
        return self.storage / "mindroom_data"


class Bot(BotPresence):
    """Every configured agent plus the router, on one homeserver (or this process's share of
    them, when several share one database: :mod:`mindroom.cluster.share`)."""

    def __init__(self, config: Config, options: BotOptions) -> None:
        self.config = config
        self.options = options
        self.memories = MemoryRegistry(config, options.storage, options.config_dir)
        self.runtime = AgentRuntime(config, options.data_dir, self.memories)
        self._watch_stop = asyncio.Event()
        self.flush = FlushWorker(config, self.runtime, self.memories, options.data_dir)
        self.maintenance = MaintenanceLoop(lambda: self.config, options.storage, self.memories)
        self.reloader = ConfigReloader(self, options.config_path) if options.config_path else None
        self.router: MatrixAccount | None = None
        self.appservice: Appservice | None = None  # matrix.mode: appservice
        self.agents: dict[str, MatrixAccount] = {}
        self.room_ids: dict[str, str] = {}
        self.ledger: Ledger | None = None
        self.answers: Answerer | None = None
        self.tasks = TaskSupervisor()
        self.state = ConversationState(config.router.context_messages)
        self.model_probe: asyncio.Task[None] | None = None  # the start-up reachability check
        self.cluster: Cluster | None = None  # several processes on one database

    # -- start-up -----------------------------------------------------------------------------

    async def _login(self, name: str, display_name: str) -> MatrixAccount:
        if self.appservice is not None:  # acting as the agent's user: no login, no device
            account = await self.appservice.account(name)
        else:
            given = self.config.matrix.logins.get(name)
            client = await open_account(
                self.options.homeserver,
                name,
                agent_credentials(self.options.data_dir),
                token=(given.access_token, given.device_id) if given else None,
                device_name=self.config.matrix.device_name,
                shared_secret=self.options.shared_secret,
            )
            data_dir, wanted = self.options.data_dir, self.config.matrix.key_backup
            account = MatrixAccount(name, client, await open_backup(client, data_dir, wanted))
        await set_display_name(account.client, display_name)
        return account

    async def start(self) -> None:
        """Log in, sync once, prepare rooms, then listen and catch up. Raises on fatal problems.

        An unreachable homeserver is waited for (each attempt logged); cancel to give up.
        """
        self.memories.check_paths()  # a symlink out of the storage root: say so before anything
        # In the background, so a slow or absent model server never delays start-up.
        self.model_probe = asyncio.create_task(warn_at_start(self.config, self.memories.config_dir))
        await wait_for_homeserver(self.options.homeserver)
        self.ledger = await Ledger.open(
            ledger_target(self.config.storage.database, self.options.data_dir)
        )
        self.answers = Answerer(
            config=lambda: self.config,
            presence=self,
            ledger=self.ledger,
            state=self.state,
            runtime=self.runtime,
            flush=self.flush,
            run_command=functools.partial(run_command, self),
        )
        self.cluster, here = await join_cluster(
            self.ledger, lambda: self.config, self.options.pins, shared=self.options.leases
        )
        if self.cluster is not None:  # kept from now on: logging many accounts in takes long
            self.tasks.keep_running("leases", self.cluster.run)
        if self.config.matrix.mode == "appservice":  # several processes share an inbox
            inbox = None if self.cluster is None else self.ledger.inbox()
            self.appservice = Appservice(
                self.config.matrix.appservice, self.options.homeserver, self.options.data_dir, inbox
            )
        if ROUTER in here:
            self.router = await self._login(ROUTER, "Router")
        members: dict[str, AgentConfig | TeamConfig] = {**self.config.agents, **self.config.teams}
        accounts = await asyncio.gather(
            *(
                self._login(name, member.display_name or title(name))
                for name, member in members.items()
                if name in here
            )
        )
        self.agents = {account.name: account for account in accounts}
        everyone = self.local_accounts()
        await asyncio.gather(*(account.first_sync() for account in everyone))
        await self.note_accounts(everyone)
        await self.prepare_rooms()
        await self.answer_first_sync(everyone)
        # Taken before any sync loop runs: a message the catch-up sync claims from now on is
        # answered by that sync alone, never resumed as well. (Several processes: each takes
        # what its accounts left, in its lease rounds.)
        unfinished = await resume.unfinished(
            self.ledger, self.state, self.config.matrix.catch_up_seconds, self.cluster is None
        )
        for account in everyone:
            self.listen(account)
        if self.appservice is not None:  # the homeserver's transactions, for every account
            tail = await self.appservice.listen(self.local_accounts)
            if tail is not None:
                tail.keeps, tail.prunes = lambda a: self.runs(a.name), lambda: self.runs(ROUTER)
                self.tasks.keep_running("appservice-inbox", tail.run)
        for name in self.config.agents:  # open (and index) shared memories before the first turn
            if self.runs(name):
                await asyncio.to_thread(self.memories.for_agent, name)
        self.tasks.keep_running(
            "memory-watch",
            lambda: watch_memory_files(
                [self.memories.roots_parent()], self.memories.sync_changed, self._watch_stop
            ),
        )
        self.flush.owns = lambda entry: self.runs(flushed_by(entry, self.config))
        self.tasks.keep_running("memory-flush", self.flush.run)
        self.maintenance.active = lambda: self.runs(ROUTER)
        self.maintenance.start(self.tasks, wake_after=self.flush)  # ticks in the background
        if self.cluster is not None:
            self.cluster.serve(SharedAccounts(self))
        if self.reloader is not None:
            reloader = self.reloader
            self.tasks.keep_running("config-watch", lambda: reloader.watch(self._watch_stop))
        self.resume_rows(unfinished)
        logger.info(
            "agents started on %s: %d agents in %d rooms",
            self.options.homeserver,
            len(self.agents),
            len(self.room_ids),
        )

    def listen(self, account: MatrixAccount) -> None:
        """Deliver ``account``'s events from its saved sync position on (restarted on failure)."""
        account.listen(self._on_message, self._on_invite, self._on_undecryptable)
        if self.appservice is not None:  # no sync loop: the transactions feed it
            return

        async def sync() -> None:
            assert self.ledger is not None
            token = await self.ledger.sync_token(account.user_id)
            await account.sync_forever(since=token, on_synced=self._on_synced)

        self.tasks.keep_running(f"sync:{account.name}", sync)

    async def answer_first_sync(self, accounts: list[MatrixAccount]) -> None:
        """Answer what the first sync found: invites that arrived while an account was not
        running (accepted or declined like live ones)."""
        for account in accounts:
            for room_id, inviter in account.pending_invites():
                await self._on_invite(account, room_id, inviter)

    async def start_member(self, name: str, display_name: str) -> MatrixAccount:
        """Log in and sync once the account of an agent or team a reload is adding.

        It does not listen yet: :meth:`add_member` makes it a member once the new config is in
        place. On failure nothing is left open.
        """
        account = await self._login(name, display_name)
        try:
            await account.first_sync()
        except BaseException:
            await account.close()
            raise
        return account

    async def add_member(self, account: MatrixAccount) -> None:
        """Make an account from :meth:`start_member` a member: answered for and listening. Its
        first sync's invites (sent while it was not running) are answered as at start-up."""
        self.agents[account.name] = account
        self.listen(account)
        await self.answer_first_sync([account])

    async def remove_member(self, name: str) -> None:
        """An agent or team removed from the config: end its running answers (their messages
        are finished, not left streaming), leave its rooms and stop its account.

        The account is stopped and closed even when leaving a room fails.
        """
        if self.answers is not None:
            await self.answers.interrupt(name)
        account = self.agents.pop(name)
        account.stop()
        try:
            for room_id in account.joined_rooms():
                await account.leave(room_id)
        finally:
            await self.tasks.cancel(f"sync:{name}")
            await account.close()

    def check_paths(self, config: Config) -> None:
        """Refuse (ConfigError naming the key) a path of ``config`` that leads out of its
        folder on this disk, through a symlink."""
        self.memories.check_paths(config)

    def set_config(self, config: Config) -> None:
        """Use ``config`` from now on (hot reload); running turns finish as they were."""
        self.config = config
        self.runtime.set_config(config)
        self.memories.config = config
        self.flush.config = config
        self.state.set_context_messages(config.router.context_messages)

    async def prepare_rooms(self) -> None:
        """Make every configured room exist with its members in it (idempotent). Without
        the router (another process runs it, and makes the rooms), find them."""
        if self.router is None:
            accounts = self.local_accounts()
            if accounts:
                self.room_ids.update(await find_rooms(accounts[0], self.config.room_names))
            return
        elsewhere = (
            {
                n: u
                for n in [*self.config.agents, *self.config.teams]
                if n not in self.agents and (u := self.user_of(n))
            }
            if self.cluster
            else {}
        )
        found = await prepare_rooms(
            self.router, self.config, self.agents, self.options.invite_users, elsewhere
        )
        self.room_ids.update(found)

    def resume_rows(self, unfinished: resume.Unfinished, lead: str | None = None) -> None:
        """Answer the unfinished messages again; the reply writer edits what was posted."""
        assert self.answers is not None
        for message, pending in unfinished:
            logger.info("resuming the unfinished reply to %s", message.event_id)
            if pending.responders:  # a hand-off or -over: its responders were decided already
                kind = RouteKind(pending.source.get(ROUTE_KEY, RouteKind.HANDOFF.value))
                route = Route(kind, pending.responders, "resumed hand-off")
            else:
                senders = self.state.thread_senders(message.room_id, message.thread_root)
                route = self._route(message, senders or set())
            requester = resumed_requester(pending.source, message.sender)
            self.spawn(
                self._handle(message, route, requester, pending.event_id, lead),
                f"resume:{pending.event_id}",
            )

    # -- events -------------------------------------------------------------------------------

    async def _on_synced(self, account: MatrixAccount, token: str) -> None:
        if self.ledger is None or not self.runs(account.name):
            return  # its lease left as it synced: what it deferred is its next holder's
        try:
            await self.ledger.save_sync_token(account.user_id, token)
        except Exception:
            logger.exception("cannot save the sync position of %s", account.user_id)

    async def _on_message(self, account: MatrixAccount, message: IncomingMessage) -> None:
        if message.receiver_membership not in (None, "join"):
            return  # history from before this account joined; a member account may route it
        if not self.state.first_sight(message.event_id):
            return
        try:
            await self._route_and_claim(account, message)
        except BaseException:
            self.state.forget(message.event_id)  # not claimed: a resend must be seen again
            raise

    async def _route_and_claim(self, account: MatrixAccount, message: IncomingMessage) -> None:
        thread_senders = await self.thread_senders(account, message)
        route = self._route(message, thread_senders)
        self.state.note(message, self.own_user_ids())
        if not (route.responders or route.command or route.absent):
            logger.debug("event %s in %s: %s", message.event_id, message.room_id, route.reason)
            return
        assert self.ledger is not None
        assert self.answers is not None
        lead = self.lead(message, route)
        if not self.runs(lead):  # its holder (another process) hears it too and claims it
            self.state.defer(message.event_id)  # heard again if that account moves here
            return
        source = message_source(message)
        age_s = time.time() - message.timestamp_ms / 1000
        if age_s > self.config.matrix.catch_up_seconds:
            if await self.ledger.claim(message.event_id, message.room_id, (), source, lead=lead):
                await self.ledger.finish(message.event_id, "skipped")
                logger.info(
                    "skipping %s from %s in %s: %.0f s old, beyond catch_up_seconds (%.0f)",
                    message.event_id,
                    message.sender,
                    message.room_id,
                    age_s,
                    self.config.matrix.catch_up_seconds,
                )
            return
        # Claimed durably before anything is produced: a restart will not answer it again.
        if not await self.ledger.claim(message.event_id, message.room_id, (), source, lead=lead):
            return
        logger.info(
            "event %s in %s: %s (via %s, %s)",
            message.event_id,
            message.room_id,
            route.reason,
            account.name,
            message.receiver_membership,
        )
        self.spawn(
            self._handle(message, route, message.sender, lead=lead), f"handle:{message.event_id}"
        )

    def _handle(
        self,
        message: IncomingMessage,
        route: Route,
        requester: str,
        key: str | None = None,
        lead: str | None = None,
    ) -> Coroutine[Any, Any, None]:
        """The job for a claimed message: its answers, or the notice that no agent named is here."""
        assert self.answers is not None
        if message.problem is not None:  # a client's malformed event: say so, answer nothing
            return self._on_malformed(message)
        if route.kind is RouteKind.MENTIONED_ABSENT:
            return self._on_absent_mention(message, route)
        return self.answers.handle(message, route, requester, key, lead)

    async def _on_invite(self, account: MatrixAccount, room_id: str, sender: str) -> None:
        if room_id in account.joined_rooms():
            return
        if sender in self.own_user_ids() or is_authorized(sender, self.allowed_users()):
            account.log.info("accepting invite to %s from %s", room_id, sender)
            try:
                await account.join(room_id)
            except MatrixError as exc:
                account.log.warning("%s", exc)
                return
        else:
            account.log.info("declining invite to %s from unauthorized %s", room_id, sender)
            await account.leave(room_id)

    async def _on_undecryptable(self, account: MatrixAccount, event: Undecryptable) -> None:
        """An event no key reached ``account`` for (see :func:`ask_again_unless_read`)."""
        assert self.ledger is not None
        if self.appservice is not None:  # no devices: no room keys, ever
            await tell_encrypted_room(
                self.ledger, account, event.room_id, APPSERVICE_ENCRYPTED_NOTICE
            )
        elif not E2E_AVAILABLE:  # installed without the e2e extra: say so, once per room
            await tell_encrypted_room(self.ledger, account, event.room_id)
        elif worth_asking(event, self.own_user_ids(), self.allowed_users(event.room_id)):
            asking = ask_again_unless_read(self.ledger, account, event, self.state.seen)
            self.spawn(asking, f"undecryptable:{event.event_id}")

    async def _on_malformed(self, message: IncomingMessage) -> None:
        """Posted as the router if it is in the room, else as the room's agent."""
        assert self.ledger is not None
        here = [self.agents[n] for n in self.room_agents(message.room_id) if n in self.agents]
        await tell_malformed(self.ledger, room_voice(message.room_id, self.router, here), message)

    async def _on_absent_mention(self, message: IncomingMessage, route: Route) -> None:
        """Posted as the router if it is in the room, else as the room's agent."""
        assert self.ledger is not None
        here = [self.agents[n] for n in self.room_agents(message.room_id) if n in self.agents]
        account = room_voice(message.room_id, self.router, here)
        absent = [
            (self.member_config(n).display_name or n, user)
            for n in route.absent
            if (user := self.user_of(n))
        ]
        await tell_absent(self.ledger, account, message, absent)

    # -- shutdown -----------------------------------------------------------------------------

    async def stop(self) -> None:
        """Stop listening, let in-flight replies finish (briefly), then close everything.

        A reply cancelled here stays claimed in the ledger and is resumed at the next start.
        """
        accounts = self.local_accounts()
        if self.cluster is not None:  # first: the other processes take over what is left
            await self.tasks.cancel("leases")
        if self.appservice is not None:  # no transaction is taken while stopping
            await self.appservice.stop()
        if self.model_probe is not None:
            self.model_probe.cancel()
            await asyncio.gather(self.model_probe, return_exceptions=True)
        for account in accounts:
            account.stop()
        self._watch_stop.set()
        self.flush.stop()
        await self.maintenance.stop(_SHUTDOWN_GRACE_S)  # a running job ends between scopes
        await self.tasks.stop(_SHUTDOWN_GRACE_S)
        for account in accounts:
            with contextlib.suppress(Exception):
                await account.close()
        await self.runtime.close()
        self.memories.close()
        if self.cluster is not None:  # after the last answer: what is unfinished moves on
            await self.cluster.leave()
        if self.ledger is not None:
            await self.ledger.close()
            self.ledger = None
