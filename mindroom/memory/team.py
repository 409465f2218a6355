"""Team memory, mirrored into every member's storage.

A team's files live once per member, under
``<storage>/agents/<member>/memory_files/team_<members>/`` (``MEMORY.md``, ``memory/...``), so
each member's folder holds everything it knows. Writes go to one copy through the normal
:class:`FileMemory` path (locked, atomic, with history) and are then copied to every other copy,
so an entry has one id in all of them; update and delete through any member reach every copy.

Before every operation the copies are compared: a copy that is missing a file, or holds a
different version of it, is repaired from the most recently written copy (latest write wins),
and the repair is recorded in the team's history.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from mindroom.memory.files import atomic_write, file_lock, read_text
from mindroom.memory.index import SearchHit, memory_files
from mindroom.memory.markdown import MemoryEntry
from mindroom.memory.scope import MemoryScope, state_dir, team_scope_id
from mindroom.memory.store import FileMemory


def mirror_root(storage: Path, member: str, scope_id: str, file_root: str | None = None) -> Path:
    """Where ``member`` keeps its copy of team ``scope_id``'s files."""
    parent = storage / file_root if file_root else storage / "agents"
    return parent / member / "memory_files" / scope_id


class TeamMemory(FileMemory):
    """A team's memory: a :class:`FileMemory` on one member's copy, mirrored to the others."""

    def __init__(
        self,
        storage: Path,
        members: Sequence[str],
        *,
        via: str | None = None,
        file_root: str | None = None,
    ) -> None:
        scope_id = team_scope_id(members)
        self.members = sorted(set(members))
        self.mirrors = {m: mirror_root(storage, m, scope_id, file_root) for m in self.members}
        primary = via if via in self.mirrors else self.members[0]
        super().__init__(MemoryScope(scope_id, self.mirrors[primary], state_dir(storage, scope_id)))
        # the copies' file signatures when last found equal; unchanged means nothing to compare
        self._consistent: list[tuple[str, str, int, int, int]] | None = None

    def repair(self) -> list[str]:
        """Make every copy equal to the latest version of each file; returns what was repaired."""
        repaired = []
        with file_lock(self.scope.state_dir / "locks", self.scope.state_dir / "mirror"):
            versions: dict[str, list[tuple[int, Path]]] = {}
            signature = []
            for member, root in self.mirrors.items():
                for relative, path in memory_files(root):
                    stat = path.stat()
                    versions.setdefault(relative, []).append((stat.st_mtime_ns, path))
                    signature.append(
                        (member, relative, stat.st_ino, stat.st_mtime_ns, stat.st_size)
                    )
            if signature == self._consistent:
                return []  # nothing moved since the copies were last found equal: no reads
            for relative, found in versions.items():
                latest = max(found)[1]
                text = read_text(latest)
                for member, root in self.mirrors.items():
                    target = root / relative
                    current = read_text(target) if target.exists() else None
                    if current == text:
                        continue
                    atomic_write(target, text)
                    repaired.append(f"{member}:{relative}")
                    self.history.append(
                        actor="repair",
                        op="repair",
                        entry_id="",
                        path=f"{member}:{relative}",
                        old=current,
                        new=text,
                    )
            self._consistent = [
                (member, relative, stat.st_ino, stat.st_mtime_ns, stat.st_size)
                for member, root in self.mirrors.items()
                for relative, path in memory_files(root)
                for stat in (path.stat(),)
            ]
        return repaired

    def prepare(self) -> None:
        self.repair()

    def _propagate(self, relative: str) -> None:
        source = self.scope.root / relative
        text = read_text(source)
        with file_lock(self.scope.state_dir / "locks", self.scope.state_dir / "mirror"):
            for root in self.mirrors.values():
                if root != self.scope.root:
                    atomic_write(root / relative, text)

    # every read repairs first; every write propagates after
    def find(self, entry_id: str) -> MemoryEntry:
        self.repair()
        return super().find(entry_id)

    def add_sync(self, text: str, *, actor: str, path: str | None = None) -> MemoryEntry:
        self.repair()
        entry = super().add_sync(text, actor=actor, path=path)
        self._propagate(entry.path)
        return entry

    def append_unique_sync(self, text: str, *, actor: str, path: str) -> MemoryEntry | None:
        self.repair()
        entry = super().append_unique_sync(text, actor=actor, path=path)
        if entry is not None:
            self._propagate(entry.path)
        return entry

    def update_sync(self, entry_id: str, text: str, *, actor: str) -> MemoryEntry:
        entry = super().update_sync(entry_id, text, actor=actor)  # find() repairs first
        self._propagate(entry.path)
        return entry

    def delete_sync(self, entry_id: str, *, actor: str) -> MemoryEntry:
        entry = super().delete_sync(entry_id, actor=actor)
        self._propagate(entry.path)
        return entry

    def restore_sync(self, entry_id: str, *, actor: str) -> MemoryEntry:
        self.repair()
        entry = super().restore_sync(entry_id, actor=actor)
        self._propagate(entry.path)
        return entry

    def list_sync(self, limit: int = 50) -> list[MemoryEntry]:
        self.repair()
        return super().list_sync(limit)

    async def search(self, query: str, limit: int = 5) -> list[SearchHit]:
        await asyncio.to_thread(self.repair)
        return await super().search(query, limit)
