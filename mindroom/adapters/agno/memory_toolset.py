"""The memory tools a turn gets: the toolkit, ``memory_query``, or both (``memory.tools``).

Toolkits are kept per agent and memory (Agno inspects tool signatures when a toolkit is
built, so building one per turn would cost every turn) and built again when the registry
reopened the memory or a reload changed what the agent may see (its allowlist): access is
never read once and kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from agno.tools import Toolkit
from agno.tools.function import Function

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.adapters.agno.query_tool import memory_query_function
from mindroom.config.schema import Config
from mindroom.memory.backend import MemoryBackend, keeps_files
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.policy.view import AgentView
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.search.relations import RelationSettings
from mindroom.memory.search.structured_query import Asker
from mindroom.memory.tools import guard
from mindroom.people.memory_chat import about_me_text


def recall_contract(tools: str) -> str:
    """What every agent with memory is told about looking further than the memory block its
    turn comes with, for the memory tools it has (``memory.tools``)."""
    if tools == "query":
        how = "search your memory with memory_query (bullets, a small top_k)"
        read = "use only the results you need"
    else:
        how = "search your memory (memory_search, or memory_query)"
        read = "read only the lines you need (memory_get with from_line and lines), not whole files"
    return (
        "Before answering a question about prior work, decisions, dates, people, preferences "
        f"or todos, {how} unless the memory given for this turn already answers it; then "
        f"{read}."
    )


# what Agno takes as a tool
AgnoTool = Toolkit | Callable[..., Any] | Function | dict[Any, Any]


def _settings(view: AgentView) -> tuple[object, ...]:
    """What a cached toolkit's view was made with (a change makes a new one)."""
    return (view.memory, view.access, view.relations, view.sessions, view.room, view.policy)


class MemoryToolsets:
    """The memory tools of each agent's turns, with a bounded cache of toolkits."""

    def __init__(self) -> None:
        self._toolkits: dict[str, MemoryTools] = {}

    def for_turn(
        self,
        config: Config,
        name: str,
        memory: MemoryBackend,
        *,
        requester: str | None,
        members: Sequence[str] | None = None,
        keep: int = 64,
        registry: MemoryRegistry | None = None,
        room: RoomAudience | None = None,
    ) -> list[AgnoTool]:
        """The tools of a turn of agent (or team of ``members``) ``name`` on ``memory`` for
        ``requester``, answering in ``room`` (what its reads may show and its writes' audience;
        None: no room); ``keep`` toolkits stay cached. With the ``registry``, the requester's
        own entries can be listed (``memories_about_me``)."""
        access = CategoryAccess.for_owner(config, name, members)
        relations = RelationSettings.of(config.memory.relations)
        key = f"{name}|{memory.scope_id}|{room.room_id if room else ''}"
        sessions = config.memory.sessions_source
        policy = config.memory.audience
        wanted = (memory, access, relations, sessions, room, policy)
        toolkit = self._toolkits.pop(key, None)
        view = toolkit.view if toolkit else None
        if toolkit is None or view is None or _settings(view) != wanted:
            toolkit = MemoryTools(
                memory,
                access=access,
                relations=relations,
                sessions=sessions,
                room=room,
                policy=policy,
            )
        self._toolkits[key] = toolkit  # most recent last
        while len(self._toolkits) > keep:
            del self._toolkits[next(iter(self._toolkits))]
        tools: list[AgnoTool] = []
        if config.memory.tools == "all" or not keeps_files(memory):
            tools.append(toolkit)  # mem0 has no memory_query: its tools stay
        if keeps_files(memory):
            owners = (
                frozenset({name, *config.teams_of(name)}) if members is None else frozenset({name})
            )
            asker = Asker(agent=name, user_id=requester, owners=owners)
            tools.append(memory_query_function(toolkit.view, asker))
        everything = config.memory.tools == "all" or not keeps_files(memory)
        if everything and registry is not None and requester is not None:
            tools.append(about_me_tool(config, registry, name, toolkit.view, requester))
        return tools


_ABOUT_ME = (
    "List everything you remember about the user you are talking to, with each entry's\n"
    "id, date and where it was learned. Use it when they ask what you know about them."
)


def about_me_tool(
    config: Config, registry: MemoryRegistry, owner: str, view: AgentView, requester: str
) -> Function:
    """The ``memories_about_me`` tool: what the turn's memory holds about the person asking,
    as ``!memory list`` finds it, of what the turn's room may show (``view``, the turn's view:
    :func:`mindroom.people.memory_chat.about_me_text`). Made each turn (it is the asker's), so
    its schema is written out: Agno would derive it from the function's signature and
    docstring on every turn."""

    async def memories_about_me() -> str:
        async def act() -> str:
            return await asyncio.to_thread(
                about_me_text, config, registry, owner, view.memory, requester, view
            )

        return await guard(act)

    return Function(
        name="memories_about_me",
        description=_ABOUT_ME,
        parameters={"type": "object", "properties": {}, "required": []},
        entrypoint=memories_about_me,
        skip_entrypoint_processing=True,
    )
