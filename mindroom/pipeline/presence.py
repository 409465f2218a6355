"""What the answer path sees of mindroom's accounts and rooms (:class:`Presence`, provided by
:class:`BotPresence`), who may talk in them, and who a message is for.

:class:`BotPresence` is mixed into :class:`mindroom.app.bot.Bot`. When several processes share
the agents (:mod:`mindroom.cluster.share`), an account may run in another process: it still counts
as one of mindroom's own (its messages are never answered as a person's), it can be mentioned,
and it is in a room when its user is among the members the local accounts see. Only :meth:`account`
and :meth:`runs` are about this process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Coroutine
from typing import Any, Protocol

from mindroom.adapters.matrix.accounts import localpart
from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.events import AgentIdentity, IncomingMessage, message_source
from mindroom.authorization import default_allowed_users, is_authorized
from mindroom.cluster.share import Cluster
from mindroom.config.schema import ROUTER, AgentConfig, Config, TeamConfig
from mindroom.memory.policy.gate import RoomAudience
from mindroom.pipeline.conversation import ConversationState
from mindroom.pipeline.routing import Route, RouteKind, route_message
from mindroom.pipeline.turns import room_of_session
from mindroom.tasks import TaskSupervisor

REQUESTER_KEY = "mindroom_requester"
"""Where a hand-off's ledger record keeps the person the chain is for (see :meth:`resume`)."""
ROUTE_KEY = "mindroom_route"
"""Where a hand-over's ledger record keeps the kind of its route, for the process taking it."""


def title(name: str) -> str:
    """An account's display name when the config gives none."""
    return name.replace("_", " ").title()


class Presence(Protocol):
    """What the answer path needs of mindroom's accounts and rooms (the bot provides it)."""

    def account(self, name: str) -> MatrixAccount:
        """The account of agent or team ``name``; KeyError when it is not running."""
        ...

    def room_agents(self, room_id: str) -> list[str]:
        """Agents joined to ``room_id``, in config order."""
        ...

    def identities(self) -> list[AgentIdentity]:
        """How each agent can be mentioned."""
        ...

    def own_user_ids(self) -> set[str]:
        """Every account mindroom runs."""
        ...

    def room_humans(self, room_id: str) -> frozenset[str]:
        """The people (not mindroom's accounts) joined to ``room_id``."""
        ...

    def audience(self, room_id: str, person: str) -> RoomAudience:
        """Who can read ``room_id``: only ``person`` (and mindroom's accounts), or others."""
        ...

    def session_audience(self, session_id: str, requester: str | None) -> RoomAudience | None:
        """Who can read the room of ``session_id`` now (None: no account here is in it)."""
        ...

    def display_name(self, room_id: str, user_id: str) -> str | None:
        """``user_id``'s display name in ``room_id`` (None when unknown)."""
        ...

    def is_direct(self, room_id: str) -> bool:
        """True for a direct chat: one person and one of mindroom's accounts in the room."""
        ...

    def room_names(self, room_id: str) -> list[str]:
        """The configured names of ``room_id`` (none for a DM or a room not configured)."""
        ...

    def spawn(self, coro: Any, name: str) -> object:
        """Run ``coro`` as a job the bot owns."""
        ...

    def runs(self, name: str) -> bool:
        """True when this process runs account ``name``."""
        ...

    @property
    def leased(self) -> bool:
        """True when leases decide which accounts this process runs."""
        ...

    async def hand_over(
        self, message: IncomingMessage, route: Route, agent: str, requester: str
    ) -> bool:
        """Queue ``agent``'s answer for the process running it; False when there is none."""
        ...


class BotPresence:
    """The rooms and accounts as every process's accounts together make them."""

    config: Config
    router: MatrixAccount | None
    agents: dict[str, MatrixAccount]
    room_ids: dict[str, str]
    tasks: TaskSupervisor
    state: ConversationState

    @property
    def cluster(self) -> Cluster | None:
        """This process's leases; None when it runs alone (the bot provides it)."""
        raise NotImplementedError

    def local_accounts(self) -> list[MatrixAccount]:
        """Every account this process runs, the router first."""
        return [a for a in [self.router, *self.agents.values()] if a is not None]

    def member_config(self, name: str) -> AgentConfig | TeamConfig:
        """The config of agent or team ``name``."""
        return self.config.agents.get(name) or self.config.teams[name]

    def user_of(self, name: str) -> str | None:
        """The Matrix user of account ``name``, wherever it runs (None: not known yet)."""
        if name == ROUTER and self.router is not None:
            return self.router.user_id
        if name in self.agents:
            return self.agents[name].user_id
        if self.cluster is not None and name in self.cluster.users:
            return self.cluster.users[name]  # noted by the process running it
        accounts = self.local_accounts()
        if self.cluster is not None and accounts and name not in self.config.matrix.logins:
            return f"@{localpart(name)}:{accounts[0].server_name}"
        return None

    @property
    def leased(self) -> bool:
        """True when leases decide which accounts this process runs."""
        return self.cluster is not None

    def runs(self, name: str) -> bool:
        """True when this process runs account ``name`` (always, alone on its storage)."""
        if self.cluster is not None:
            return self.cluster.runs(name)
        return name in self.agents or (name == ROUTER and self.router is not None)

    def own_user_ids(self) -> set[str]:
        """Every account mindroom runs, in any process."""
        own = {account.user_id for account in self.local_accounts()}
        if self.cluster is not None:
            names = [ROUTER, *self.config.agents, *self.config.teams]
            own |= {user for user in map(self.user_of, names) if user}
        return own

    def identities(self) -> list[AgentIdentity]:
        """How each agent can be mentioned."""
        found = []
        for name in [*self.config.agents, *self.config.teams]:
            user = self.user_of(name) if self.cluster is not None or name in self.agents else None
            if user:
                found.append(AgentIdentity(name, user, self.member_config(name).display_name or ""))
        return found

    def account(self, name: str) -> MatrixAccount:
        """The account of agent or team ``name``; KeyError when it does not run here."""
        return self.agents[name]

    def room_agents(self, room_id: str) -> list[str]:
        """Agents and teams joined to ``room_id``, in config order."""
        members: set[str] | None = None
        found = []
        for name in [*self.config.agents, *self.config.teams]:
            if name in self.agents:
                if room_id in self.agents[name].joined_rooms():
                    found.append(name)
            elif self.cluster is not None:
                if members is None:
                    members = self._members_of(room_id)
                if self.user_of(name) in members:
                    found.append(name)
        return found

    def router_in(self, room_id: str) -> bool:
        """True when the router is joined to ``room_id`` (run here or elsewhere)."""
        if self.router is not None:
            return room_id in self.router.joined_rooms()
        return self.cluster is not None and self.user_of(ROUTER) in self._members_of(room_id)

    def local_accounts_in(self, room_id: str) -> list[MatrixAccount]:
        """This process's accounts joined to ``room_id`` (the router first)."""
        return [a for a in self.local_accounts() if room_id in a.joined_rooms()]

    def _views_in(self, room_id: str) -> list[MatrixAccount]:
        """The accounts here whose view of ``room_id`` counts: those in it that listen live.
        A resting account (the router, see :meth:`MatrixAccount.rest_when`) sees the room as
        of its last poll: someone who left since would still count as a reader. It counts
        only where no live account is in the room."""
        accounts = self.local_accounts_in(room_id)
        return [a for a in accounts if not a.resting] or accounts

    def _members_of(self, room_id: str) -> set[str]:
        members: set[str] = set()
        for account in self._views_in(room_id):
            members |= account.room_members(room_id) | {account.user_id}
        return members

    def room_humans(self, room_id: str) -> frozenset[str]:
        """The people joined to ``room_id``, as the accounts in it last synced."""
        return humans(self._members_of(room_id), self.own_user_ids())

    def audience(self, room_id: str, person: str) -> RoomAudience:
        """Who can read ``room_id``, as the accounts in it last synced: only ``person`` when
        every account here in it finds it a closed room of that person and mindroom's accounts
        alone (:meth:`MatrixAccount.only_with`); otherwise its people (joined or invited), and
        whether nobody else can read it (closed, as every account here in it finds it; a room
        no account here is in counts as open). Accounts sync at their own pace (a resting
        router polls): a view one of them has not caught up with yet never makes a room more
        private than another account knows it to be."""
        own = self.own_user_ids()
        accounts = self._views_in(room_id)
        if accounts and all(a.only_with(room_id, person, own) for a in accounts):
            return RoomAudience.private_to(person, room_id)
        seen = [found for a in accounts if (found := a.readers(room_id)) is not None]
        if not seen:
            return RoomAudience.shared(self.room_humans(room_id), room_id=room_id)
        present = frozenset().union(*(found[0] for found in seen))
        return RoomAudience.shared(
            humans(set(present), own),
            closed=all(found[1] for found in seen),  # every account must find it closed
            room_id=room_id,
            encrypted=any(found[2] for found in seen),
            name=next((found[3] for found in seen if found[3]), None),
            rules_known=any(found[4] for found in seen),
        )

    def session_audience(self, session_id: str, requester: str | None) -> RoomAudience | None:
        """Who can read the room of ``session_id`` now; None when no account here is in it."""
        room_id = room_of_session(session_id)
        if room_id is None or not self.local_accounts_in(room_id):
            return None
        return self.audience(room_id, requester or "")

    def display_name(self, room_id: str, user_id: str) -> str | None:
        """``user_id``'s display name in ``room_id``, as an account in the room saw it."""
        for account in self.local_accounts_in(room_id):
            name = account.display_name(room_id, user_id)
            if name:
                return name
        return None

    def is_direct(self, room_id: str) -> bool:
        """True for a direct chat: one person and one of mindroom's accounts in the room."""
        members = self._members_of(room_id)
        own = members & self.own_user_ids()
        return len(own) == 1 and len(members - own) == 1

    def room_names(self, room_id: str) -> list[str]:
        """The configured names of ``room_id``."""
        return [name for name, known in self.room_ids.items() if known == room_id]

    async def note_accounts(self, accounts: list[MatrixAccount]) -> None:
        """Tell the other processes the users of this one's accounts, and learn theirs."""
        if self.cluster is None:
            return
        for account in accounts:
            await self.cluster.leases.note_account(account.name, account.user_id)
        self.cluster.users = await self.cluster.leases.accounts()

    def lead(self, message: IncomingMessage, route: Route) -> str:
        """The account whose process claims ``message`` (every process decides alike): the
        router for what it answers or chooses when it is in the room, else the first agent
        to answer (an ad hoc team's is the first in config order)."""
        if route.command or route.ask_router or route.kind is RouteKind.MENTIONED_ABSENT:
            if self.router_in(message.room_id):
                return ROUTER
            return (self.room_agents(message.room_id) or [ROUTER])[0]
        if route.team:  # named teams alone answer each for itself: the first leads
            agents = [name for name in self.config.agents if name in route.responders]
            return agents[0] if agents else route.responders[0]
        return route.responders[0]

    def allowed_users(self, room_id: str | None = None) -> list[str]:
        """Who may talk to mindroom (in ``room_id``), from the current config."""
        if room_id is not None:
            for name, known_id in self.room_ids.items():
                if known_id == room_id and name in self.config.room_names:
                    room_allowed = self.config.room_config(name).allowed_users
                    if room_allowed:
                        return room_allowed
        allowed = self.config.authorization.allowed_users
        if allowed:
            return allowed
        accounts = self.local_accounts()
        server = accounts[0].server_name if accounts else "*"
        return default_allowed_users(server)

    async def thread_senders(self, account: MatrixAccount, message: IncomingMessage) -> set[str]:
        """Who has posted in the message's thread: asked once per thread, then kept current."""
        if not message.thread_root:
            return set()
        senders = self.state.thread_senders(message.room_id, message.thread_root)
        if senders is None:
            senders = await account.thread_senders(message.room_id, message.thread_root)
        return self.state.set_thread_senders(
            message.room_id, message.thread_root, senders | {message.sender}
        )

    def route(self, message: IncomingMessage, thread_senders: set[str]) -> Route:
        """Who answers ``message`` (:func:`route_message`), as the rooms are now."""
        return route_message(
            message,
            room_agents=self.room_agents(message.room_id),
            identities=self.identities(),
            own_user_ids=self.own_user_ids(),
            authorized=is_authorized(message.sender, self.allowed_users(message.room_id)),
            thread_senders=thread_senders,
        )

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Run ``coro`` as a job the bot owns (awaited or cancelled at shutdown)."""
        return self.tasks.spawn(coro, name)

    async def hand_over(
        self, message: IncomingMessage, route: Route, agent: str, requester: str
    ) -> bool:
        """Queue ``agent``'s answer to ``message`` for the process that runs it; False when
        this process runs alone (an account not running here runs nowhere)."""
        if self.cluster is None:
            return False
        source = {**message_source(message), REQUESTER_KEY: requester, ROUTE_KEY: route.kind.value}
        await self.cluster.leases.hand_over(message.event_id, message.room_id, agent, source)
        return True


def resumed_requester(source: dict[str, Any], sender: str) -> str:
    """The person an unfinished answer was for, from its ledger record."""
    requester = source.get(REQUESTER_KEY)
    return requester if isinstance(requester, str) and requester else sender


def humans(members: Collection[str], own_user_ids: Collection[str]) -> frozenset[str]:
    """``members`` without mindroom's own accounts."""
    return frozenset(m for m in members if m not in own_user_ids)
