"""The memory tools every agent with a memory backend gets, as an Agno toolkit.

Each tool works on one scope's memory (the one the turn belongs to), on either backend (the
markdown files or mem0), and returns text for the model. ``memory_search`` and ``memory_get``
are the names OpenClaw prompts use: ``memory_search`` is ``search_memories`` under another
name (one engine), ``memory_get`` reads a memory file (on mem0, ``MEMORY.md`` is the scope
rendered as markdown).

Errors come back as text, never raised into the bot, and writes are idempotent within a turn
(:func:`mindroom.memory.tools.tool_turn`): see :mod:`mindroom.memory.tools`.
"""

from __future__ import annotations

from agno.tools import Toolkit

from mindroom.memory.backend import MemoryBackend
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.view import AgentView
from mindroom.memory.search.relations import RelationSettings
from mindroom.memory.tools import (
    CATCHING_UP,
    _consent,
    _dated,
    _fields,
    _show,
    _turn_run,
    fields_key,
    guard,
    operation_key,
)


class MemoryTools(Toolkit):
    """add/search/list/get/update/delete memories and read memory files of one scope."""

    def __init__(
        self,
        memory: MemoryBackend,
        actor: str = "tool",
        access: CategoryAccess | None = None,
        relations: RelationSettings | None = None,
        sessions: bool = False,
    ) -> None:
        self.memory = memory
        self.actor = actor
        # every call goes through the agent's view: its allowlist, applied in the store
        self.view = AgentView(
            memory,
            access or CategoryAccess.everything(),
            count=True,
            relations=relations,
            sessions=sessions,
        )
        super().__init__(
            name="memory",
            tools=[
                self.add_memory,
                self.search_memories,
                self.list_memories,
                self.get_memory,
                self.update_memory,
                self.delete_memory,
                self.memory_search,
                self.memory_get,
            ],
        )

    async def add_memory(
        self,
        text: str,
        category: str | None = None,
        importance: int | None = None,
        pinned: bool = False,
    ) -> str:
        """Remember something durable about the user or the work (one fact per call).

        Args:
            text: The fact to remember, in the user's language.
            category: Where it belongs, e.g. profile, preferences, goals, tasks (default:
                general).
            importance: 1 (trivia) to 5 (essential); default 3.
            pinned: Keep it forever (it never expires).
        """

        async def act() -> str:
            fields = _fields(category, importance, pinned)
            words = fields_key(fields)  # none: the key a call without fields always had
            key = operation_key("add_memory", text, *([words] if words else []))
            run = _turn_run.get()
            entry = await self.view.add(
                text, actor=self.actor, op_key=key, fields=fields, run=run, consent=_consent()
            )
            return f"remembered {_show(entry)}"

        return await guard(act)

    async def search_memories(self, query: str, limit: int = 5) -> str:
        """Search your memory for entries matching the query, by words and by meaning.

        Args:
            query: What to look for.
            limit: How many results at most.
        """

        async def act() -> str:
            hits = await self.view.search(query, max(1, min(limit, 50)))
            note = CATCHING_UP if self.view.catching_up else ""
            if not hits:
                return f"no memories match {query!r}{note}"
            found = (f"{_show(h.entry)} ({_dated(h.entry)}score {h.score:.3g})" for h in hits)
            return "\n".join(found) + note

        return await guard(act)

    async def list_memories(self, limit: int = 20) -> str:
        """List memories: long-term ones first, then the daily logs, newest first.

        Args:
            limit: How many entries at most.
        """

        async def act() -> str:
            entries = await self.view.list(max(1, min(limit, 200)))
            return "\n".join(_show(e) for e in entries) or "no memories yet"

        return await guard(act)

    async def get_memory(self, id: str) -> str:  # noqa: A002 - the name the model sees
        """Show one memory by its id.

        Args:
            id: The memory id, as shown in brackets by the other tools.
        """

        async def act() -> str:
            return _show(await self.view.get(id))

        return await guard(act)

    async def update_memory(self, id: str, text: str) -> str:  # noqa: A002
        """Replace the text of a memory.

        Args:
            id: The memory id.
            text: The new text.
        """

        async def act() -> str:
            key = operation_key("update_memory", id, text)
            entry = await self.view.update(
                id, text, actor=self.actor, op_key=key, consent=_consent()
            )
            return f"updated {_show(entry)}"

        return await guard(act)

    async def delete_memory(self, id: str) -> str:  # noqa: A002
        """Forget a memory (it stays in the history and can be restored).

        Args:
            id: The memory id.
        """

        async def act() -> str:
            key = operation_key("delete_memory", id)
            entry = await self.view.delete(id, actor=self.actor, op_key=key)
            return f"deleted {_show(entry)}"

        return await guard(act)

    async def memory_search(self, query: str, limit: int = 5) -> str:
        """Search your memory for entries matching the query (the same search as
        search_memories).

        Args:
            query: What to look for.
            limit: How many results at most.
        """
        return await self.search_memories(query, limit)

    async def memory_get(self, path: str, from_line: int = 1, lines: int = 100) -> str:
        """Read lines of a memory file, e.g. "MEMORY.md" or "memory/2026-01-31.md", or of a
        past conversation a search found ("sessions/<session>.jsonl").

        Args:
            path: The file, relative to the memory folder.
            from_line: First line to read (1-based).
            lines: How many lines.
        """

        async def act() -> str:
            return await self.view.read_file(path, from_line, lines)

        return await guard(act)
