"""Memory scopes and their paths: where a scope's files live and what a path may name.

A scope is one memory: an agent's (``agent_<name>``) or a team's
(``team_<sorted member names joined by +>``). Its *root* holds the markdown files people read
and edit (``MEMORY.md``, ``memory/YYYY-MM-DD.md``, topic files); its *state dir* under
``mindroom_data/memory/<scope>/`` holds what is derived or control state (search index,
history, locks). Pure path logic; nothing here writes files, and only :func:`confined_path`
(which resolves symlinks to check where a path really points) and :func:`agent_scope` (which
looks whether an older version left an agent's memory under ``memory.file.path``) read the disk.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from mindroom.errors import MemoryStoreError

logger = logging.getLogger(__name__)

ENTRYPOINT = "MEMORY.md"
DAILY_DIR = "memory"
_said_legacy: set[Path] = set()


@dataclass(frozen=True)
class MemoryScope:
    """One memory: its id, the root of its files and the folder of its derived state."""

    scope_id: str
    root: Path
    state_dir: Path
    # a private scope's person (:func:`mindroom.memory.private.requester_key` of their Matrix
    # ID): everything in it is about them (consent); None for a shared scope
    person_key: str | None = None

    @property
    def entrypoint(self) -> Path:
        """The curated long-term file, ``MEMORY.md``."""
        return self.root / ENTRYPOINT

    def daily_path(self, day: str) -> str:
        """Relative path of the daily file of ``day`` (``YYYY-MM-DD``)."""
        return f"{DAILY_DIR}/{day}.md"


def agent_scope_id(agent: str) -> str:
    """The scope id of agent ``agent``'s own memory."""
    return f"agent_{agent}"


def team_scope_id(members: Iterable[str]) -> str:
    """The scope id of the team of ``members`` (order does not matter)."""
    return "team_" + "+".join(sorted(set(members)))


def agent_scope(storage: Path, agent: str, file_root: str | None = None) -> MemoryScope:
    """The scope of a shared agent: always ``<storage>/agents/<agent>/workspace``.

    ``file_root`` (``memory.file.path``) does not move it: mindroom keeps an agent's memory
    in its workspace, where people look for it; ``file_root`` is the parent of team mirrors
    (:func:`mindroom.memory.team.mirror_root`). Versions before this one moved agent folders
    under ``file_root`` too, so a folder found there that holds files, while the canonical one
    holds none, is still used (with one warning saying where to move it): an upgrade never
    makes memory vanish.
    """
    scope_id = agent_scope_id(agent)
    root = storage / "agents" / agent / "workspace"
    if file_root:
        legacy = storage / file_root / agent / "workspace"
        if legacy != root and _holds_files(legacy) and not _holds_files(root):
            if legacy not in _said_legacy:
                _said_legacy.add(legacy)
                logger.warning(
                    "agent %s: its memory is in %s, where memory.file.path put it before; "
                    "memory.file.path no longer moves agent memory, so move that folder to %s "
                    "(until then it is used where it is)",
                    agent,
                    legacy,
                    root,
                )
            root = legacy
    return MemoryScope(scope_id, root, state_dir(storage, scope_id))


def _holds_files(folder: Path) -> bool:
    try:
        return any(folder.iterdir())
    except OSError:  # not there (or not a folder)
        return False


def state_dir(storage: Path, scope_id: str) -> Path:
    """Where the derived state of ``scope_id`` lives."""
    return storage / "mindroom_data" / "memory" / scope_id


def confined_path(root: Path, relative: str) -> tuple[Path, str]:
    """The file ``relative`` names inside ``root``, and its normalized relative form.

    Refuses absolute paths, ``..``, anything but markdown files, and symlinks that lead out
    of the root, each with a message that says why.
    """
    text = relative.strip().replace("\\", "/")
    if not text:
        raise MemoryStoreError("no path given: name a memory file like 'MEMORY.md'")
    pure = PurePosixPath(text)
    if pure.is_absolute() or text.startswith("~"):
        raise MemoryStoreError(f"{relative!r} is absolute: give a path inside the memory folder")
    if any(part == ".." for part in pure.parts):
        raise MemoryStoreError(f"{relative!r} leaves the memory folder ('..' is not allowed)")
    if pure.suffix != ".md":
        raise MemoryStoreError(f"{relative!r} is not a markdown memory file (.md)")
    if any(part.startswith(".") for part in pure.parts):
        raise MemoryStoreError(f"{relative!r} is hidden: memory files cannot start with '.'")
    candidate = root.joinpath(*pure.parts)
    real_root = root.resolve()
    real = candidate.resolve()
    if real != real_root and real_root not in real.parents:
        raise MemoryStoreError(f"{relative!r} points outside the memory folder")
    return candidate, pure.as_posix()
