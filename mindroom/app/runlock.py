"""Which ``mindroom run`` runs for a storage root: the run lock, ``mindroom_data/run.lock``.

``mindroom run`` holds an exclusive ``flock`` on the file for as long as it lives, so that a
second run on the same storage is refused (two bots would both answer every message and both
write memory) and ``mindroom chat`` can tell at once that nobody is there to answer. The lock,
not the file, is the truth: the kernel drops it when the process dies, even by kill -9, so a
crash leaves no stale "running" state. The file's text (pid, start time, command) is for people
and for the refusal's message; it is rewritten in place, not atomically, because a renamed file
would be a new, unlocked inode.

This module only takes, holds and tests the lock. Deciding what to do about it (refuse, print,
exit codes) is the CLI's and the chat's business.
"""

from __future__ import annotations

import fcntl
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from mindroom.atomic import acquire_lock, release_lock
from mindroom.errors import AlreadyRunningError, NotRunningError

RUN_LOCK_NAME = "run.lock"
# How long a starting run waits for the lock: long enough to outlast a chat's test of it (which
# holds it for microseconds), short enough that a second run is refused within a second.
START_WAIT_S = 0.2
# ``mindroom chat``'s exit code when no run is there to answer (1: no answer in time, 2: errors)
NOT_RUNNING_EXIT = 3


@dataclass(frozen=True)
class RunHolder:
    """The process holding a storage's run lock, as its lock file describes it (None: the file
    was being written, or is not ours)."""

    pid: int | None
    started: str | None

    def describe(self) -> str:
        pid = f"pid {self.pid}" if self.pid is not None else "pid unknown"
        return f"{pid}, started {self.started}" if self.started else pid


def run_lock_path(data_dir: Path) -> Path:
    """The run lock of the storage whose ``mindroom_data`` folder is ``data_dir``."""
    return data_dir / RUN_LOCK_NAME


def hold_run_lock(data_dir: Path, shared: bool = False) -> int:
    """Take the run lock for the lifetime of this process and write who holds it; returns the
    descriptor (:func:`release_run_lock` lets go; so does the process ending).

    ``shared``: the runs share their work through a database's leases (``storage.database``),
    so several may hold the lock at once, but none alongside a run that does not.

    Raises AlreadyRunningError naming the holder's pid and the lock file when another run holds
    it.
    """
    data_dir.mkdir(parents=True, exist_ok=True)
    path = run_lock_path(data_dir)
    try:
        fd = acquire_lock(path, START_WAIT_S, shared=shared)
    except TimeoutError:
        holder = running(data_dir) or RunHolder(None, None)
        hint = (
            "it keeps its state in SQLite: set storage.database for several runs to share "
            "the agents"
            if shared
            else "two bots on one storage would both answer every message and both write memory"
        )
        raise AlreadyRunningError(
            f"already running for {data_dir.parent} ({holder.describe()}; "
            f"lock {path}): stop it first, {hint}"
        ) from None
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    text = f"pid {os.getpid()}\nstarted {started}\ncommand {' '.join(sys.argv)}\n"
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode("utf-8"), 0)
    return fd


def release_run_lock(fd: int) -> None:
    """Let go of the run lock taken by :func:`hold_run_lock` (the file stays, unlocked)."""
    release_lock(fd)


def running(data_dir: Path) -> RunHolder | None:
    """The run holding this storage's lock, or None when no process does.

    Tests the lock without waiting: an exclusive lock is taken and dropped at once (a run
    starting at that instant waits for it, see :data:`START_WAIT_S`); any run, sharing or not,
    keeps it from being taken.
    """
    try:
        fd = os.open(run_lock_path(data_dir), os.O_RDONLY)
    except FileNotFoundError:
        return None  # no run ever started here
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder(os.pread(fd, 4096, 0).decode("utf-8", "replace"))
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def require_running(data_dir: Path, start_command: str) -> None:
    """Raise NotRunningError, saying how to start it (``start_command``), when no run holds
    this storage's lock."""
    if running(data_dir) is None:
        raise NotRunningError(
            f"mindroom is not running for {data_dir.parent}: "
            f"start it with '{start_command}' (in another terminal)"
        )


def _holder(text: str) -> RunHolder:
    pid = re.search(r"^pid (\d+)$", text, re.M)
    started = re.search(r"^started (\S+)$", text, re.M)
    return RunHolder(int(pid.group(1)) if pid else None, started.group(1) if started else None)
