"""Start-up time: ``mindroom run --local`` from process start to its "running" banner.

Runs mindroom as a person does, in a fresh storage folder holding a copy of the repository's
``config.yaml`` and ``mind_template`` (a shared ``general``, a private ``mind``):

* cold start: the first run on that storage, which writes the embedded Synapse's config,
  creates its database, registers the accounts, uploads their keys and makes the rooms;
* warm restart: the same command again once the first run stopped (Ctrl-C), with Synapse's
  data and the accounts' saved credentials and keys in place.

Each run is timed from starting the process to the banner line ("mindroom is running: ...")
on its output; then it is stopped with SIGINT and must exit with code 0. Printed per run: the
time, when each step's line appeared (homeserver launched, homeserver ready, accounts running,
dashboard up), and the CPU seconds mindroom and its Synapse child had used by the banner and
by each step (the figures to compare on a busy machine, where wall times mostly measure the
other load; the differences between steps are each phase's CPU).

Nothing reaches the network: the model's ``base_url`` (``OPENAI_BASE_URL``) is a closed port
on loopback, the homeserver and the dashboard listen on free loopback ports, and the local
embedder (when installed) loads offline. Standard library only; the child runs the checkout
this file is in.

    python bench/restart.py [--warm 3] [--cold 1]

The last line, for comparing runs: ``warm_restart_ms=N cold_start_ms=N``, the medians of the
warm restarts and of the cold starts (each cold start on a storage of its own).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BANNER = "mindroom is running"
# the lines that end each step of the start-up, in order, with the name printed for them
STEPS = (
    ("Starting the local homeserver", "launch"),
    ("Homeserver localhost ready", "homeserver"),
    ("Local homeserver is up", "local user"),
    ("agents started", "accounts"),
    ("Dashboard:", "dashboard"),
    (BANNER, "banner"),
)
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of ``pid`` so far (every thread; 0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def children(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


@dataclass
class Run:
    """One start of ``mindroom run``: when each step's line appeared, CPU used by the banner."""

    kind: str
    steps: dict[str, float] = field(default_factory=dict)
    # CPU seconds (mindroom, its Synapse) used when each step's line appeared
    step_cpu: dict[str, tuple[float, float]] = field(default_factory=dict)
    mindroom_cpu: float = 0.0
    synapse_cpu: float = 0.0
    stop_s: float = 0.0

    @property
    def banner_ms(self) -> float:
        return self.steps["banner"] * 1000

    def describe(self) -> str:
        steps = "  ".join(f"{name} {at:5.2f}" for name, at in self.steps.items())
        cpu = "  ".join(f"{name} {m:4.2f}/{s:4.2f}" for name, (m, s) in self.step_cpu.items())
        return (
            f"{self.kind:<5} {self.banner_ms:7.0f} ms   cpu: mindroom {self.mindroom_cpu:4.2f} s, "
            f"synapse {self.synapse_cpu:4.2f} s   stop {self.stop_s:4.2f} s\n"
            f"        steps (s): {steps}\n"
            f"        cpu by then (s, mindroom/synapse): {cpu}"
        )


class Storage:
    """A storage folder with the repository's config, and the command that runs on it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True)
        shutil.copy(REPO / "config.yaml", root / "config.yaml")
        shutil.copytree(REPO / "mind_template", root / "mind_template")
        self.homeserver_port = free_port()
        self.dashboard_port = free_port()
        self.model_port = free_port()  # closed once free_port returns: nothing answers there

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "mindroom",
            "run",
            "--local",
            "--config",
            str(self.root / "config.yaml"),
            "--port",
            str(self.homeserver_port),
            "--dashboard-port",
            str(self.dashboard_port),
        ]

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("MATRIX_", "OPENAI_", "MINDROOM_"))
        }
        env.update(
            PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")])),
            OPENAI_BASE_URL=f"http://127.0.0.1:{self.model_port}/v1",
            AGNO_TELEMETRY="false",
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
        )
        return env


def start_once(storage: Storage, kind: str, timeout: float) -> Run:
    """Start ``mindroom run``, wait for its banner, stop it with SIGINT; the run's figures."""
    run = Run(kind)
    output: list[str] = []
    banner = threading.Event()
    began = time.monotonic()
    proc = subprocess.Popen(
        storage.command(),
        cwd=storage.root,
        env=storage.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = raw.decode("utf-8", "replace")
            output.append(line)
            for marker, name in STEPS:
                if marker in line and name not in run.steps:
                    run.steps[name] = time.monotonic() - began
                    run.step_cpu[name] = (
                        cpu_seconds(proc.pid),
                        sum(cpu_seconds(c) for c in children(proc.pid)),
                    )
                    if name == "banner":
                        run.mindroom_cpu = cpu_seconds(proc.pid)
                        run.synapse_cpu = sum(cpu_seconds(c) for c in children(proc.pid))
                        banner.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not banner.wait(timeout):
            raise RuntimeError(
                f"{kind}: no banner within {timeout:.0f} s:\n{''.join(output[-40:])}"
            )
    finally:
        stopping = time.monotonic()
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        run.stop_s = time.monotonic() - stopping
        reader.join(5)
    if code != 0:
        raise RuntimeError(f"{kind}: exit code {code} after SIGINT:\n{''.join(output[-40:])}")
    return run


def main(warm: int, cold: int, timeout: float) -> None:
    print(
        f"mindroom run --local from {REPO}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )
    colds: list[Run] = []
    warms: list[Run] = []
    with tempfile.TemporaryDirectory(prefix="mindroom-restart-") as tmp:
        for index in range(cold):
            storage = Storage(Path(tmp) / f"storage{index}")
            colds.append(start_once(storage, "cold", timeout))
            print(colds[-1].describe(), flush=True)
            if index == 0:
                for _ in range(warm):
                    warms.append(start_once(storage, "warm", timeout))
                    print(warms[-1].describe(), flush=True)
    warm_ms = statistics.median(r.banner_ms for r in warms) if warms else 0.0
    cold_ms = statistics.median(r.banner_ms for r in colds) if colds else 0.0
    if warms:
        cpu = statistics.median(r.mindroom_cpu for r in warms)
        synapse = statistics.median(r.synapse_cpu for r in warms)
        print(
            f"warm restart: median {warm_ms:.0f} ms, "
            f"cpu mindroom {cpu:.2f} s, synapse {synapse:.2f} s"
        )
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    print(f"warm_restart_ms={warm_ms:.0f} cold_start_ms={cold_ms:.0f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warm", type=int, default=3, help="warm restarts (3)")
    parser.add_argument("--cold", type=int, default=1, help="cold starts, each on a new storage")
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds to the banner")
    args = parser.parse_args()
    main(args.warm, max(args.cold, 1), args.timeout)
