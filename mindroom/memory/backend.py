"""The memory backend contract: a small Protocol every backend (file now, mem0 later) meets.

Methods are async (the bot calls them on its event loop) and raise
:class:`~mindroom.errors.MemoryStoreError` for refused or failed operations, with a message
fit to show a person or a model. ``actor`` names who wrote, for the history.
"""

from __future__ import annotations

from typing import Protocol

from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.search.index import SearchHit


class MemoryBackend(Protocol):
    """One scope's memory."""

    scope_id: str

    async def add(self, text: str, *, actor: str, path: str | None = None) -> MemoryEntry:
        """Store ``text`` as a new entry (in ``path``, default the curated file)."""
        ...

    async def search(self, query: str, limit: int = 5) -> list[SearchHit]:
        """The entries best matching ``query``."""
        ...

    async def list(self, limit: int = 50) -> list[MemoryEntry]:
        """Entries, curated file first, then daily files newest first."""
        ...

    async def get(self, entry_id: str) -> MemoryEntry:
        """The entry with ``entry_id``."""
        ...

    async def update(self, entry_id: str, text: str, *, actor: str) -> MemoryEntry:
        """Replace the text of ``entry_id``."""
        ...

    async def delete(self, entry_id: str, *, actor: str) -> MemoryEntry:
        """Remove ``entry_id`` from its file (the history keeps it)."""
        ...

    async def read_file(self, path: str, from_line: int = 1, lines: int = 100) -> str:
        """Lines of a memory file, numbered."""
        ...
