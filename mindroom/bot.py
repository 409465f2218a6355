"""The composition root: logs every account in, prepares rooms and answers messages.

:class:`Bot` owns every long-running task (one sync loop per account, one task per reply) and
cancels and awaits them on shutdown. Decisions live elsewhere: who answers is
:func:`mindroom.routing.route_message`, what is said is
:class:`mindroom.agents.runner.AgentRuntime`,
how it looks on Matrix is :mod:`mindroom.matrix.send`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from mindroom.agents.runner import AgentRuntime, TurnRequest, session_id_for
from mindroom.authorization import default_allowed_users, is_authorized
from mindroom.config.schema import Config
from mindroom.errors import MatrixError
from mindroom.matrix.accounts import CredentialStore, login_account, set_display_name
from mindroom.matrix.client import MatrixAccount
from mindroom.matrix.events import AgentIdentity, IncomingMessage
from mindroom.matrix.rooms import bring_into_room, ensure_room, invite_user
from mindroom.matrix.send import message_content, notice_content
from mindroom.routing import route_message

logger = logging.getLogger(__name__)

ROUTER = "router"
ACCOUNT_PREFIX = "mindroom_"
_SEEN_EVENTS = 10_000
_SHUTDOWN_GRACE_S = 10.0


@dataclass(frozen=True)
class BotOptions:
    """Where the bot runs: storage, homeserver, and who to invite (``--local``)."""

    storage: Path
    homeserver: str
    shared_secret: str | None = None
    invite_users: tuple[str, ...] = field(default_factory=tuple)

    @property
    def data_dir(self) -> Path:
        """Runtime state (credentials, sessions, homeserver): ``<storage>/mindroom_data``."""
        return self.storage / "mindroom_data"


class Bot:
    """Every configured agent plus the router, on one homeserver."""

    def __init__(self, config: Config, options: BotOptions) -> None:
        self.config = config
        self.options = options
        self.runtime = AgentRuntime(config, options.data_dir)
        self.router: MatrixAccount | None = None
        self.agents: dict[str, MatrixAccount] = {}
        self.room_ids: dict[str, str] = {}
        self._sync_tasks: list[asyncio.Task[None]] = []
        self._reply_tasks: set[asyncio.Task[None]] = set()
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._threads: OrderedDict[tuple[str, str], set[str]] = OrderedDict()
        self._started_ms = 0
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
        """Log in, sync once, prepare rooms, then start listening. Raises on fatal problems."""
        self._started_ms = int(time.time() * 1000)
        self.router = await self._login(ROUTER, "Router")
        self._allowed = self.config.authorization.allowed_users or default_allowed_users(
            self.router.server_name
        )
        accounts = await asyncio.gather(
            *(
                self._login(name, agent.display_name or name.replace("_", " ").title())
                for name, agent in self.config.agents.items()
            )
        )
        self.agents = {account.name: account for account in accounts}
        everyone = [self.router, *self.agents.values()]
        await asyncio.gather(*(account.first_sync() for account in everyone))
        await self._prepare_rooms()
        for account in everyone:
            account.listen(self._on_message, self._on_invite)
            self._sync_tasks.append(
                asyncio.create_task(account.sync_forever(), name=f"sync:{account.name}")
            )
        logger.info(
            "mindroom is running on %s as %d agents in %d rooms",
            self.options.homeserver,
            len(self.agents),
            len(self.room_ids),
        )

    async def _prepare_rooms(self) -> None:
        assert self.router is not None
        for name in self.config.room_names:
            settings = self.config.room_config(name)
            room_id = await ensure_room(
                self.router, name, join_rule=settings.join_rule, topic=settings.topic
            )
            self.room_ids[name] = room_id
            members = [
                self.agents[agent] for agent, cfg in self.config.agents.items() if name in cfg.rooms
            ]
            await asyncio.gather(
                *(bring_into_room(self.router, room_id, member) for member in members)
            )
            for user_id in self.options.invite_users:
                await invite_user(self.router, room_id, user_id)

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
            AgentIdentity(name, account.user_id, self.config.agents[name].display_name or "")
            for name, account in self.agents.items()
        ]

    def _first_sight(self, event_id: str) -> bool:
        """True the first time any account hears ``event_id`` (several accounts share rooms)."""
        if event_id in self._seen:
            return False
        self._seen[event_id] = None
        if len(self._seen) > _SEEN_EVENTS:
            self._seen.popitem(last=False)
        return True

    async def _thread_senders(self, account: MatrixAccount, message: IncomingMessage) -> set[str]:
        """Who has posted in the message's thread: asked once per thread, then kept current."""
        if not message.thread_root:
            return set()
        key = (message.room_id, message.thread_root)
        senders = self._threads.get(key)
        if senders is None:
            senders = await account.thread_senders(message.room_id, message.thread_root)
            self._threads[key] = senders
            if len(self._threads) > _SEEN_EVENTS:
                self._threads.popitem(last=False)
        senders.add(message.sender)
        return senders

    async def _on_message(self, account: MatrixAccount, message: IncomingMessage) -> None:
        if not self._first_sight(message.event_id):
            return
        thread_senders = await self._thread_senders(account, message)
        if message.timestamp_ms and message.timestamp_ms < self._started_ms:
            return  # history delivered on joining a room, not a new message
        room_agents = [
            name for name, acc in self.agents.items() if message.room_id in acc.joined_rooms()
        ]
        decision = route_message(
            message,
            room_agents=room_agents,
            identities=self.identities(),
            own_user_ids=self.own_user_ids,
            authorized=is_authorized(message.sender, self._allowed),
            thread_senders=thread_senders,
        )
        logger.debug("event %s in %s: %s", message.event_id, message.room_id, decision)
        for agent in decision.responders:
            task = asyncio.create_task(
                self._answer(agent, message), name=f"reply:{agent}:{message.event_id}"
            )
            self._reply_tasks.add(task)
            task.add_done_callback(self._reply_tasks.discard)

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

    async def _answer(self, agent: str, message: IncomingMessage) -> None:
        account = self.agents[agent]
        in_thread = self.config.agent_thread_mode(agent) == "thread"
        thread_root = (message.thread_root or message.event_id) if in_thread else None
        request = TurnRequest(
            agent=agent,
            session_id=session_id_for(agent, message.room_id, thread_root),
            user_id=message.sender,
            text=message.body,
        )
        try:
            async with account.typing(message.room_id):
                result = await self.runtime.run_turn(request)
            if result.ok:
                content = message_content(
                    result.text, thread_root=thread_root, reply_to=message.event_id
                )
            else:
                content = notice_content(
                    f"⚠️ {result.error}", thread_root=thread_root, reply_to=message.event_id
                )
            await account.send(message.room_id, content)
            if thread_root == message.event_id:  # a new thread: we know everyone in it
                self._threads.setdefault(
                    (message.room_id, thread_root), {message.sender, account.user_id}
                )
        except asyncio.CancelledError:
            raise
        except Exception:  # the edge of one reply: log it, keep the bot running
            account.log.exception("answering %s in %s failed", message.event_id, message.room_id)

    # -- shutdown -----------------------------------------------------------------------------

    async def stop(self) -> None:
        """Let in-flight replies finish (briefly), then stop syncing and close everything."""
        if self._reply_tasks:
            _, pending = await asyncio.wait(self._reply_tasks, timeout=_SHUTDOWN_GRACE_S)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
        accounts = [a for a in [self.router, *self.agents.values()] if a is not None]
        for account in accounts:
            account.stop()
        for task in self._sync_tasks:
            task.cancel()
        await asyncio.gather(*self._sync_tasks, return_exceptions=True)
        self._sync_tasks.clear()
        for account in accounts:
            with contextlib.suppress(Exception):
                await account.close()
        await self.runtime.close()
