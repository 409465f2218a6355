"""Operating-system helpers for the embedded Synapse child process.

What it does:

- finds a Synapse that a crashed earlier run left on a data directory (through its pid file and
  ``/proc``) and stops it (SIGTERM, then SIGKILL), refusing when another live Python process
  still owns it;
- removes a pid file only while it still names the given pid;
- builds the Linux pre-exec hook that makes the child get SIGTERM when its parent dies;
- reads the end of what the child wrote to its log files since start-up;
- probes loopback ports (is one free, pick a free one) and says which address reaches a
  listener.

What it does not do: start, supervise or stop the current child (that is
:class:`mindroom.adapters.matrix.homeserver.EmbeddedHomeserver`), write configs, or talk HTTP.
Without
``/proc`` (not Linux) stale processes are not detected, only reported. It imports neither
Synapse nor PyYAML.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path

from mindroom.errors import HomeserverError

logger = logging.getLogger(__name__)

STOP_TIMEOUT = 10.0
POLL_INTERVAL = 0.05


# -- ports ------------------------------------------------------------------------------------


def connect_host(host: str) -> str:
    """The address a local client uses to reach a listener bound to ``host``."""
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def port_is_free(host: str, port: int) -> bool:
    """Whether a listener could bind ``host:port`` now."""
    # SO_REUSEADDR as Twisted sets it, so TIME_WAIT leftovers of a stopped server do not count.
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str) -> int:
    """A port on ``host`` that is free at the moment of asking."""
    with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


# -- the child --------------------------------------------------------------------------------


def parent_death_signal() -> Callable[[], None] | None:
    """On Linux, a pre-exec hook so Synapse gets SIGTERM when its parent dies.

    Without it a killed mindroom (or test run) would leave an orphaned Synapse behind. The
    signal follows the thread that forks, which is the event loop's thread.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    term = int(signal.SIGTERM)

    def hook() -> None:
        prctl(pr_set_pdeathsig, term, 0, 0, 0)

    return hook


def remove_pid_file(pid_file: Path, pid: int) -> None:
    """Delete ``pid_file`` if it still names ``pid``."""
    try:
        if int(pid_file.read_text().strip()) == pid:
            pid_file.unlink()
    except (OSError, ValueError):
        pass


def file_size(path: Path) -> int:
    """The size of ``path`` in bytes, 0 if it cannot be read."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def log_tail(path: Path, offset: int, lines: int) -> str:
    """The last ``lines`` lines written to ``path`` after ``offset`` (all if it shrank)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(offset if offset <= size else 0)
            data = fh.read()
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace").rstrip()
    return "\n".join(text.splitlines()[-lines:])


# -- stale processes --------------------------------------------------------------------------


def _read_proc(pid: int, name: str) -> bytes | None:
    try:
        return Path(f"/proc/{pid}/{name}").read_bytes()
    except OSError:
        return None


def _is_synapse_for(pid: int, data_dir: Path) -> bool:
    """Whether ``pid`` is a live Synapse whose working directory is ``data_dir``."""
    cmdline = _read_proc(pid, "cmdline")
    if not cmdline or b"synapse" not in cmdline:
        return False  # gone, a zombie (empty cmdline), or something else reusing the pid
    try:
        return os.path.samefile(os.readlink(f"/proc/{pid}/cwd"), data_dir)
    except OSError:
        return False


def _parent_pid(pid: int) -> int | None:
    stat = _read_proc(pid, "stat")
    if not stat:
        return None
    # Fields after the parenthesised command name: state, ppid, ...
    fields = stat.rsplit(b")", 1)[-1].split()
    try:
        return int(fields[1])
    except (IndexError, ValueError):
        return None


def _owned_by_other_python(pid: int) -> int | None:
    """The pid of another live Python process that owns ``pid``, if any."""
    ppid = _parent_pid(pid)
    if ppid is None or ppid in (0, 1, os.getpid()):
        return None
    cmdline = _read_proc(ppid, "cmdline") or b""
    argv0 = os.path.basename(cmdline.split(b"\x00", 1)[0])
    return ppid if argv0.startswith(b"python") or b"mindroom" in cmdline else None


def _read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def _unlink_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _have_proc() -> bool:
    return Path("/proc").is_dir()


async def kill_stale_synapse(pid_file: Path, data_dir: Path) -> None:
    """Stop a Synapse that a crashed earlier run left on ``data_dir``; drop a stale pid file."""
    # The file-system calls are sync helpers: tiny local reads, no need for a thread.
    pid = _read_pid(pid_file)
    if pid is None:
        _unlink_quietly(pid_file)
        return
    if not _have_proc():
        logger.warning("Cannot check pid %d from %s (no /proc); ignoring it", pid, pid_file)
        return
    if not _is_synapse_for(pid, data_dir):
        logger.debug("Removing stale pid file %s (pid %d is not our Synapse)", pid_file, pid)
        _unlink_quietly(pid_file)
        return
    owner = _owned_by_other_python(pid)
    if owner is not None:
        raise HomeserverError(
            f"Another process (pid {owner}) is running a homeserver (pid {pid}) on "
            f"{data_dir}. Stop it first; two servers cannot share one data directory."
        )
    logger.warning("Stopping a Synapse left running by an earlier run (pid %d)", pid)
    for sig, grace in ((signal.SIGTERM, STOP_TIMEOUT), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not _is_synapse_for(pid, data_dir):
                _unlink_quietly(pid_file)
                return
            await asyncio.sleep(POLL_INTERVAL)
    raise HomeserverError(f"Could not stop the old Synapse (pid {pid}) on {data_dir}.")
