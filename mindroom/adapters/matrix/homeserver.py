"""An embedded Synapse homeserver, run as a child process on loopback.

Used by ``mindroom run --local`` (state under ``<storage>/mindroom_data/homeserver/``) and by the
test suite (a temporary directory per session).

What it does:

- writes ``homeserver.yaml``, a signing key and a log config into its data directory on the first
  run, and reuses them afterwards (the registration shared secret, the signing key and the
  database survive restarts; only the listener's host and port are rewritten when they change);
- starts ``python -m synapse.app.homeserver`` in its own session, waits until
  ``/_matrix/client/versions`` answers, and stops it again (SIGTERM, then SIGKILL); starting
  and waiting are apart (:meth:`EmbeddedHomeserver.launch`,
  :meth:`EmbeddedHomeserver.wait_ready`), so a caller can do its own start-up while Synapse
  does its own;
- kills a Synapse left running by a crashed earlier run on the same data directory;
- registers users through the shared-secret admin API (:func:`register_with_shared_secret`,
  which also works against any other Synapse whose shared secret you know).

The pieces live next door: :mod:`mindroom.adapters.matrix.synapse_config` (config, log config,
signing
key), :mod:`mindroom.adapters.matrix.synapse_process` (stale processes, parent-death signal, ports)
and
:mod:`mindroom.adapters.matrix.registration` (shared-secret registration). The file-name constants,
:func:`register_with_shared_secret` and :class:`~mindroom.errors.HomeserverError` are
re-exported here.

What it does not do: TLS, federation, e-mail, TURN, workers, PostgreSQL, or anything that makes
it fit to expose beyond loopback (registration is open, rate limits are effectively off). It
does not upgrade or validate configs written by other tools beyond the keys it manages.

Synapse, PyYAML and aiohttp are imported only when a server is started (PyYAML and aiohttp in
this process, Synapse only in the child), so importing this module is cheap and ``mindroom run
--local`` launches Synapse before it imports anything heavy. A server must be started and stopped
from the same event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import os
import signal
import sys
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from mindroom.adapters.matrix.registration import register_with_shared_secret
from mindroom.adapters.matrix.synapse_config import (
    CONFIG_FILE,
    DATABASE_FILE,
    LOG_CONFIG_FILE,
    LOG_FILE,
    MEDIA_DIR,
    PID_FILE,
    SIGNING_KEY_FILE,
    STDOUT_FILE,
    prepare_config,
    write_private,
)
from mindroom.adapters.matrix.synapse_process import (
    STOP_TIMEOUT,
    connect_host,
    file_size,
    free_port,
    kill_stale_synapse,
    log_tail,
    parent_death_signal,
    port_is_free,
    remove_pid_file,
)
from mindroom.errors import HomeserverError
from mindroom.tasks import within

__all__ = [
    "CONFIG_FILE",
    "DATABASE_FILE",
    "DEFAULT_PORT",
    "LOG_CONFIG_FILE",
    "LOG_FILE",
    "MEDIA_DIR",
    "PID_FILE",
    "SIGNING_KEY_FILE",
    "STDOUT_FILE",
    "EmbeddedHomeserver",
    "HomeserverError",
    "register_with_shared_secret",
]

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8008

_TAIL_LINES = 30
# Until Synapse listens, a poll is a refused connection: cheap enough to ask often.
_READY_POLL_S = 0.02
_PORT_ATTEMPTS = 3  # starts with port=0 whose picked port was taken before Synapse listened


class EmbeddedHomeserver:
    """A Synapse child process with its config and state in ``data_dir``.

    ``port=None`` reuses the port of an existing config, else 8008 if free, else any free port;
    ``port=0`` picks a free port now; any other value is used as given.
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        server_name: str = "localhost",
        room_version: str | None = None,
        app_services: tuple[Path, ...] = (),
    ) -> None:
        self._data_dir = Path(data_dir).expanduser().absolute()
        self._requested_port = port
        self._host = host
        self._server_name = server_name
        self._room_version = room_version
        self._config_room_version: str | None = None  # its config's, known once launched
        self._app_services = app_services  # appservice registration files it loads
        self._port: int | None = port if port else None
        self.previous_url: str | None = None  # set by start() when the port changed
        self._shared_secret: str | None = None
        self._pid_file = self._data_dir / PID_FILE
        self._process: asyncio.subprocess.Process | None = None
        self._launched_at = 0.0  # monotonic time of the last launch()
        self._log_offsets: dict[Path, int] = {}  # the logs' sizes before it: what is new since
        self._ready = False  # the launched process answered

    # -- properties -------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        """The directory holding config, database, media, keys and logs."""
        return self._data_dir

    @property
    def config_file(self) -> Path:
        """The Synapse config file (``homeserver.yaml``)."""
        return self._data_dir / CONFIG_FILE

    @property
    def log_file(self) -> Path:
        """Synapse's own log (WARNING and above)."""
        return self._data_dir / LOG_FILE

    @property
    def stdout_file(self) -> Path:
        """The child's stdout and stderr (start-up failures land here)."""
        return self._data_dir / STDOUT_FILE

    @property
    def server_name(self) -> str:
        """The Matrix server name: user ids are ``@name:<server_name>``."""
        return self._server_name

    @property
    def room_version(self) -> str | None:
        """The default room version its config sets (None: Synapse's own default); known once
        launched."""
        return self._config_room_version

    @property
    def port(self) -> int:
        """The listener's port; known after :meth:`start` or when given explicitly."""
        if self._port is None:
            raise HomeserverError("The homeserver's port is not known before start().")
        return self._port

    @property
    def url(self) -> str:
        """The client-server API base URL, e.g. ``http://127.0.0.1:8008``."""
        return f"http://{connect_host(self._host)}:{self.port}"

    @property
    def shared_secret(self) -> str:
        """The registration shared secret from ``homeserver.yaml``; known after :meth:`start`."""
        if self._shared_secret is None:
            raise HomeserverError("The homeserver's shared secret is not known before start().")
        return self._shared_secret

    @property
    def running(self) -> bool:
        """Whether the child process is alive."""
        return self._process is not None and self._process.returncode is None

    # -- lifecycle --------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109 - public API
        """Write or update the config, start Synapse and wait until it answers
        (:meth:`launch`, then :meth:`wait_ready`).

        Raises :class:`HomeserverError` (with the end of the logs) if Synapse is not installed,
        exits, or does not answer within ``timeout`` seconds. Does nothing if already running.

        With ``port=0`` the port is free when picked, but Synapse binds it seconds later, after
        importing itself; meanwhile another process may take it (an outgoing connection gets
        ports from the same range). Synapse then exits with "Address already in use", and the
        start is tried again on another free port, up to :data:`_PORT_ATTEMPTS` times.
        """
        for attempt in range(1, _PORT_ATTEMPTS + 1):
            await self.launch()
            try:
                await self.wait_ready(timeout)
            except HomeserverError:
                if self._requested_port != 0 or attempt == _PORT_ATTEMPTS:
                    raise
                if not self._port_was_taken():
                    raise
                logger.warning(
                    "port %d was taken before Synapse listened on it; trying another", self.port
                )
            else:
                return

    def _port_was_taken(self) -> bool:
        """Whether the Synapse that just exited could not listen: its port was in use."""
        tail = log_tail(self.stdout_file, self._log_offsets.get(self.stdout_file, 0), _TAIL_LINES)
        return "Address already in use" in (tail or "")

    async def launch(self) -> None:
        """Write or update the config and start the Synapse process, without waiting for it
        to answer: it spends a few seconds importing itself and opening its database, which
        the caller can spend on its own start-up. :meth:`wait_ready` waits for it.

        Raises :class:`HomeserverError` if Synapse is not installed or the port is taken.
        Does nothing if already running.
        """
        if self.running:
            return
        if importlib.util.find_spec("synapse") is None:
            raise HomeserverError(
                "matrix-synapse is not installed in this Python environment "
                f"({sys.executable}); install it with `pip install matrix-synapse` "
                "or point mindroom at an existing homeserver."
            )
        self._launched_at = time.monotonic()
        self._ready = False
        self._data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            os.chmod(self._data_dir, 0o700)

        config = self._prepare_config()
        self._pid_file = Path(str(config.get("pid_file") or self._data_dir / PID_FILE))
        await kill_stale_synapse(self._pid_file, self._data_dir)
        if not port_is_free(self._host, self.port):
            raise HomeserverError(
                f"port {self.port} is in use; choose another with --port N (--port 0 picks "
                f"a free one) or stop whatever listens on {self._host}:{self.port}. The "
                f"homeserver in {self._data_dir} saves its port in {self.config_file}."
            )

        self._log_offsets = {p: file_size(p) for p in (self.log_file, self.stdout_file)}
        await self._spawn()

    async def wait_ready(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109 - public API
        """Wait until the Synapse :meth:`launch` started answers (at once when it did).

        Raises :class:`HomeserverError` (with the end of the logs) if it exits or does not
        answer within ``timeout`` seconds; then, and when cancelled, it is stopped.
        """
        if self._ready and self.running:
            return
        if self._process is None:
            raise HomeserverError("The homeserver was not launched: launch() it first.")
        try:
            await self._wait_until_ready(timeout, self._log_offsets)
        except BaseException:
            await self.stop()
            raise
        self._ready = True
        logger.info(
            "Homeserver %s ready at %s in %.1f s (data in %s)",
            self._server_name,
            self.url,
            time.monotonic() - self._launched_at,
            self._data_dir,
        )

    async def stop(self) -> None:
        """Stop Synapse: SIGTERM, up to 10 s grace, then SIGKILL. Safe to call repeatedly."""
        process = self._process
        if process is None:
            return
        try:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.send_signal(signal.SIGTERM)
                try:
                    await within(process.wait(), STOP_TIMEOUT)
                except TimeoutError:
                    logger.warning(
                        "Homeserver (pid %d) ignored SIGTERM for %.0f s; killing it",
                        process.pid,
                        STOP_TIMEOUT,
                    )
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                    await process.wait()
        except BaseException:
            # Cancelled while waiting: do not leave the child behind.
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            raise
        finally:
            self._process = None
            self._ready = False
            remove_pid_file(self._pid_file, process.pid)
        logger.info("Homeserver (pid %d) stopped", process.pid)

    async def register_user(
        self,
        username: str,
        password: str,
        *,
        admin: bool = False,
        displayname: str | None = None,
    ) -> str:
        """Register ``username`` on this server and return the full user id.

        Raises :class:`HomeserverError`; ``errcode == "M_USER_IN_USE"`` if the user exists.
        """
        return await register_with_shared_secret(
            self.url,
            self.shared_secret,
            username,
            password,
            admin=admin,
            displayname=displayname,
        )

    # -- internals --------------------------------------------------------------------------

    def _prepare_config(self) -> dict[str, Any]:
        """Load or create ``homeserver.yaml``; settle port and secret; return the config."""
        config, port = prepare_config(
            self.config_file,
            self._data_dir,
            self._server_name,
            self._host,
            self._choose_port,
            self._room_version,
            self._app_services,
        )
        self._port = port
        self._shared_secret = str(config["registration_shared_secret"])
        version = config.get("default_room_version")
        self._config_room_version = None if version is None else str(version)
        return config

    def _choose_port(self, existing: int | None) -> int:
        port = self._pick_port(existing)
        if existing is not None and existing != port:
            self.previous_url = f"http://{connect_host(self._host)}:{existing}"
        return port

    def _pick_port(self, existing: int | None) -> int:
        if self._requested_port is None:
            if existing is not None:
                return existing
            if port_is_free(self._host, DEFAULT_PORT):
                return DEFAULT_PORT
            return free_port(self._host)
        if self._requested_port == 0:
            return free_port(self._host)
        return self._requested_port

    async def _spawn(self) -> None:
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        with open(self.stdout_file, "ab") as out:  # noqa: ASYNC230 - a local log, opened once
            out.write(f"--- starting synapse at {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode())
            out.flush()
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "synapse.app.homeserver",
                "-c",
                str(self.config_file),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                cwd=str(self._data_dir),
                env=env,
                start_new_session=True,
                preexec_fn=parent_death_signal(),
            )
        write_private(self._pid_file, f"{self._process.pid}\n")
        logger.debug("Started synapse (pid %d) for %s", self._process.pid, self._data_dir)

    async def _wait_until_ready(self, limit: float, log_offsets: dict[Path, int]) -> None:
        import aiohttp  # not at the top: launch() comes before the HTTP stack is imported

        process = self._process
        assert process is not None
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        versions = f"{self.url}/_matrix/client/versions"
        client_timeout = aiohttp.ClientTimeout(total=5)
        async with aiohttp.ClientSession(timeout=client_timeout) as session:
            while True:
                if process.returncode is not None:
                    raise HomeserverError(
                        f"Synapse exited with code {process.returncode} during start-up."
                        + self._log_tails(log_offsets)
                    )
                with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                    async with session.get(versions) as response:
                        if response.status == 200:
                            return
                if loop.time() >= deadline:
                    raise HomeserverError(
                        f"Synapse did not answer on {versions} within {limit:.0f} s."
                        + self._log_tails(log_offsets)
                    )
                await asyncio.sleep(_READY_POLL_S)

    def _log_tails(self, offsets: dict[Path, int]) -> str:
        parts = []
        for path, offset in offsets.items():
            tail = log_tail(path, offset, _TAIL_LINES)
            if tail:
                parts.append(f"\n--- last lines of {path}:\n{tail}")
        return "".join(parts) or f"\n(no log output; see {self._data_dir})"
