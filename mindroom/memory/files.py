"""Safe file writes: atomic replace under a per-file lock, with the re-read inside the lock.

Every change to a memory file goes through :func:`edit_file`: take the file's lock (an
``flock`` on a lock file in the scope's state dir, so threads, the bot and the CLI all
exclude each other), read the file as it is *now*, apply a pure edit, and replace the file
atomically (temp file in the same folder, fsync, rename, fsync of the folder). A person
editing the file in between loses nothing: the edit is applied to their version.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from mindroom.errors import MemoryStoreError


@contextlib.contextmanager
def file_lock(lock_dir: Path, target: Path) -> Iterator[None]:
    """Exclusive lock for ``target`` (threads and processes)."""
    lock_dir.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(str(target.resolve()).encode()).hexdigest()[:24]
    fd = os.open(lock_dir / f"{name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_text(path: Path) -> str:
    """The file's text, or '' when it does not exist. Keeps line endings as they are."""
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return handle.read()
    except FileNotFoundError:
        return ""
    except UnicodeDecodeError as exc:
        raise MemoryStoreError(
            f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8"
        ) from None


def atomic_write(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` so that a crash leaves the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def edit_file(path: Path, lock_dir: Path, edit: Callable[[str], str | None]) -> tuple[str, str]:
    """Apply ``edit`` to the current text of ``path`` under its lock; returns (old, new).

    ``edit`` gets the text as it is inside the lock and returns the new text, or None to
    leave the file alone. Nothing is written when the text does not change.
    """
    with file_lock(lock_dir, path):
        old = read_text(path)
        new = edit(old)
        if new is None or new == old:
            return old, old
        atomic_write(path, new)
        return old, new
