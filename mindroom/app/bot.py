"""The composition root: builds mindroom's parts, starts them, and stops them.

:class:`Bot` is wiring and lifecycle only. Made from the config, it holds the parts that need
no I/O (the memories, the agent runtime, the flush worker, maintenance, the reloader, the task
supervisor, the conversation state). :meth:`Bot.start` waits for the homeserver, opens the
ledger and builds on it the parts that need it, at once and whole (:class:`Started`: the answer
path, the intake, this process's place among the others sharing the database and the
appservice, the last two None only by configuration), logs every account in, prepares the
rooms, then starts listening and every background task. Tasks are owned by its
:class:`~mindroom.tasks.TaskSupervisor` (a sync loop per account, the memory watcher, the flush
loop, the config watcher, the maintenance loop, one job per handled message). :meth:`Bot.stop`
stops them and closes what start opened.

A message's path is not here: it goes down from :mod:`mindroom.pipeline.intake` (dedupe, route,
age policy, claim) to :mod:`mindroom.pipeline.answer` (plan, run, post) and never climbs back.
Everything derived from the config is derived from the current config, so a hot reload applies
at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path

from mindroom.adapters.agno.probe import warn_at_start
from mindroom.adapters.agno.runner import AgentRuntime
from mindroom.adapters.matrix.accounts import agent_credentials, open_account, set_display_name
from mindroom.adapters.matrix.appservice import Appservice
from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.key_backup import open_backup
from mindroom.adapters.matrix.probe import wait_for_homeserver
from mindroom.adapters.matrix.rooms import find_rooms, prepare_rooms
from mindroom.app import resume
from mindroom.app.reload import ConfigReloader
from mindroom.cluster.accounts import SharedAccounts
from mindroom.cluster.erasure import ClusterErasure
from mindroom.cluster.share import Cluster, flushed_by, join_cluster
from mindroom.config.schema import ROUTER, AgentConfig, Config, TeamConfig
from mindroom.errors import MindroomError
from mindroom.memory.backend import keeps_files
from mindroom.memory.files.watch import watch_memory_files
from mindroom.memory.flush.loop import FlushWorker
from mindroom.memory.jobs.maintenance.loop import MaintenanceLoop
from mindroom.memory.policy.audience import backfill
from mindroom.memory.private import PRIVATE_DIR
from mindroom.memory.registry import MemoryRegistry
from mindroom.pipeline.answer import Answerer
from mindroom.pipeline.command_runner import run_command
from mindroom.pipeline.consent_offers import ConsentOffers
from mindroom.pipeline.conversation import ConversationState
from mindroom.pipeline.intake import Intake
from mindroom.pipeline.presence import BotPresence, title
from mindroom.pipeline.prompts import PromptDesk
from mindroom.store.ledger import Ledger, ledger_target
from mindroom.tasks import TaskSupervisor

logger = logging.getLogger(__name__)

_SHUTDOWN_GRACE_S = 10.0
_MODEL_PROBE = "model-probe"


class NotStartedError(MindroomError):
    """A part that exists only while the bot runs was asked for before :meth:`Bot.start`
    (or after :meth:`Bot.stop`)."""


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


@dataclass(frozen=True)
class Started:
    """The parts built on the open ledger, made together by :meth:`Bot.start`: none is ever
    missing while the bot runs.

    ``cluster`` and ``appservice`` are None by configuration, never for "not yet": ``cluster``
    when this process runs alone (SQLite, or ``--local``), ``appservice`` when every account
    syncs for itself (``matrix.mode: sync``).
    """

    ledger: Ledger
    answers: Answerer  # plans, runs and posts answers (mindroom.pipeline.answer)
    intake: Intake  # every account's events go in here (mindroom.pipeline.intake)
    cluster: Cluster | None  # several processes on one database: this one's leases
    appservice: Appservice | None  # appservice mode: the homeserver pushes the events
    prompts: PromptDesk  # questions to one person, answered by a reaction (pipeline.prompts)
    offers: ConsentOffers  # consent proposals offered in their person's direct chat


class Bot(BotPresence):
    """Every configured agent plus the router, on one homeserver (or this process's share of
    them, when several share one database: :mod:`mindroom.cluster.share`)."""

    def __init__(self, config: Config, options: BotOptions) -> None:
        self.config = config
        self.options = options
        self.memories = MemoryRegistry(config, options.storage, options.config_dir)
        self.runtime = AgentRuntime(config, options.data_dir, self.memories)
        self.flush = FlushWorker(
            config, self.runtime, self.memories, options.data_dir, gate=self.runtime.gate
        )
        self.maintenance = MaintenanceLoop(
            lambda: self.config, options.storage, self.memories, gate=self.runtime.gate
        )
        self.reloader = (
            ConfigReloader(self, options.config_path, options.data_dir)
            if options.config_path
            else None
        )
        self.tasks = TaskSupervisor()
        self.state = ConversationState(config.router.context_messages)
        # The accounts this process runs: none before start (``running`` says which). While it
        # runs, they follow the leases: the router is None when another process runs it.
        self.router: MatrixAccount | None = None
        self.agents: dict[str, MatrixAccount] = {}
        self.room_ids: dict[str, str] = {}
        self.model_probed = asyncio.Event()  # set once the start-up check of the models ran
        self._others: ClusterErasure | None = None  # see _hold_still_for_others
        self._watch_stop = asyncio.Event()
        self._started: Started | None = None  # the running parts: see the properties below

    # -- the running parts --------------------------------------------------------------------

    @property
    def started(self) -> Started:
        """The parts built on the open ledger; :class:`NotStartedError` before :meth:`start`."""
        if self._started is None:
            raise NotStartedError("mindroom is not running: start() it first")
        return self._started

    @property
    def running(self) -> bool:
        """True from the end of :meth:`start`'s set-up (ledger, cluster, appservice) until
        :meth:`stop`; before, ``/healthz`` says "starting"."""
        return self._started is not None

    @property
    def cluster(self) -> Cluster | None:
        """This process's leases; None when it runs alone (:class:`Started`). Refused
        (:class:`NotStartedError`) when not running: alone or not is decided at start."""
        return self.started.cluster

    @property
    def appservice(self) -> Appservice | None:
        """The appservice; None in ``matrix.mode: sync`` (:class:`Started`). Refused
        (:class:`NotStartedError`) when not running."""
        return self.started.appservice

    @property
    def ledger(self) -> Ledger:
        """The handled-events ledger (:class:`NotStartedError` when not running)."""
        return self.started.ledger

    @property
    def answers(self) -> Answerer:
        """The answer path (:class:`NotStartedError` when not running)."""
        return self.started.answers

    @property
    def prompts(self) -> PromptDesk:
        """Questions put to one person, answered by a reaction (:class:`NotStartedError` when
        not running)."""
        return self.started.prompts

    @property
    def intake(self) -> Intake:
        """Where every account's events go in (:class:`NotStartedError` when not running)."""
        return self.started.intake

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
        await wait_for_homeserver(self.options.homeserver)
        ledger = await Ledger.open(
            ledger_target(self.config.storage.database, self.options.data_dir)
        )
        try:
            self._started, here = await self._build(ledger)
        except BaseException:
            await ledger.close()
            raise
        if self.cluster is not None:  # kept from now on: logging many accounts in takes long
            self.tasks.keep_running("leases", self.cluster.run)
            await self._hold_still_for_others()
        if self.appservice is not None:  # up before the joins are pushed (held until listen)
            await self.appservice.serve()
        await self._log_in(here)
        # Taken before any sync loop runs: a message the catch-up sync claims from now on is
        # answered by that sync alone, never resumed as well. (Several processes: each takes
        # what its accounts left, in its lease rounds.)
        unfinished = await resume.unfinished(
            ledger, self.state, self.config.matrix.catch_up_seconds, self.cluster is None
        )
        for account in self.local_accounts():
            self.listen(account)
        await self._run_in_background()
        self.resume_rows(unfinished)
        # In the background, so a slow or absent model server never delays anything; only now,
        # so that its work (the model SDK's import, loading a local embedder: seconds of CPU in
        # threads) does not slow the logins down. A turn that comes before the embedder is
        # loaded waits for it (keyword-only if it cannot load).
        self.tasks.spawn(self._probe_models(), _MODEL_PROBE)
        logger.info(
            "agents started on %s: %d agents in %d rooms",
            self.options.homeserver,
            len(self.agents),
            len(self.room_ids),
        )

    async def _hold_still_for_others(self) -> None:
        """With other processes on the database: an erasure in any of them holds this one's
        work still, and one here holds theirs (:mod:`mindroom.cluster.erasure`)."""
        database = self.config.storage.database
        assert database is not None  # a cluster runs on storage.database only
        private_root = self.options.storage / PRIVATE_DIR

        async def let_go() -> None:  # another process erases someone: nothing of anyone open
            self.runtime.forget_stores_under(private_root)  # (their engines go on this loop)
            await asyncio.to_thread(self.memories.forget_person, None)  # closes SQLite files

        others = ClusterErasure(database, self.runtime.gate, let_go)
        await others.start()  # waits while another process erases someone
        self._others = others
        self.runtime.others = others.erasing

    async def _probe_models(self) -> None:
        try:
            await warn_at_start(self.config, self.memories.config_dir)
        finally:
            self.model_probed.set()

    async def _build(self, ledger: Ledger) -> tuple[Started, set[str]]:
        """The answer path and the intake on ``ledger``, this process joined to the others
        sharing the database (if any), the appservice (in its mode); and the accounts this
        process runs from the start. On failure the cluster is left again."""
        answers = Answerer(
            config=lambda: self.config,
            presence=self,
            ledger=ledger,
            state=self.state,
            runtime=self.runtime,
            flush=self.flush,
            run_command=functools.partial(run_command, self),
        )
        prompts = PromptDesk(self, ledger, gate=self.runtime.gate)
        offers = ConsentOffers(self, prompts, gate=self.runtime.gate)
        intake = Intake(
            config=lambda: self.config,
            presence=self,
            state=self.state,
            ledger=ledger,
            answers=answers,
            prompts=prompts,
            devices=self.config.matrix.mode != "appservice",  # an appservice has no devices
            handled=offers.wake,
        )
        cluster, here = await join_cluster(
            ledger, lambda: self.config, self.options.pins, shared=self.options.leases
        )
        try:
            appservice = self._appservice(ledger, cluster)
        except BaseException:
            if cluster is not None:
                await cluster.leave()
            raise
        return Started(ledger, answers, intake, cluster, appservice, prompts, offers), here

    def _appservice(self, ledger: Ledger, cluster: Cluster | None) -> Appservice | None:
        """The appservice in its mode (several processes share an inbox); None otherwise."""
        if self.config.matrix.mode != "appservice":
            return None
        inbox = None if cluster is None else ledger.inbox()
        return Appservice(
            self.config.matrix.appservice, self.options.homeserver, self.options.data_dir, inbox
        )

    async def _log_in(self, here: set[str]) -> None:
        """Log in (and sync once) the accounts in ``here``, note them for the other processes,
        prepare the rooms and answer the invites the first sync found."""
        members: dict[str, AgentConfig | TeamConfig] = {**self.config.agents, **self.config.teams}
        names = {name: member.display_name or title(name) for name, member in members.items()}
        if ROUTER in here:
            names = {ROUTER: "Router", **names}
        # all at once, the router too: each login is a few requests that wait on the homeserver
        accounts = await asyncio.gather(
            *(self._login(name, shown) for name, shown in names.items() if name in here)
        )
        if accounts and accounts[0].name == ROUTER:
            self.router, *accounts = accounts
        self.agents = {account.name: account for account in accounts}
        everyone = self.local_accounts()
        await asyncio.gather(*(account.first_sync() for account in everyone))
        await self.note_accounts(everyone)
        await self.prepare_rooms()
        await self.answer_first_sync(everyone)

    async def _run_in_background(self) -> None:
        """Start the appservice's inbox, the memory watcher, the flush, maintenance, the lease
        rounds' service and the config watcher (shared memories are opened first)."""
        if self.appservice is not None:  # the homeserver's transactions, for every account
            tail = await self.appservice.listen(self.local_accounts)
            if tail is not None:
                tail.keeps, tail.prunes = lambda a: self.runs(a.name), lambda: self.runs(ROUTER)
                self.tasks.keep_running("appservice-inbox", tail.run)
            if self.appservice.catch_up is not None:  # what the homeserver kept, all the same
                self.tasks.keep_running("appservice-catch-up", self.appservice.catch_up.run)
        for name in self.config.agents:  # open (and index) shared memories before the first turn
            if self.runs(name):
                await asyncio.to_thread(self.memories.for_agent, name)
        self.tasks.keep_running(
            "memory-watch",
            lambda: watch_memory_files(
                [self.memories.roots_parent()],
                self.memories.sync_changed,
                self._watch_stop,
                gate=self.runtime.gate,
            ),
        )
        self.flush.owns = lambda entry: self.runs(flushed_by(entry, self.config))
        self.flush.audience = self.session_audience  # what a flush writes: where it was told
        self.spawn(self._backfill_audiences(), "audience-backfill")
        self.tasks.keep_running("memory-flush", self.flush.run)
        self.tasks.keep_running("consent-offers", self.started.offers.run)
        self.maintenance.active = lambda: self.runs(ROUTER)
        self.maintenance.start(self.tasks, wake_after=self.flush)  # ticks in the background
        if self.cluster is not None:
            self.cluster.serve(SharedAccounts(self))
        if self.reloader is not None:
            reloader = self.reloader
            await reloader.publish_environment()  # for the doctor, before the banner
            self.tasks.keep_running("config-watch", lambda: reloader.watch(self._watch_stop))

    def listen(self, account: MatrixAccount) -> None:
        """Deliver ``account``'s events to the intake from its saved sync position on (the sync
        loop restarted on failure)."""
        intake, ledger = self.intake, self.ledger
        account.listen(
            intake.on_message, intake.on_invite, intake.on_undecryptable, intake.on_reaction
        )
        if self.appservice is not None:  # no sync loop: the transactions feed it
            return
        account.on_rooms_changed = self._wake_router
        if account is self.router:
            account.rest_when(self._router_may_rest)
        else:
            self._wake_router()  # one more account that hears its rooms

        async def sync() -> None:
            token = await ledger.sync_token(account.user_id)
            await account.sync_forever(since=token, on_synced=intake.on_synced)

        self.tasks.keep_running(f"sync:{account.name}", sync)

    def _router_may_rest(self) -> bool:
        """True when the router need not long-poll: this process runs alone (no other process
        waits for this router to hear a message it must claim) and every room the router is
        in has an agent of this process in it that listens. The intake hears each event once,
        from whichever account heard it first, so the router's long-poll would only cost the
        homeserver a wake per event; the router still polls (an invite, a room it joins) and
        catches up before it speaks."""
        router = self.router
        if router is None or self.cluster is not None or self.appservice is not None:
            return False
        hearing = [account for account in self.agents.values() if account.listening]
        heard: set[str] = set().union(*(account.joined_rooms() for account in hearing))
        return router.joined_rooms() <= heard

    def _wake_router(self) -> None:
        """An account's rooms changed: a resting router asks again whether it may rest."""
        if self.router is not None:
            self.router.nudge()

    async def answer_first_sync(self, accounts: list[MatrixAccount]) -> None:
        """Answer the invites the first sync found (:meth:`Intake.answer_pending_invites`)."""
        await self.intake.answer_pending_invites(accounts)

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
        await self.answers.interrupt(name)
        account = self.agents.pop(name)
        account.stop()
        self._wake_router()  # the rooms it heard may now be the router's to hear
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

    def environment_changed(self) -> None:
        """The ``.env`` changed at a reload: the model clients, which read the environment
        when built, are built again at their next turn."""
        self.runtime.forget_models()

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
        """Answer the unfinished messages again (:meth:`Intake.resume`)."""
        self.intake.resume(unfinished, lead)

    # -- shutdown -----------------------------------------------------------------------------

    async def _backfill_audiences(self) -> None:
        """Give the entries the flush and the tools wrote before audiences were recorded the
        audience of the room they were learned in, as the rooms are now (once per start, and a
        scope left with nothing to give reads no history again). Each scope holds the erasure
        gate while it is filled in: it writes the readers of rooms, people's IDs, which a
        forget-me takes out (:mod:`mindroom.people.erasure`)."""
        shared = {n for n, agent in self.config.agents.items() if agent.private is None}
        owners = [("agent", n) for n in shared if self.runs(n)]
        owners += [
            ("team", n)
            for n, team in self.config.teams.items()
            if self.runs(n) and set(team.agents) <= shared
        ]
        for kind, name in owners:
            async with self.runtime.gate.working():
                work = asyncio.ensure_future(
                    asyncio.to_thread(self._backfill_audiences_of, kind, name)
                )
                self.runtime.gate.track(work)  # a shutdown's cancel does not stop its thread
                await work

    def _backfill_audiences_of(self, kind: str, name: str) -> None:
        """:meth:`_backfill_audiences` for one agent's or team's memory (blocking)."""
        team = self.config.teams.get(name) if kind == "team" else None
        if kind == "team" and team is None:  # removed by a reload meanwhile
            return
        try:
            memory = (
                self.memories.for_team(list(team.agents)) if team else self.memories.for_agent(name)
            )
            if memory is None or not keeps_files(memory):
                return
            backfill(memory, lambda run: self.session_audience(run, None), actor="audience")
        except Exception:  # an old entry keeps its default; the next start tries again
            logger.exception("audiences of %s %s were not filled in", kind, name)

    async def stop(self) -> None:
        """Stop listening, let in-flight replies finish (briefly), then close everything.

        A reply cancelled here stays claimed in the ledger and is resumed at the next start.
        Safe before :meth:`start`, after a start that failed half-way, and twice.
        """
        accounts = self.local_accounts()
        started = self._started
        cluster = None if started is None else started.cluster
        if cluster is not None:  # first: the other processes take over what is left
            await self.tasks.cancel("leases")
        if started is not None and started.appservice is not None:  # no transaction now
            await started.appservice.stop()
        for probe in self.tasks.jobs(_MODEL_PROBE):
            probe.cancel()
            await asyncio.gather(probe, return_exceptions=True)
        for account in accounts:
            account.stop()
        if started is not None:
            started.intake.stop()  # the sync positions not saved yet: now
        self._watch_stop.set()
        self.flush.stop()
        await self.maintenance.stop(_SHUTDOWN_GRACE_S)  # a running job ends between scopes
        await self.tasks.stop(_SHUTDOWN_GRACE_S)
        for account in accounts:
            with contextlib.suppress(Exception):
                await account.close()
        await self.runtime.close()
        self.memories.close()
        if self._others is not None:  # no work is left to hold still
            self.runtime.others = None
            await self._others.close()
            self._others = None
        if cluster is not None:  # after the last answer: what is unfinished moves on
            await cluster.leave()
        if started is not None:
            self._started = None
            await started.ledger.close()
