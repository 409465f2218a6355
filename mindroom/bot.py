"""The composition root: logs every account in, prepares rooms and answers messages.

:class:`Bot` owns every long-running task (one sync loop per account, one task per handled
message) and cancels and awaits them on shutdown. Decisions live elsewhere: who answers is
:mod:`mindroom.routing`, what is said is :class:`mindroom.agents.runner.AgentRuntime`, how it
looks on Matrix is :mod:`mindroom.matrix.reply`, what was already answered is
:class:`mindroom.ledger.Ledger`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path

from mindroom.agents.router import choose_or_fall_back
from mindroom.agents.runner import AgentRuntime, TeamSpec, TurnRequest, session_id_for
from mindroom.authorization import default_allowed_users, is_authorized
from mindroom.command_runner import run_command
from mindroom.compaction import prepare_session
from mindroom.config.schema import AgentConfig, Config, TeamConfig
from mindroom.conversation import ConversationState
from mindroom.errors import MatrixError
from mindroom.flush import FlushWorker
from mindroom.handoff import hand_off
from mindroom.ledger import Ledger
from mindroom.matrix.accounts import CredentialStore, login_account, set_display_name
from mindroom.matrix.client import MatrixAccount
from mindroom.matrix.events import AgentIdentity, IncomingMessage, message_source, parse_message
from mindroom.matrix.reply import ReplyWriter
from mindroom.matrix.rooms import prepare_room
from mindroom.matrix.send import notice_content
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.watch import watch_memory_files
from mindroom.reload import ConfigReloader
from mindroom.routing import Route, route_message

logger = logging.getLogger(__name__)

ROUTER = "router"
ACCOUNT_PREFIX = "mindroom_"
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

    @property
    def data_dir(self) -> Path:
        """Runtime state (credentials, sessions, ledger, homeserver) under ``<storage>``."""
        return self.storage / "mindroom_data"


class Bot:
    """Every configured agent plus the router, on one homeserver."""

    def __init__(self, config: Config, options: BotOptions) -> None:
        self.config = config
        self.options = options
        self.memories = MemoryRegistry(config, options.storage, options.config_dir)
        self.runtime = AgentRuntime(config, options.data_dir, self.memories)
        self._watch_stop = asyncio.Event()
        self.flush = FlushWorker(config, self.runtime, self.memories, options.data_dir)
        self.reloader = ConfigReloader(self, options.config_path) if options.config_path else None
        self.router: MatrixAccount | None = None
        self.agents: dict[str, MatrixAccount] = {}
        self.room_ids: dict[str, str] = {}
        self.ledger: Ledger | None = None
        self._sync_tasks: list[asyncio.Task[None]] = []
        self._account_tasks: dict[str, asyncio.Task[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.state = ConversationState(config.router.context_messages)
        self._allowed: list[str] = []

    # -- start-up -----------------------------------------------------------------------------

    async def _login(self, name: str, display_name: str) -> MatrixAccount:
        store = CredentialStore(self.options.data_dir / "credentials.json")
        client = await login_account(
            self.options.homeserver,
            ACCOUNT_PREFIX + name,
            store,
            device_name=self.config.matrix.device_name,
            shared_secret=self.options.shared_secret,
        )
        account = MatrixAccount(name, client)
        await set_display_name(client, display_name)
        return account

    async def start(self) -> None:
        """Log in, sync once, prepare rooms, then listen and catch up. Raises on fatal problems."""
        self.ledger = await Ledger.open(self.options.data_dir / "ledger.db")
        self.router = await self._login(ROUTER, "Router")
        self._allowed = self.config.authorization.allowed_users or default_allowed_users(
            self.router.server_name
        )
        members = {**self.config.agents, **self.config.teams}
        accounts = await asyncio.gather(
            *(
                self._login(name, member.display_name or name.replace("_", " ").title())
                for name, member in members.items()
            )
        )
        self.agents = {account.name: account for account in accounts}
        everyone = [self.router, *self.agents.values()]
        await asyncio.gather(*(account.first_sync() for account in everyone))
        await self.prepare_rooms()
        for account in everyone:
            await self._listen(account)
        for name in self.config.agents:  # open (and index) shared memories before the first turn
            await asyncio.to_thread(self.memories.for_agent, name)
        self._sync_tasks.append(
            asyncio.create_task(
                watch_memory_files(
                    [self.memories.roots_parent()], self.memories.sync_changed, self._watch_stop
                ),
                name="memory-watch",
            )
        )
        self._sync_tasks.append(asyncio.create_task(self.flush.run(), name="memory-flush"))
        if self.reloader is not None:
            self._sync_tasks.append(
                asyncio.create_task(self.reloader.watch(self._watch_stop), name="config-watch")
            )
        await self._resume_pending()
        logger.info(
            "mindroom is running on %s as %d agents in %d rooms",
            self.options.homeserver,
            len(self.agents),
            len(self.room_ids),
        )

    async def _listen(self, account: MatrixAccount) -> None:
        assert self.ledger is not None
        token = await self.ledger.sync_token(account.user_id)
        account.listen(self._on_message, self._on_invite)
        self._account_tasks[account.name] = asyncio.create_task(
            account.sync_forever(since=token, on_synced=self._on_synced),
            name=f"sync:{account.name}",
        )

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
        """Make an account from :meth:`start_member` a member: answered for and listening."""
        self.agents[account.name] = account
        await self._listen(account)

    async def remove_member(self, name: str) -> None:
        """An agent or team removed from the config: leave its rooms and stop its account.

        The account is stopped and closed even when leaving a room fails.
        """
        account = self.agents.pop(name)
        account.stop()
        task = self._account_tasks.pop(name, None)
        try:
            for room_id in account.joined_rooms():
                await account.leave(room_id)
        finally:
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            await account.close()

    def set_config(self, config: Config) -> None:
        """Use ``config`` from the next turn on (hot reload); running turns finish as they were."""
        self.config = config
        self.runtime.set_config(config)
        self.memories.config = config
        self.flush.config = config

    async def prepare_rooms(self) -> None:
        """Make every configured room exist with its members in it (idempotent)."""
        assert self.router is not None
        everyone = {**self.config.agents, **self.config.teams}
        for name in self.config.room_names:
            settings = self.config.room_config(name)
            members = [self.agents[n] for n, cfg in everyone.items() if name in cfg.rooms]
            self.room_ids[name] = await prepare_room(
                self.router, name, settings, members, self.options.invite_users
            )

    async def _resume_pending(self) -> None:
        """Answer what a previous run claimed but did not finish (a crash, a kill -9)."""
        assert self.ledger is not None
        window_start = time.time() - self.config.matrix.catch_up_seconds
        expired = await self.ledger.expire(older_than=window_start)
        if expired:
            logger.info(
                "%d unfinished replies are older than the catch-up window; skipped", expired
            )
        for pending in await self.ledger.pending(newer_than=window_start):
            message = parse_message(pending.room_id, pending.source)
            if message is None:
                await self.ledger.finish(pending.event_id, "failed")
                continue
            logger.info("resuming the unfinished reply to %s", pending.event_id)
            self.state.first_sight(message.event_id)
            if pending.responders:  # a hand-off: its responders were decided already
                route = Route(pending.responders, "resumed hand-off")
            else:
                route = self._route(message, self._thread_senders_cached(message))
            self.spawn(self.handle(message, route), f"resume:{message.event_id}")

    # -- events -------------------------------------------------------------------------------

    @property
    def own_user_ids(self) -> set[str]:
        """Every account mindroom runs."""
        ids = {account.user_id for account in self.agents.values()}
        if self.router:
            ids.add(self.router.user_id)
        return ids

    def identities(self) -> list[AgentIdentity]:
        """How each agent can be mentioned."""
        return [
            AgentIdentity(name, account.user_id, self._member(name).display_name or "")
            for name, account in self.agents.items()
        ]

    def _member(self, name: str) -> AgentConfig | TeamConfig:
        """The config of agent or team ``name``."""
        return self.config.agents.get(name) or self.config.teams[name]

    def room_agents(self, room_id: str) -> list[str]:
        """Agents joined to ``room_id``, in config order."""
        return [name for name, acc in self.agents.items() if room_id in acc.joined_rooms()]

    def _allowed_in(self, room_id: str) -> list[str]:
        for name, known_id in self.room_ids.items():
            if known_id == room_id:
                return self.config.room_config(name).allowed_users or self._allowed
        return self._allowed

    def spawn(self, coro: object, name: str) -> None:
        """Run ``coro`` as a task the bot owns (awaited or cancelled at shutdown)."""
        task = asyncio.create_task(coro, name=name)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _on_synced(self, account: MatrixAccount, token: str) -> None:
        if self.ledger is None:
            return
        try:
            await self.ledger.save_sync_token(account.user_id, token)
        except Exception:
            logger.exception("cannot save the sync position of %s", account.user_id)

    def _thread_senders_cached(self, message: IncomingMessage) -> set[str]:
        return self.state.thread_senders(message.room_id, message.thread_root) or set()

    async def _thread_senders(self, account: MatrixAccount, message: IncomingMessage) -> set[str]:
        """Who has posted in the message's thread: asked once per thread, then kept current."""
        if not message.thread_root:
            return set()
        senders = self.state.thread_senders(message.room_id, message.thread_root)
        if senders is None:
            senders = await account.thread_senders(message.room_id, message.thread_root)
        return self.state.set_thread_senders(
            message.room_id, message.thread_root, senders | {message.sender}
        )

    def _route(self, message: IncomingMessage, thread_senders: set[str]) -> Route:
        return route_message(
            message,
            room_agents=self.room_agents(message.room_id),
            identities=self.identities(),
            own_user_ids=self.own_user_ids,
            authorized=is_authorized(message.sender, self._allowed_in(message.room_id)),
            thread_senders=thread_senders,
        )

    async def _on_message(self, account: MatrixAccount, message: IncomingMessage) -> None:
        if message.receiver_membership not in (None, "join"):
            return  # history from before this account joined; a member account may route it
        if not self.state.first_sight(message.event_id):
            return
        thread_senders = await self._thread_senders(account, message)
        route = self._route(message, thread_senders)
        self.state.note(message, self.own_user_ids)
        if not (route.responders or route.command):
            logger.debug("event %s in %s: %s", message.event_id, message.room_id, route.reason)
            return
        assert self.ledger is not None
        age_s = time.time() - message.timestamp_ms / 1000
        if age_s > self.config.matrix.catch_up_seconds:
            if await self.ledger.claim(
                message.event_id, message.room_id, (), message_source(message)
            ):
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
        if not await self.ledger.claim(
            message.event_id, message.room_id, (), message_source(message)
        ):
            return
        logger.info(
            "event %s in %s: %s (via %s, %s)",
            message.event_id,
            message.room_id,
            route.reason,
            account.name,
            message.receiver_membership,
        )
        self.spawn(self.handle(message, route), f"handle:{message.event_id}")

    async def _on_invite(self, account: MatrixAccount, room_id: str, sender: str) -> None:
        if room_id in account.joined_rooms():
            return
        if sender in self.own_user_ids or is_authorized(sender, self._allowed):
            account.log.info("accepting invite to %s from %s", room_id, sender)
            try:
                await account.join(room_id)
            except MatrixError as exc:
                account.log.warning("%s", exc)
        else:
            account.log.info("declining invite to %s from unauthorized %s", room_id, sender)
            await account.client.room_leave(room_id)

    # -- answering ----------------------------------------------------------------------------

    async def handle(self, message: IncomingMessage, route: Route) -> None:
        """Produce every answer ``route`` asks for, then mark the event done in the ledger."""
        assert self.ledger is not None
        status = "done"
        try:
            if route.command:
                await self._command(message)
            else:
                responders = route.responders
                if route.ask_router:
                    responders = (await self._choose(message, responders),)
                agents = tuple(r for r in responders if r in self.config.agents)
                if route.reason == "mentioned" and len(agents) > 1:
                    # several agents named: one team answer, posted by the first in config order
                    team = TeamSpec.ad_hoc(self.config, agents)
                    others = [r for r in responders if r not in agents]
                    await asyncio.gather(
                        self._answer(team.members[0], message, team),
                        *(self._answer(name, message) for name in others),
                    )
                else:
                    await asyncio.gather(*(self._answer(name, message) for name in responders))
        except asyncio.CancelledError:
            raise  # left claimed: the next start resumes it
        except Exception:  # the edge of one message: log it, keep the bot running
            status = "failed"
            logger.exception("handling %s in %s failed", message.event_id, message.room_id)
        await self.ledger.finish(message.event_id, status)

    async def _choose(self, message: IncomingMessage, candidates: tuple[str, ...]) -> str:
        roles = [(name, self._member(name).role) for name in candidates]
        recent = self.state.recent(message.room_id)[:-1]
        model = self.runtime.model(self.config.router_model)
        return await choose_or_fall_back(model, roles, recent, message.body, message.event_id)

    async def _answer(
        self, agent: str, message: IncomingMessage, team: TeamSpec | None = None
    ) -> None:
        """``agent``'s account answers ``message``: as that agent, as a configured team (when
        ``agent`` is one), or for the ad hoc ``team`` it posts for."""
        assert self.ledger is not None
        account = self.agents[agent]
        if team is None and agent in self.config.teams:
            team = TeamSpec.configured(self.config, agent)
        in_agent = agent in self.config.agents
        thread_mode = self.config.agent_thread_mode(agent) if in_agent else "thread"
        in_thread = thread_mode == "thread"
        thread_root = (message.thread_root or message.event_id) if in_thread else None
        generation = await self.ledger.session_generation(message.room_id, thread_root)
        owner = team.name if team else agent
        private = agent in self.config.agents and self.config.agents[agent].private is not None
        requester = message.sender if private or team else None
        session_id = session_id_for(owner, message.room_id, thread_root, generation)
        carried = ""
        if team is None:
            session_id, carried = await prepare_session(
                config=self.config,
                ledger=self.ledger,
                runtime=self.runtime,
                flush=self.flush,
                agent=agent,
                base_session=session_id,
                requester=requester,
                incoming=message.body,
            )
        request = TurnRequest(agent, session_id, message.sender, message.body, carried)
        writer = ReplyWriter(
            account,
            message.room_id,
            thread_root=thread_root,
            reply_to=message.event_id,
            txn_key=f"{message.event_id}|{agent}",
        )
        if thread_root == message.event_id:  # a new thread: we know everyone in it
            self.state.set_thread_senders(
                message.room_id, thread_root, {message.sender, account.user_id}
            )
        await self.flush.prompted(owner, request.session_id)
        streaming = team is None and self.config.agent_streaming(agent)
        async with account.typing(message.room_id):
            if team is not None:
                result = await self.runtime.run_team_turn(team, request)
            else:
                result = await self.runtime.run_turn(
                    request, on_text=writer.update if streaming else None
                )
        if result.text.strip():
            await writer.finish(result.text)
        if not result.ok:
            notice = notice_content(
                f"⚠️ {result.error}", thread_root=thread_root, reply_to=message.event_id
            )
            await account.send(
                message.room_id, notice, f"mindroom-error-{message.event_id}-{agent}"
            )
            return
        await self.flush.turn_finished(
            owner, request.session_id, requester, team.members if team else ()
        )
        if team is None:
            await hand_off(self, agent, message, thread_root, result.text, writer.event_ids[-1])

    async def _command(self, message: IncomingMessage) -> None:
        await run_command(self, message)

    # -- shutdown -----------------------------------------------------------------------------

    async def stop(self) -> None:
        """Stop listening, let in-flight replies finish (briefly), then close everything.

        A reply cancelled here stays claimed in the ledger and is resumed at the next start.
        """
        accounts = [a for a in [self.router, *self.agents.values()] if a is not None]
        for account in accounts:
            account.stop()
        self._watch_stop.set()
        self.flush.stop()
        self._sync_tasks.extend(self._account_tasks.values())
        self._account_tasks.clear()
        for task in self._sync_tasks:
            task.cancel()
        await asyncio.gather(*self._sync_tasks, return_exceptions=True)
        self._sync_tasks.clear()
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=_SHUTDOWN_GRACE_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        for account in accounts:
            with contextlib.suppress(Exception):
                await account.close()
        await self.runtime.close()
        self.memories.close()
        if self.ledger is not None:
            await self.ledger.close()
            self.ledger = None
