"""The memory backend contract: the Protocol every backend (``file``, ``mem0``) meets.

Code outside the backends holds a memory as a :class:`MemoryBackend` and never asks which
class it is. What differs between backends is stated on the protocol as
:class:`Capabilities`, and code that needs a capability asks for it with
:func:`keeps_files` or :func:`in_engine`; both narrow the type (for mypy) to the backend that
offers it, so the capability's own API is checked too. Those two narrowings are also the
static proof that both backends meet the protocol: mypy refuses a narrowing to a type that is
not a :class:`MemoryBackend`. Only :mod:`mindroom.memory.registry` (which opens them) names
the concrete classes in an ``isinstance``; ``tests/test_memory_backend.py`` holds the rest of
the package to that.

Each operation has a blocking form (``*_sync``: the CLI, a worker thread) and an async form
(the bot's event loop) made from it by :func:`threaded`, the one async adapter: the call runs
in a worker thread under the bound of :func:`mindroom.memory.bounded.bounded`. Operations raise
:class:`~mindroom.errors.MemoryStoreError` for refused or failed operations, with a message fit
to show a person or a model; :class:`~mindroom.memory.policy.consent.ConsentPending` (a
``MemoryStoreError``) when a write waits for its subject's consent. ``actor`` names who wrote,
for the history; ``op_key`` makes a write idempotent (a repeated call answers from the first).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, Protocol, TypeVar

from typing_extensions import TypeIs

from mindroom.memory.bounded import bounded
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.index import SearchHit

if TYPE_CHECKING:
    from mindroom.memory.files.store import FileMemory
    from mindroom.memory.mem0.memory import Mem0Memory
    from mindroom.memory.policy.consent import Proposal, WriteConsent

_P = ParamSpec("_P")
_T = TypeVar("_T")
_S = TypeVar("_S")


@dataclass(frozen=True)
class Capabilities:
    """What a backend offers beyond the common contract."""

    files: bool = False
    """Markdown files are the memory's truth: entries have paths, fields and categories, our
    own history records every change, and the file jobs (curation, consolidation, insights,
    TTL, ``memory_query``, past conversations as a source, operational events) run on it."""

    own_engine: bool = False
    """An outside engine keeps the memories: it extracts facts with its own model, keeps its
    own change records and its own recall, and one process at a time opens its store."""


FILES = Capabilities(files=True)
ENGINE = Capabilities(own_engine=True)


class MemoryBackend(Protocol):
    """One scope's memory."""

    @property
    def scope_id(self) -> str:
        """The scope's id (``agent_<name>``, ``team_<a>+<b>``, a private scope's)."""
        ...

    @property
    def scope(self) -> MemoryScope:
        """The scope: its folders and whose it is (consent asks it)."""
        ...

    @property
    def capabilities(self) -> Capabilities:
        """What this backend offers beyond the contract."""
        ...

    # -- blocking (a worker thread; the CLI) ---------------------------------------------------

    def add_sync(
        self,
        text: str,
        *,
        actor: str,
        path: str | None = None,
        op_key: str | None = None,
        consent: WriteConsent | None = None,
    ) -> MemoryEntry:
        """Store ``text`` as a new entry (in ``path``, default the curated file, where the
        backend keeps files); ``consent``: whose word the write is on (None: nobody's)."""
        ...

    def search_sync(self, query: str, limit: int = 5) -> list[SearchHit]:
        """The entries best matching ``query``."""
        ...

    def list_sync(self, limit: int = 50) -> list[MemoryEntry]:
        """Entries, in the backend's listing order."""
        ...

    def get_sync(self, entry_id: str) -> MemoryEntry:
        """The entry with ``entry_id`` (another scope's id reads as a missing one)."""
        ...

    def update_sync(
        self,
        entry_id: str,
        text: str,
        *,
        actor: str,
        op_key: str | None = None,
        consent: WriteConsent | None = None,
    ) -> MemoryEntry:
        """Replace the text of ``entry_id``."""
        ...

    def delete_sync(self, entry_id: str, *, actor: str, op_key: str | None = None) -> MemoryEntry:
        """Remove ``entry_id`` (the backend's history keeps it)."""
        ...

    def read_file_sync(self, path: str, from_line: int = 1, lines: int = 100) -> str:
        """Lines of a memory file, numbered."""
        ...

    def write_confirmed(self, proposal: Proposal, *, actor: str, op_key: str) -> MemoryEntry:
        """Write a ``proposal`` its subject confirmed: the update it held back when that
        entry is still as it was, else a new entry; idempotent by ``op_key``."""
        ...

    def close(self) -> None:
        """Release what this scope holds open."""
        ...

    # -- async (the event loop): the blocking form in a worker thread, bounded -----------------

    async def add(
        self,
        text: str,
        *,
        actor: str,
        path: str | None = None,
        op_key: str | None = None,
        consent: WriteConsent | None = None,
    ) -> MemoryEntry:
        """:meth:`add_sync` in a worker thread."""
        ...

    async def search(self, query: str, limit: int = 5) -> list[SearchHit]:
        """:meth:`search_sync` in a worker thread."""
        ...

    async def list(self, limit: int = 50) -> list[MemoryEntry]:
        """:meth:`list_sync` in a worker thread."""
        ...

    async def get(self, entry_id: str) -> MemoryEntry:
        """:meth:`get_sync` in a worker thread."""
        ...

    async def update(
        self,
        entry_id: str,
        text: str,
        *,
        actor: str,
        op_key: str | None = None,
        consent: WriteConsent | None = None,
    ) -> MemoryEntry:
        """:meth:`update_sync` in a worker thread."""
        ...

    async def delete(self, entry_id: str, *, actor: str, op_key: str | None = None) -> MemoryEntry:
        """:meth:`delete_sync` in a worker thread."""
        ...

    async def read_file(self, path: str, from_line: int = 1, lines: int = 100) -> str:
        """:meth:`read_file_sync` in a worker thread."""
        ...


def keeps_files(memory: MemoryBackend | None) -> TypeIs[FileMemory]:
    """Whether ``memory`` keeps markdown files (:attr:`Capabilities.files`); when it does,
    it is the file backend's memory, and its file API may be used."""
    return memory is not None and memory.capabilities.files


def in_engine(memory: MemoryBackend | None) -> TypeIs[Mem0Memory]:
    """Whether an outside engine keeps ``memory`` (:attr:`Capabilities.own_engine`); when it
    does, it is the mem0 backend's memory, and the engine's API may be used."""
    return memory is not None and memory.capabilities.own_engine


def threaded(
    method: Callable[Concatenate[_S, _P], _T],
) -> Callable[Concatenate[_S, _P], Coroutine[Any, Any, _T]]:
    """The async form of a blocking method: the call runs in a worker thread and answers (or
    fails with a MemoryStoreError) within :data:`~mindroom.memory.bounded.CALL_SECONDS`, so the
    event loop never waits on disk. Used as ``add = threaded(add_sync)`` in a class body; the
    async method takes exactly the blocking one's arguments, and calls the blocking method by
    name, so a subclass that overrides it (:class:`~mindroom.memory.team.TeamMemory`) is
    called through the inherited async form too."""

    name = method.__name__

    async def run(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        blocking: Callable[_P, _T] = getattr(self, name)  # a subclass's override (a team's)
        return await bounded(blocking, *args, **kwargs)

    functools.update_wrapper(run, method, assigned=("__module__",))  # __wrapped__: its signature
    run.__name__ = method.__name__.removesuffix("_sync")
    run.__qualname__ = method.__qualname__.removesuffix("_sync")
    run.__doc__ = f":meth:`{method.__name__}` in a worker thread, bounded."
    return run
