"""Which memory a turn uses: one open memory per scope, opened on first use.

* a shared agent: ``agent_<name>`` under ``<storage>/agents/<name>/workspace``;
* a private companion: the requester's own scope (see :mod:`mindroom.memory.private`),
  scaffolded from the agent's template on first use;
* a team: ``team_<members>``, mirrored into every member's folder; an ad hoc team with a
  private member gets a scope keyed by the requester too.

Shared memories stay open. Memories keyed by a requester (private companions, their teams)
are kept open only for the most recently used ``memory.max_open_private_instances`` people
(lowered to what the descriptor limit affords, see :mod:`mindroom.app.resources`): the least
recently used one is closed, and whoever still holds it finds its index reopened on next use.
While anyone holds a closed memory, the next turn of that person gets that same object back
(so there is never a second open copy of one scope).
So a thousand people over a day cost the descriptors of the recently active ones, not of all.

With ``memory.backend: mem0`` (per agent ``agents.<name>.memory_backend``; a team follows
``memory.backend``) the same scopes are :class:`~mindroom.memory.mem0.Mem0Memory` namespaces
of one shared mem0 engine per embedder (:func:`mindroom.memory.mem0.engine.mem0_engine`),
which opens mem0 on first use, not here. A private companion on mem0 still gets its private
folders (scaffolded as on the file backend), but its memory is mem0's, not those files.

Each memory searches with its agent's embedder (``agents.<name>.memory_embedder``, else
``memory.embedder``; a team's with ``memory.embedder``), one shared instance per embedder
(:func:`mindroom.adapters.embeddings.select.shared_embedder`); a reloaded config takes effect on the
next use of each memory.

A reload closes no mem0 engine: each lookup hands the engine of its embedder's model the newest
config (extraction model) and embedder (a server or key changed for the same model), so both
apply at once; another model gets another engine (another collection) and the old one stays
open, cheap, until :meth:`MemoryRegistry.close`. A turn or an extraction already running keeps
the memory it started with, and it is never closed under it.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING

from mindroom.adapters.embeddings import Embedder
from mindroom.adapters.embeddings.select import shared_embedder
from mindroom.app.resources import private_instance_limit
from mindroom.config.paths import (
    CONFIG_FOLDER,
    STORAGE_ROOT,
    check_config_paths,
    resolve_inside,
)
from mindroom.config.schema import Config, EmbedderConfig
from mindroom.memory.backend import MemoryBackend
from mindroom.memory.files.store import FileMemory
from mindroom.memory.mem0 import Mem0Memory
from mindroom.memory.mem0.engine import close_engines, mem0_dir, mem0_engine
from mindroom.memory.private import PRIVATE_DIR as PRIVATE_DIR_NAME
from mindroom.memory.private import PrivateInstance, private_instance, requester_key, scaffold
from mindroom.memory.scope import MemoryScope, agent_scope, state_dir, team_scope_id
from mindroom.memory.search.hybrid import Weights
from mindroom.memory.search.pg_search import SEARCH_LOCK_KEY, PgSearch
from mindroom.memory.search.session_source import close_all as close_session_indexes
from mindroom.memory.team import TeamMemory

if TYPE_CHECKING:  # SQLAlchemy loads only with memory.search.index: postgresql
    from mindroom.store.database import SyncDatabase

logger = logging.getLogger(__name__)


class MemoryRegistry:
    """Opens and keeps the memories of a storage root."""

    def __init__(self, config: Config, storage: Path, config_dir: Path | None = None) -> None:
        self.config = config
        self.storage = storage
        self.config_dir = config_dir or storage
        self._open: dict[str, FileMemory] = {}
        self._private: OrderedDict[str, FileMemory] = OrderedDict()  # least recent first
        # closed ones someone still holds (a turn's tools): handed out again, never duplicated
        self._closed: weakref.WeakValueDictionary[str, FileMemory] = weakref.WeakValueDictionary()
        self._mem0: dict[str, Mem0Memory] = {}  # light: the engine holds what is open
        self._lock = threading.Lock()
        self._search_index: tuple[str, SyncDatabase] | None = None  # memory.search.index

    def private_capacity(self) -> int:
        """How many requester-keyed memories stay open (the rest are closed until used)."""
        return private_instance_limit(self.config.memory.max_open_private_instances)

    def open_private(self) -> list[str]:
        """Scope ids of the requester-keyed memories open now, least recently used first."""
        with self._lock:
            return list(self._private)

    def embedder(self, config: EmbedderConfig | None) -> Embedder | None:
        """The shared embedder for ``config`` (None: keyword-only); paths are relative to the
        config file's folder."""
        return shared_embedder(
            config, self.config_dir, auto_install=self.config.memory.auto_install
        )

    def search_weights(self) -> Weights:
        """How searches fuse their keyword and vector hits (``memory.search``)."""
        search = self.config.memory.search
        return Weights(
            search.keyword_weight,
            search.vector_weight,
            search.candidates,
            search.neighbour_weight,
            search.file_weight,
        )

    def search_index(self) -> SyncDatabase | None:
        """The database of ``memory.search.index: postgresql`` (None: local), its table made
        on first use. None, logged, when it cannot be made (no pgvector): searches stay
        local, never fail."""
        url = self.config.storage.database
        if self.config.memory.search.index != "postgresql" or not url:
            return None
        with self._lock:
            if self._search_index is not None and self._search_index[0] == url:
                return self._search_index[1]
            from mindroom.store.database import SyncDatabase

            db = SyncDatabase(url, SEARCH_LOCK_KEY)
            try:
                PgSearch.prepare(db)
            except Exception as exc:
                db.close()
                logger.error(
                    "memory.search.index: postgresql is not usable (%s: %s); memory "
                    "searches stay local",
                    type(exc).__name__,
                    str(exc)[:200],
                )
                return None
            self._search_index = (url, db)
            return db

    def _get(self, scope: MemoryScope, embedder: Embedder | None) -> FileMemory:
        with self._lock:
            memory = self._open.get(scope.scope_id)
            if memory is None:
                memory = self._open[scope.scope_id] = FileMemory(scope, embedder)
        memory.use_embedder(embedder)
        memory.search_weights = self.search_weights()
        memory.search_db = self.search_index()
        return memory

    def _get_private(self, scope: MemoryScope, embedder: Embedder | None) -> FileMemory:
        """The memory of a requester's scope, kept among the recently used (LRU)."""
        with self._lock:
            memory = self._private.get(scope.scope_id) or self._closed.pop(scope.scope_id, None)
            if memory is None:
                memory = FileMemory(scope, embedder)
            self._private[scope.scope_id] = memory
            self._private.move_to_end(scope.scope_id)
            evicted = []
            while len(self._private) > self.private_capacity():
                scope_id, old = self._private.popitem(last=False)
                self._closed[scope_id] = old
                evicted.append(old)
        for old in evicted:  # outside the registry lock: closing waits for the index's own
            old.close()
        memory.use_embedder(embedder)
        memory.search_weights = self.search_weights()
        memory.search_db = self.search_index()
        return memory

    def _get_mem0(
        self,
        scope_id: str,
        state: Path,
        embedder: Embedder | None,
        agent: str | None = None,
        person_key: str | None = None,
    ) -> Mem0Memory:
        """The mem0 memory of ``scope_id`` (its engine is shared and opens on first use);
        ``person_key``: a private scope's person (whom its facts are about, for consent)."""
        engine = mem0_engine(self.config, mem0_dir(self.storage), embedder)
        with self._lock:
            memory = self._mem0.get(scope_id)
            if memory is None or memory.engine is not engine:
                memory = Mem0Memory(engine, scope_id, state, agent, person_key)
                self._mem0[scope_id] = memory
        return memory

    def open_private_scope(self, scope: MemoryScope, agent: str | None) -> FileMemory:
        """The file memory of a person's ``scope`` found on disk (a private companion's folder,
        ``agent``, or a team's with one, agent None), kept among the recently used ones."""
        config = self.config.agent_embedder(agent) if agent else self.config.memory_embedder
        return self._get_private(scope, self.embedder(config))

    def open_private_mem0(self, scope: MemoryScope, agent: str | None = None) -> Mem0Memory:
        """The mem0 memory of a person's ``scope`` found on disk (a private companion's,
        ``agent``, or a team's with one, agent None), as :meth:`for_agent` and :meth:`for_team`
        open it."""
        config = self.config.agent_embedder(agent) if agent else self.config.memory_embedder
        embedder = self.embedder(config)
        return self._get_mem0(scope.scope_id, scope.state_dir, embedder, agent, scope.person_key)

    def private_instance(self, agent: str, requester: str) -> PrivateInstance | None:
        """The private instance of ``agent`` for ``requester``; None for a shared agent."""
        private = self.config.agents[agent].private
        if private is None:
            return None
        return private_instance(self.storage, agent, requester, per=private.per, root=private.root)

    def existing_for_agent(self, agent: str, requester: str) -> MemoryBackend | None:
        """As :meth:`for_agent`, but None for a private companion ``requester`` never talked to
        (opening it would make their folder: a look for what waits must not)."""
        instance = self.private_instance(agent, requester)
        if instance is not None and not instance.instance_dir.exists():
            return None
        return self.for_agent(agent, requester)

    def state_dir_of(self, agent: str, requester: str) -> Path | None:
        """Where :meth:`existing_for_agent` keeps its state (the proposals, the consolidation
        records), opening and making nothing; None where it is None."""
        if self.config.agent_memory_backend(agent) == "none":
            return None
        instance = self.private_instance(agent, requester)
        if instance is None:
            return agent_scope(self.storage, agent, self.file_root()).state_dir
        if not instance.instance_dir.exists():
            return None
        return instance.memory_scope().state_dir

    def for_agent(self, agent: str, requester: str | None = None) -> MemoryBackend | None:
        """The memory agent ``agent`` uses when ``requester`` talks to it (None: no memory).

        A private agent without a requester (the CLI without ``--user``) has no memory.
        """
        backend = self.config.agent_memory_backend(agent)
        private = self.config.agents[agent].private
        if private is not None:
            if requester is None:
                return None
            instance = self.private_instance(agent, requester)
            assert instance is not None
            scope = instance.memory_scope()
            template = None
            if private.template_dir:
                key = f"agents.{agent}.private.template_dir"
                template = resolve_inside(self.config_dir, private.template_dir, key, CONFIG_FOLDER)
            # the private folders exist whatever the backend (the template's files too)
            scaffold(template, instance.memory_root, scope.state_dir / "scaffold.json")
            if backend != "file":  # the private folders exist; the memory is not in them
                instance.memory_root.mkdir(parents=True, exist_ok=True)
            if backend == "none":
                return None
            embedder = self.embedder(self.config.agent_embedder(agent))
            if backend == "mem0":
                return self._get_mem0(
                    scope.scope_id, scope.state_dir, embedder, agent, scope.person_key
                )
            return self._get_private(scope, embedder)
        if backend == "none":
            return None
        embedder = self.embedder(self.config.agent_embedder(agent))
        scope = agent_scope(self.storage, agent, self.file_root())
        if backend == "mem0":
            return self._get_mem0(scope.scope_id, scope.state_dir, embedder, agent)
        return self._get(scope, embedder)

    def for_team(
        self, members: list[str], requester: str | None = None, via: str | None = None
    ) -> MemoryBackend | None:
        """The memory of the team of ``members`` (mirrored; keyed by requester if private)."""
        backend = self.config.memory.backend
        if backend == "none":
            return None
        embedder = self.embedder(self.config.memory_embedder)
        if any(self.config.agents[m].private is not None for m in members):
            if requester is None:
                return None
            key = requester_key(requester)
            base = self.storage / "private_instances" / key / "teams" / team_scope_id(members)
            scope_id = f"{team_scope_id(members)}__{key}"
            scope = MemoryScope(scope_id, base / "files", base / ".state", key)
            if backend == "mem0":
                return self._get_mem0(scope.scope_id, scope.state_dir, embedder, None, key)
            return self._get_private(scope, embedder)
        if backend == "mem0":
            scope_id = team_scope_id(members)
            return self._get_mem0(scope_id, state_dir(self.storage, scope_id), embedder)
        with self._lock:
            key = f"{team_scope_id(members)}@{via or ''}"
            memory = self._open.get(key)
            if memory is None:
                memory = self._open[key] = TeamMemory(
                    self.storage, members, via=via, file_root=self.file_root()
                )
        memory.use_embedder(embedder)
        memory.search_weights = self.search_weights()
        memory.search_db = self.search_index()
        return memory

    def file_root(self) -> str | None:
        """``memory.file.path``, once it is known to stay inside the storage root with
        symlinks resolved (:class:`ConfigError` naming the key when it does not)."""
        file_root = self.config.memory.file.path
        if file_root:
            resolve_inside(self.storage, file_root, "memory.file.path", STORAGE_ROOT)
        return file_root

    def check_paths(self, config: Config | None = None) -> None:
        """Refuse (:class:`ConfigError` naming the key) a path of ``config`` (default: the one
        in use) that leads out of its folder through a symlink (:func:`check_config_paths`)."""
        check_config_paths(config or self.config, self.storage, self.config_dir)

    def forget_person(self, key: str | None) -> None:
        """Close and drop every open memory of the person whose folder key is ``key`` (before
        their folder is erased: nothing of theirs stays open to be written again); None: of
        every person (another process erases one this process cannot name). They open again
        at their next use."""
        marker = f"{PRIVATE_DIR_NAME}/{key}/" if key is not None else f"{PRIVATE_DIR_NAME}/"
        with self._lock:
            doomed = [
                (scope_id, memory)
                for scope_id, memory in [*self._private.items(), *self._closed.items()]
                if marker in memory.scope.root.as_posix() + "/"
                or marker in memory.scope.state_dir.as_posix() + "/"
            ]
            for scope_id, _ in doomed:
                self._private.pop(scope_id, None)
                self._closed.pop(scope_id, None)
            for scope_id in [
                s
                for s, m in self._mem0.items()
                if (key in s if key is not None else m.scope.person_key is not None)
            ]:
                del self._mem0[scope_id]
        for _, memory in doomed:
            memory.close()
        close_session_indexes()

    def roots_parent(self) -> Path:
        """The folder that holds every shared agent's memory root."""
        file_root = self.file_root()
        return self.storage / file_root if file_root else self.storage / "agents"

    def sync_changed(self, changed: set[Path]) -> None:
        """Re-index the open memories whose files are among ``changed``."""
        with self._lock:
            memories = [*self._open.values(), *self._private.values()]
        for memory in memories:
            root = memory.scope.root.resolve()
            if any(root in path.resolve().parents for path in changed):
                memory.index.sync()

    def close(self) -> None:
        """Close every open memory, and the mem0 engines of this storage."""
        with self._lock:
            for memory in [*self._open.values(), *self._private.values()]:
                memory.close()
            self._open.clear()
            self._private.clear()
            self._mem0.clear()
        close_engines(mem0_dir(self.storage))
        close_session_indexes()
        if self._search_index is not None:
            self._search_index[1].close()
            self._search_index = None
