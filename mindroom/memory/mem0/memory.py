"""One scope's memory in mem0: the :class:`~mindroom.memory.backend.MemoryBackend` contract.

Entries are mem0 memories shown as :class:`MemoryEntry` (``id`` mem0's id, ``path`` ``"mem0"``,
lines 0). Search scores are cosine similarities, like the file backend's vector half, so the
recall gate's ``min_similarity`` means the same on both backends.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mindroom.memory.index import SearchHit
from mindroom.memory.markdown import MemoryEntry

if TYPE_CHECKING:
    from mindroom.agents.extraction import ChatLine
    from mindroom.memory.mem0.engine import Mem0Engine

MEM0_PATH = "mem0"  # the ``path`` of every mem0 entry


class Mem0Memory:
    """The memories of one scope (a mem0 ``user_id`` namespace) in a shared engine."""

    backend = "mem0"

    def __init__(self, engine: Mem0Engine, scope_id: str, state_dir: Path) -> None:
        self.engine = engine
        self.scope_id = scope_id
        self.state_dir = state_dir  # this scope's own small state (write idempotency)

    # -- the MemoryBackend contract (async; blocking work runs in a thread) ---------------------

    async def add(
        self, text: str, *, actor: str, path: str | None = None, op_key: str | None = None
    ) -> MemoryEntry:
        """Store ``text`` as one memory, verbatim (no model call); ``path`` is ignored."""
        raise NotImplementedError

    async def search(self, query: str, limit: int = 5) -> list[SearchHit]:
        """This scope's memories most similar to ``query``, scored by cosine similarity."""
        raise NotImplementedError

    async def list(self, limit: int = 50) -> list[MemoryEntry]:
        """This scope's memories, newest first."""
        raise NotImplementedError

    async def get(self, entry_id: str) -> MemoryEntry:
        """The memory ``entry_id`` of this scope (another scope's id is "no such memory")."""
        raise NotImplementedError

    async def update(
        self, entry_id: str, text: str, *, actor: str, op_key: str | None = None
    ) -> MemoryEntry:
        """Replace the text of ``entry_id``."""
        raise NotImplementedError

    async def delete(self, entry_id: str, *, actor: str, op_key: str | None = None) -> MemoryEntry:
        """Forget ``entry_id`` (mem0's history keeps it)."""
        raise NotImplementedError

    async def read_file(self, path: str, from_line: int = 1, lines: int = 100) -> str:
        """Lines of ``MEMORY.md`` as :meth:`export_markdown` renders this scope (numbered)."""
        raise NotImplementedError

    # -- beyond the contract ------------------------------------------------------------------

    def extract_sync(self, lines: list[ChatLine]) -> list[str]:
        """mem0's own extraction of ``lines`` (its model call): the texts of new memories."""
        raise NotImplementedError

    def search_sync(self, query: str, limit: int = 5) -> list[SearchHit]:
        """:meth:`search`, blocking."""
        raise NotImplementedError

    def history_sync(self, entry_id: str | None = None) -> list[dict[str, str]]:
        """mem0's change records of ``entry_id`` (of this scope only)."""
        raise NotImplementedError

    def export_markdown(self) -> str:
        """This scope as a markdown memory file: ``- text <!-- id -->`` lines, oldest first."""
        raise NotImplementedError

    def import_entries(self, texts: list[str], *, actor: str) -> list[MemoryEntry]:
        """Add each of ``texts`` not already stored verbatim in this scope."""
        raise NotImplementedError

    def close(self) -> None:
        """Nothing to release per scope: the engine is shared (closed by the registry)."""
