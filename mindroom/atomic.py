"""Atomic file replacement: the one helper every module that writes a file uses.

A crash (kill -9, power loss) leaves the old file or the new one, never half of one: the text
goes to a temp file in the same folder (``.<name>.<8 hex>.tmp``), is fsynced, and is renamed
over the target; the folder is fsynced after the rename. A failed write removes its temp file.

:func:`acquire_lock` is the one bounded ``flock`` every writer takes (flock itself has no
timeout). This module knows nothing about memory or config: it only writes bytes. Coordinating
several writers of one file (locks, "changed since read") is the caller's business, e.g.
:mod:`mindroom.memory.files.protocol`.
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import time
from pathlib import Path

# what temp_path() names look like; lets a clean-up remove only our own leftovers
TEMP_NAME_RE = re.compile(r"^\.(?P<target>.+)\.[0-9a-f]{8}\.tmp$")


def temp_path(path: Path) -> Path:
    """A fresh temp file name next to ``path`` (hidden, matching :data:`TEMP_NAME_RE`)."""
    return path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")


def write_temp(path: Path, data: str | bytes, *, mode: int | None = None) -> Path:
    """Write ``data`` (text as UTF-8, line endings untouched) to a new fsynced temp file next to
    ``path`` and return its name. ``mode`` defaults to the mode of ``path`` if it exists, else
    0600; it is set before any byte is written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o777
        except FileNotFoundError:
            mode = 0o600
    raw = data.encode("utf-8") if isinstance(data, str) else data
    while True:
        tmp = temp_path(path)
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            break
        except FileExistsError:  # 32 random bits collided: pick another name
            continue
    try:
        os.fchmod(fd, mode)
        view = memoryview(raw)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    return tmp


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: str | bytes, *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new file, never half.

    ``mode``: see :func:`write_temp` (the old file's mode is kept by default).
    """
    tmp = write_temp(path, data, mode=mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


LOCK_POLL_SECONDS = 0.02


def acquire_lock(
    lock_file: Path, timeout: float, *, mode: int = 0o600, shared: bool = False
) -> int:
    """Take an exclusive ``flock`` on ``lock_file`` (created if missing); returns its descriptor.

    Threads and processes exclude each other; closing the descriptor (:func:`release_lock`, or
    the process dying) releases it. Raises TimeoutError when another holder kept it for
    ``timeout`` seconds, OSError when the lock file cannot be opened. ``shared``: a shared
    lock instead, which other shared holders may hold at once.
    """
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, mode)
    deadline = time.monotonic() + timeout
    kind = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise TimeoutError(f"{lock_file.name} held for {timeout:.0f} s") from None
            time.sleep(LOCK_POLL_SECONDS)  # polling keeps the wait bounded


def release_lock(fd: int) -> None:
    """Release a lock taken by :func:`acquire_lock`."""
    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
