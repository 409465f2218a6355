"""Private companions: one state root per requester, scaffolded from a template.

The requester key
-----------------
A Matrix ID becomes a folder name by :func:`requester_key`: the localpart is NFKC-normalized,
lowercased, reduced to ``[a-z0-9_]`` and cut to 24 characters (for people reading the folder
list), then ``_`` and the first 16 hex digits of the SHA-256 of the *whole* ID, unchanged.
So the key is always plain ASCII without ``/`` or ``..`` (it cannot escape ``private_instances``),
bounded in length, and two different IDs (look-alikes, other servers, crafted IDs) get
different keys.

Layout (``<key>`` as above)::

    <storage>/private_instances/<key>/<agent>/            per: user_agent
    <storage>/private_instances/<key>/                    per: user (shared by the person's
                                                          private agents with the same root)
        <root>/MEMORY.md, <root>/memory/...               the memory folder (what people edit)
        .state/<agent>/sessions.db                        the requester's sessions
        .state/memory/                                    index, history, locks, scaffold manifest

Scaffolding copies the template's files into a new memory folder, backfills files added to the
template later, and never overwrites a file the person edited nor brings back one they deleted:
a manifest records every file ever scaffolded. A copy is created atomically and only if the
file is still absent at that instant (:func:`mindroom.memory.files.protocol.create_file`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from mindroom.errors import MemoryStoreError
from mindroom.memory.files.protocol import atomic_write, create_file, file_lock
from mindroom.memory.scope import MemoryScope

logger = logging.getLogger(__name__)

PRIVATE_DIR = "private_instances"
_UNSAFE = re.compile(r"[^a-z0-9_]+")


def requester_key(user_id: str) -> str:
    """A safe, unique, readable folder name for the Matrix ID ``user_id``."""
    localpart = user_id[1:].split(":", 1)[0] if user_id.startswith("@") else user_id
    readable = _UNSAFE.sub("_", unicodedata.normalize("NFKC", localpart).lower()).strip("_")
    digest = hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{readable[:24] or 'user'}_{digest}"


@dataclass(frozen=True)
class PrivateInstance:
    """Where one requester's private state for one agent lives."""

    agent: str
    requester: str
    key: str
    instance_dir: Path
    memory_root: Path
    state_dir: Path

    @property
    def sessions_db(self) -> Path:
        """The requester's Agno sessions with this agent."""
        return self.state_dir / self.agent / "sessions.db"

    @property
    def learning_db(self) -> Path:
        """What Agno learning keeps about the requester, with this agent."""
        return self.state_dir / self.agent / "learning.db"

    def memory_scope(self) -> MemoryScope:
        """The requester's memory scope."""
        # ':' appears in none of the parts, so different folders never share an id
        parts = self.memory_root.parts
        scope_id = "private:" + ":".join(parts[parts.index(self.key) :])
        return MemoryScope(scope_id, self.memory_root, self.state_dir / "memory", self.key)


def private_instance(
    storage: Path, agent: str, requester: str, *, per: str, root: str | None
) -> PrivateInstance:
    """The private instance of ``agent`` for ``requester`` (pure: creates nothing)."""
    key = requester_key(requester)
    base = storage / PRIVATE_DIR / key
    instance_dir = base / agent if per == "user_agent" else base
    return PrivateInstance(
        agent=agent,
        requester=requester,
        key=key,
        instance_dir=instance_dir,
        memory_root=instance_dir / (root or f"{agent}_data"),
        state_dir=instance_dir / ".state",
    )


def _template_files(template: Path) -> list[str]:
    """Relative paths of the template's regular files; symlinks are refused."""
    files = []
    for folder, dirs, names in os.walk(template, followlinks=False):
        for name in [*dirs, *names]:
            path = Path(folder) / name
            if path.is_symlink():
                raise MemoryStoreError(
                    f"template {template} contains a symlink ({path.relative_to(template)}); "
                    "templates must hold plain files"
                )
        for name in names:
            files.append((Path(folder) / name).relative_to(template).as_posix())
    return sorted(f for f in files if not any(p.startswith(".") for p in Path(f).parts))


def scaffold(template: Path | None, memory_root: Path, manifest: Path) -> list[str]:
    """Copy template files the memory folder has never had; returns what was copied.

    A file listed in the manifest was scaffolded before: it is left alone whether the person
    edited it or deleted it. A file that exists but was not scaffolded (the person made it)
    is recorded and left alone too.
    """
    if template is None:
        return []
    if not template.is_dir():
        raise MemoryStoreError(f"template_dir {template} does not exist or is not a folder")
    with file_lock(manifest.parent / "locks", manifest):
        try:
            recorded = set(json.loads(manifest.read_text(encoding="utf-8")))
        except FileNotFoundError:
            recorded = set()
        done = set(recorded)
        copied = []
        for relative in _template_files(template):
            if relative in done:
                continue
            target = memory_root / relative
            if not target.exists() and create_file(target, (template / relative).read_bytes()):
                copied.append(relative)
            done.add(relative)
        if done != recorded or not manifest.exists():
            manifest.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(manifest, json.dumps(sorted(done), indent=1))
    if copied:
        logger.info("scaffolded %d template files into a private memory folder", len(copied))
    return copied
