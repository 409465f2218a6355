"""Who acts, for whom, and where: one pure decision for every turn.

:func:`plan_turn` is the only place that derives the identity of a turn. The answer path, a
hand-off, a resumed answer, compaction and the flush all use the :class:`TurnPlan` it returns,
so they can never disagree about whose account posts, whose private memory is used or which
session holds the history.

The rules it encodes:

* The **requester** is the person the turn is for: the human who wrote the message, or, for a
  hand-off, the human whose message started the chain. Never an agent's account.
* A **private** turn (a private companion, or a team with a private member) uses the
  requester's own scope: memory, session store, session id, compaction and flush state are per
  person, always. Two people in one thread with a companion have two conversations with it.
* **Private memory** (the requester's private memory entering the prompt, read or written by
  the memory tools, the delta header, learning) is used only where nobody but the requester
  (and mindroom's own accounts) can read the answer: their DM, or another room only they can
  read. In any room someone else can read, a private companion runs without it, however it
  got there (a mention, the router, a hand-off): a person in a group is never surprised by
  their private memory in front of others.
  :func:`mindroom.memory.policy.gate.private_memory_allowed`
  decides it, over the room's :class:`~mindroom.memory.policy.gate.RoomAudience`; its session and
  the flush still belong to the requester.

Pure: functions over config and plain values; no I/O.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from mindroom.config.schema import Config
from mindroom.memory.policy.gate import RoomAudience, private_memory_allowed
from mindroom.memory.private import requester_key
from mindroom.pipeline.routing import Route


@dataclass(frozen=True)
class TeamSpec:
    """A team for one turn: a configured team, or an ad hoc one (several agents mentioned)."""

    name: str
    members: tuple[str, ...]
    mode: str
    model: str
    display_name: str
    role: str = ""
    instructions: tuple[str, ...] = ()

    @classmethod
    def configured(cls, config: Config, name: str) -> TeamSpec:
        """The configured team ``name``."""
        team = config.teams[name]
        return cls(
            name=name,
            members=tuple(team.agents),
            mode=config.team_mode(name),
            model=team.model or config.defaults.model,
            display_name=team.display_name or name.replace("_", " ").title(),
            role=team.role,
            instructions=tuple(team.instructions),
        )

    @classmethod
    def ad_hoc(cls, config: Config, members: tuple[str, ...]) -> TeamSpec:
        """The team of several agents mentioned in one message (config order)."""
        ordered = tuple(m for m in config.agents if m in members)
        return cls(
            name="adhoc_" + "_".join(sorted(ordered)),
            members=ordered,
            mode=config.defaults.team_mode,
            model=config.agent_model(ordered[0]),
            display_name=" + ".join(config.agents[m].display_name or m for m in ordered),
            role="Several agents answering together.",
        )


def session_id_for(agent: str, room_id: str, thread_root: str | None, generation: int = 0) -> str:
    """The Agno session of ``agent`` in a room (``thread_root`` None) or in one thread.

    ``generation`` counts ``!new`` restarts of that conversation.
    """
    base = f"{agent}:{room_id}:{thread_root}" if thread_root else f"{agent}:{room_id}"
    return f"{base}#{generation}" if generation else base


def room_of_session(session_id: str) -> str | None:
    """The room of a session id made by :func:`session_id_for` (and :func:`private_session_id`);
    None when it is not one."""
    _, sep, rest = session_id.partition(":")
    if not sep or not rest.startswith("!"):
        return None
    # a room id is "!opaque:server"; a thread root ("$..."), a generation ("#n") or a person
    # ("@key") may follow, none of which a server name contains
    end = min((i for i in (rest.find(":$"), rest.find("#"), rest.find("@")) if i > 0), default=-1)
    return rest if end < 0 else rest[:end]


def private_session_id(base: str, requester: str) -> str:
    """The session of one person in a private conversation (see the module docstring)."""
    return f"{base}@{requester_key(requester)}"


@dataclass(frozen=True)
class TurnPlan:
    """Everything that says who acts, for whom, and where, for one answer."""

    agent: str  # the account that posts: an agent, a configured team, an ad hoc team's first
    requester: str  # the person the turn is for (never an agent's account)
    room_id: str
    thread_root: str | None  # the thread the answer goes in; None: the room's timeline
    reply_to: str  # the event the answer replies to
    team: TeamSpec | None
    session_id: str  # before compaction (see mindroom.sessions.compaction)
    private: bool  # memory, sessions and flush state are the requester's own
    private_recall: bool  # the requester's private memory may enter the prompt and tools
    streaming: bool
    group: bool = False  # other people are in the room: every message says who wrote it
    # who can read the room now: what memory the turn may show there, and the audience of
    # what it writes (mindroom.memory.policy.audience)
    audience: RoomAudience | None = None

    @property
    def owner(self) -> str:
        """Whose sessions these are: the team's, or the agent's."""
        return self.team.name if self.team else self.agent

    @property
    def conversation(self) -> str:
        """The conversation this turn belongs to, whatever its session is now: the owner in
        the room or thread (and the person, when private). Keys the session book."""
        base = session_id_for(self.owner, self.room_id, self.thread_root)
        return private_session_id(base, self.requester) if self.private else base

    @property
    def scope_requester(self) -> str | None:
        """The requester whose private scope the turn uses; None for shared memory."""
        return self.requester if self.private else None


def is_private(config: Config, agent: str, team: TeamSpec | None) -> bool:
    """True when a turn of ``agent`` (or ``team``) uses per-person private state."""
    if team is not None:
        return any(
            m in config.agents and config.agents[m].private is not None for m in team.members
        )
    return agent in config.agents and config.agents[agent].private is not None


def thread_mode(config: Config, agent: str, *, direct: bool = False) -> str:
    """``thread`` or ``room``: where ``agent`` answers.

    A direct chat (one person, one agent) is one conversation: answered in the timeline,
    unless the agent sets its own ``thread_mode``. Elsewhere the agent's mode, else the
    defaults'. Teams answer in threads.
    """
    if agent not in config.agents:
        return "thread"
    own = config.agents[agent].thread_mode
    if direct:
        return own or "room"
    return own or config.defaults.thread_mode


def answer_thread(
    config: Config,
    agent: str,
    thread_root: str | None,
    event_id: str,
    *,
    direct: bool = False,
    threadable: bool = True,
) -> str | None:
    """The thread ``agent`` answers the event ``event_id`` in (None: the room's timeline).

    A message someone wrote in a thread is answered in that thread whatever the mode; one that
    cannot root a thread (it has another relation) is answered in the timeline.
    """
    if threadable and thread_mode(config, agent, direct=direct) == "thread":
        return thread_root or event_id
    return thread_root


def plan_turn(
    config: Config,
    *,
    agent: str,
    route: Route,
    room_id: str,
    event_id: str,
    thread_root: str | None,
    requester: str,
    room_humans: Collection[str],
    audience: RoomAudience,
    team: TeamSpec | None = None,
    generation: int = 0,
    direct: bool = False,
    threadable: bool = True,
) -> TurnPlan:
    """The plan for ``agent`` answering the event ``event_id`` for ``requester``.

    ``route`` is why the agent answers (it never widens what memory the turn may use);
    ``room_humans`` are the people joined to the room
    (without mindroom's own accounts); ``audience`` is who can read the room (whether a
    private turn may use the requester's private memory there); ``generation`` counts
    ``!new`` in this room or thread; ``direct`` says the room is a direct chat (one person,
    one agent).
    """
    if team is None and agent in config.teams:
        team = TeamSpec.configured(config, agent)
    root = answer_thread(config, agent, thread_root, event_id, direct=direct, threadable=threadable)
    owner = team.name if team else agent
    private = is_private(config, agent, team)
    session_id = session_id_for(owner, room_id, root, generation)
    recall = True
    if private:
        session_id = private_session_id(session_id, requester)
        recall = private_memory_allowed(requester, audience)
    return TurnPlan(
        agent=agent,
        requester=requester,
        room_id=room_id,
        thread_root=root,
        reply_to=event_id,
        team=team,
        session_id=session_id,
        private=private,
        private_recall=recall,
        streaming=team is None and config.agent_streaming(agent),
        group=bool(set(room_humans) - {requester}),
        audience=audience,
    )
