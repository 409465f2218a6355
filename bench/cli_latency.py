"""CLI latency: what a person waits for before the command line answers.

Runs four commands, each in a fresh process, several times, and reports the child's CPU time
(user + system, from ``resource.getrusage(RUSAGE_CHILDREN)`` before and after) and the wall
time, median over the repetitions:

* ``mindroom --help``;
* a config error: ``mindroom run --config bad.yaml`` where the file has an unknown key;
* a second-run refusal: ``mindroom run`` on a storage whose run lock another process holds.
  The holder is a small helper process that takes the lock file
  (``mindroom_data/run.lock``) the way :mod:`mindroom.app.runlock` does (an exclusive
  ``flock`` held while it lives, pid and start time written in the file), so the measured run
  competes with no starting bot for the CPU;
* ``mindroom doctor`` on a small config whose homeserver and model are a closed loopback port
  (a bound socket that does not listen: every connection is refused at once, nothing reaches
  the network).

Each command's exit code and message are checked (a command that did not do what is measured
stops the bench). ``--tree PATH`` runs the ``mindroom`` of another source tree
(``PYTHONPATH=PATH python -m mindroom``), e.g. an older commit's ``git archive``, to measure a
baseline with the same bench. The last line is
``cli_help_ms=N config_error_ms=N second_run_ms=N doctor_ms=N`` (median CPU milliseconds).

    python bench/cli_latency.py [--repeat 5] [--tree PATH]

Standard library only: it runs without pytest and imports nothing of the tree it measures.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 600.0
# Settings of the person's shell that would point the commands elsewhere than the config says.
CLEARED_ENV = (
    "MATRIX_HOMESERVER",
    "MATRIX_REGISTRATION_SHARED_SECRET",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "MINDROOM_MODEL",
    "MINDROOM_RECOVERY_KEY",
    "MINDROOM_LOG_FORMAT",
)

CONFIG = """\
models:
  default:
    provider: openai
    id: bench-model
    base_url: http://127.0.0.1:{port}/v1
    api_key: none
agents:
  general:
    display_name: General
    role: A helpful assistant.
    rooms: [lobby]
matrix:
  homeserver: http://127.0.0.1:{port}
"""

# Takes the run lock of the storage given as argv[1] as a running ``mindroom run`` does, says
# "held" and keeps it until its stdin closes.
HOLDER = """
import fcntl, os, sys, time
path = os.path.join(sys.argv[1], "mindroom_data", "run.lock")
os.makedirs(os.path.dirname(path), exist_ok=True)
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
text = f"pid {os.getpid()}\\nstarted {time.strftime('%Y-%m-%dT%H:%M:%S%z')}\\ncommand bench\\n"
os.ftruncate(fd, 0)
os.pwrite(fd, text.encode(), 0)
print("held", flush=True)
sys.stdin.read()
"""


@dataclass(frozen=True)
class Case:
    """One measured command: its arguments and what its exit code and output must show."""

    key: str
    title: str
    argv: list[str]
    codes: tuple[int, ...]
    says: str


@dataclass(frozen=True)
class Sample:
    """One run of a case: CPU (user + system) and wall seconds."""

    cpu: float
    wall: float


@contextlib.contextmanager
def closed_port() -> Iterator[int]:
    """A loopback port that refuses every connection while the block runs (bound, never
    listening, so nothing else can take it)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]
    finally:
        sock.close()


@contextlib.contextmanager
def run_lock_held(storage: Path, python: str) -> Iterator[None]:
    """Another process holds ``storage``'s run lock while the block runs."""
    holder = subprocess.Popen(
        [python, "-c", HOLDER, str(storage)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != "held":
            raise SystemExit("the helper process did not take the run lock")
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def measure(case: Case, python: str, env: dict[str, str], cwd: Path) -> Sample:
    """Run the case once in a fresh process; check its outcome."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [python, "-m", "mindroom", *case.argv],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    output = done.stdout + done.stderr
    if done.returncode not in case.codes or case.says not in output:
        raise SystemExit(
            f"{case.title}: expected exit {case.codes} and {case.says!r}, got exit "
            f"{done.returncode}:\n{output[-2000:]}"
        )
    return Sample(cpu, wall)


def describe(case: Case, samples: list[Sample]) -> str:
    cpu = sorted(s.cpu * 1000 for s in samples)
    wall = statistics.median(s.wall * 1000 for s in samples)
    return (
        f"{case.title:<24} cpu median {statistics.median(cpu):7.0f} ms "
        f"(min {cpu[0]:.0f}, max {cpu[-1]:.0f})   wall median {wall:7.0f} ms   (n={len(samples)})"
    )


def main(tree: Path, repeat: int, python: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in CLEARED_ENV}
    env |= {
        "PYTHONPATH": str(tree),
        "AGNO_TELEMETRY": "false",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    print(f"mindroom from {tree}, {python}, {repeat} repetition(s), load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(prefix="cli-latency-") as folder, closed_port() as port:
        root = Path(folder)
        good, bad = root / "config.yaml", root / "bad.yaml"
        good.write_text(CONFIG.format(port=port))
        bad.write_text(CONFIG.format(port=port).replace("role:", "rolle:"))
        held = root / "held"
        cases = [
            Case("cli_help_ms", "mindroom --help", ["--help"], (0,), "doctor"),
            Case(
                "config_error_ms",
                "config error",
                ["run", "--config", str(bad), "--storage", str(root / "bad-storage")],
                (2,),
                "rolle",
            ),
            Case(
                "second_run_ms",
                "second run refused",
                ["run", "--config", str(good), "--storage", str(held), "--no-dashboard"],
                (2,),
                "already running",
            ),
            Case(
                "doctor_ms",
                "mindroom doctor",
                ["doctor", "--config", str(good), "--storage", str(root / "doctor-storage")],
                (0, 1),
                "model default",
            ),
        ]
        medians: dict[str, int] = {}
        with run_lock_held(held, python):
            for case in cases:
                samples = [measure(case, python, env, root) for _ in range(repeat)]
                print(describe(case, samples), flush=True)
                medians[case.key] = round(statistics.median(s.cpu * 1000 for s in samples))
    print(" ".join(f"{key}={value}" for key, value in medians.items()))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each command (5)")
    parser.add_argument(
        "--tree",
        type=Path,
        default=REPO,
        help="the source tree whose mindroom runs (default: this repository)",
    )
    parser.add_argument(
        "--python", default=sys.executable, help="the interpreter (default: this one)"
    )
    options = parser.parse_args()
    if options.repeat < 1:
        parser.error("--repeat must be at least 1")
    main(options.tree.resolve(), options.repeat, options.python)
