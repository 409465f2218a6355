"""Which memory an agent uses: one :class:`FileMemory` per scope, opened on first use."""

from __future__ import annotations

import threading
from pathlib import Path

from mindroom.config.schema import Config
from mindroom.memory.scope import agent_scope
from mindroom.memory.store import FileMemory


class MemoryRegistry:
    """Opens and keeps the memories of a storage root."""

    def __init__(self, config: Config, storage: Path) -> None:
        self.config = config
        self.storage = storage
        self._open: dict[str, FileMemory] = {}
        self._lock = threading.Lock()

    def for_agent(self, agent: str) -> FileMemory | None:
        """The memory of shared agent ``agent``; None when its backend is ``none``."""
        if self.config.agent_memory_backend(agent) == "none":
            return None
        scope = agent_scope(self.storage, agent, self.config.memory.file.path)
        with self._lock:
            memory = self._open.get(scope.scope_id)
            if memory is None:
                memory = self._open[scope.scope_id] = FileMemory(scope)
            return memory

    def roots_parent(self) -> Path:
        """The folder that holds every shared agent's memory root."""
        file_root = self.config.memory.file.path
        return self.storage / file_root if file_root else self.storage / "agents"

    def sync_changed(self, changed: set[Path]) -> None:
        """Re-index the open memories whose files are among ``changed``."""
        with self._lock:
            memories = list(self._open.values())
        for memory in memories:
            root = memory.scope.root.resolve()
            if any(root in path.resolve().parents for path in changed):
                memory.index.sync()

    def close(self) -> None:
        """Close every open memory."""
        with self._lock:
            for memory in self._open.values():
                memory.close()
            self._open.clear()
