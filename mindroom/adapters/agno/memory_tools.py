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
from mindroom.memory.policy.audience import AudiencePolicy
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.search.relations import RelationSettings
from mindroom.memory.tools import ScopeTools


class MemoryTools(Toolkit):
    """add/search/list/get/update/delete memories and read memory files of one scope."""

    def __init__(
        self,
        memory: MemoryBackend,
        actor: str = "tool",
        access: CategoryAccess | None = None,
        relations: RelationSettings | None = None,
        sessions: bool = False,
        room: RoomAudience | None = None,
        policy: AudiencePolicy = "strict",
    ) -> None:
        self.calls = ScopeTools(memory, actor, access, relations, sessions, room, policy)
        self.memory = memory
        self.view = self.calls.view  # every call goes through the agent's view
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
        return await self.calls.add(text, category, importance, pinned)

    async def search_memories(self, query: str, limit: int = 5) -> str:
        """Search your memory for entries matching the query, by words and by meaning.

        Args:
            query: What to look for.
            limit: How many results at most.
        """
        return await self.calls.search(query, limit)

    async def list_memories(self, limit: int = 20) -> str:
        """List memories: long-term ones first, then the daily logs, newest first.

        Args:
            limit: How many entries at most.
        """
        return await self.calls.list(limit)

    async def get_memory(self, id: str) -> str:  # noqa: A002 - the name the model sees
        """Show one memory by its id.

        Args:
            id: The memory id, as shown in brackets by the other tools.
        """
        return await self.calls.get(id)

    async def update_memory(self, id: str, text: str) -> str:  # noqa: A002
        """Replace the text of a memory.

        Args:
            id: The memory id.
            text: The new text.
        """
        return await self.calls.update(id, text)

    async def delete_memory(self, id: str) -> str:  # noqa: A002
        """Forget a memory (it stays in the history and can be restored).

        Args:
            id: The memory id.
        """
        return await self.calls.delete(id)

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
        return await self.calls.read_file(path, from_line, lines)
