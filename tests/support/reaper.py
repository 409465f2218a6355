"""No process a test session started outlives it, however the session ends.

A test that times out fails with pytest-timeout's ``signal`` method and its fixtures tear down,
but a child it started itself and never stopped (a bot process, a server) would stay; with the
``thread`` method (or a kill of pytest) nothing tears down at all, not even the session's
Synapse or PostgreSQL. So :func:`start` tags the session: every process started from it
carries ``MINDROOM_TEST_SESSION=<token>`` in its environment, and a small watchdog in a session
of its own waits for the pytest process to end (end of file on a pipe only pytest holds) and
then stops every process with that tag: SIGTERM, then SIGKILL after 5 s.

Under pytest-xdist (``-n``) every worker is a session of its own: it tags the processes it
starts with a token and a watchdog of its own, while the workers themselves carry the
controller's tag, so a killed controller takes its workers, and each worker its children.

Linux (``/proc``) only; elsewhere the watchdog finds nothing. Standard library only. Used as a
plugin: ``tests/conftest.py`` imports :func:`pytest_configure`; ``-p tests.support.reaper``
loads it into a pytest run of other files.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from typing import Any

MARKER = "MINDROOM_TEST_SESSION"

WATCHDOG = r"""
import os, signal, sys, time

tag = f"{sys.argv[1]}={sys.argv[2]}".encode()
sys.stdin.buffer.read()  # end of file: the test session's process has ended, however


def tagged():
    found = []
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as handle:
                    if tag in handle.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                pass  # gone, or not ours to read
    return found


for sig in (signal.SIGTERM, signal.SIGKILL):
    for pid in tagged():
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    deadline = time.monotonic() + 5
    while tagged() and time.monotonic() < deadline:
        time.sleep(0.05)
"""

_watchdog: subprocess.Popen[bytes] | None = None


def start() -> str:
    """Tag the processes this one starts from now on and start the watchdog; the tag."""
    global _watchdog
    if _watchdog is not None:
        return os.environ[MARKER]
    token = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != MARKER}  # the watchdog is untagged
    _watchdog = subprocess.Popen(
        [sys.executable, "-c", WATCHDOG, MARKER, token],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # a Ctrl-C or a group kill of the tests leaves it to do its job
    )
    os.environ[MARKER] = token
    return token


def pytest_configure(config: Any) -> None:  # a pytest hook (pytest is not imported here)
    start()
