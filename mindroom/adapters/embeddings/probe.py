"""Whether the configured embedders can work: ``mindroom doctor``'s lines and the start-up warning.

The doctor gives one line per distinct embedder config (``memory.embedder`` and each agent's
override). A local model is checked without loading torch (its files and packages are there); a
hub name, which can only come from the local cache, is really loaded; a remote one gets one tiny
request. At start-up only the checks that load and send nothing run, in the background: an
explicit embedder that cannot work is one warning line (memory search is then keyword-only).
Neither installs anything: a local embedder whose packages are missing is reported as what the
first search will install (``memory.auto_install``), or, with that off, as the command to run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from mindroom.adapters.embeddings import INSTALL_HINT
from mindroom.adapters.embeddings.install import (
    install_command,
    installed,
    missing_modules,
    not_installed,
)
from mindroom.adapters.embeddings.local import SentenceTransformerEmbedder, resolve_model
from mindroom.adapters.embeddings.remote import OpenAICompatibleEmbedder
from mindroom.adapters.embeddings.select import (
    build_embedder,
    effective_embedder,
    embedder_in_force,
    report_keyword_only,
    shared_embedder,
)
from mindroom.checks import Check
from mindroom.config.schema import Config, EmbedderConfig
from mindroom.errors import EmbedderError

logger = logging.getLogger(__name__)


def _uses(config: Config) -> dict[EmbedderConfig | None, list[str]]:
    """Each distinct embedder config and the config keys that name it."""
    uses: dict[EmbedderConfig | None, list[str]] = {config.memory_embedder: ["memory.embedder"]}
    for name, agent in config.agents.items():
        if agent.memory_embedder is not None:
            uses.setdefault(config.embedder(agent.memory_embedder), []).append(
                f"agents.{name}.memory_embedder"
            )
    return uses


def _probe(embedder: object, base_dir: Path) -> str:
    """What works, or EmbedderError saying what does not."""
    if isinstance(embedder, SentenceTransformerEmbedder):
        source, model_id = resolve_model(embedder.model, base_dir)
        if isinstance(source, str):  # a hub name: only a real load shows it is cached
            embedder.load()
            return f"{embedder.model_id} (local, from the Hugging Face cache)"
        return f"{embedder.model_id} (local, loads on the first search)"
    if isinstance(embedder, OpenAICompatibleEmbedder):
        vectors = embedder.embed(["ping"])
        return f"{embedder.model_id} at {embedder.where} answers ({vectors.shape[1]} dimensions)"
    raise EmbedderError(f"unknown embedder {embedder!r}")


def check_embedder(
    config: EmbedderConfig | None, keys: list[str], base_dir: Path, *, auto_install: bool = False
) -> Check:
    """The doctor's line for one embedder config, named after the keys that use it.

    A local embedder whose packages are missing is a warning with ``auto_install`` (the first
    search installs them; the doctor does not) and a failure naming the command without it.
    """
    name = "memory search" if keys[0] == "memory.embedder" else f"memory search ({keys[0]})"
    effective = effective_embedder(config)
    if effective is None:  # in the words the dashboard's memory settings use too
        return Check(name, True, embedder_in_force(config, keys[0]))
    embedder = build_embedder(effective, base_dir)
    fix = f"fix {keys[0]} in config.yaml, or set it to none for keyword-only search"
    missing = missing_modules() if isinstance(embedder, SentenceTransformerEmbedder) else []
    if missing and auto_install:
        detail = f"{embedder.model_id}: {not_installed(missing, auto_install=True)}"
        fix = install_command(missing)
        return Check(name, True, f"keyword-only until then; {detail}", fix, warning=True)
    if missing:
        detail = f"{embedder.model_id}: {not_installed(missing, auto_install=False)}"
        return Check(name, False, detail, install_command(missing))
    if not installed("numpy"):
        return Check(name, False, f"{embedder.model_id}: vector search needs numpy", INSTALL_HINT)
    try:
        return Check(name, True, f"keywords and vectors: {_probe(embedder, base_dir)}")
    except EmbedderError as exc:
        return Check(name, False, str(exc), fix)


async def embedder_checks(config: Config, base_dir: Path) -> dict[EmbedderConfig | None, Check]:
    """Every embedder config's line, by config, checked in parallel (in threads: loading
    blocks)."""
    uses, auto_install = _uses(config), config.memory.auto_install
    checks = await asyncio.gather(
        *(
            asyncio.to_thread(check_embedder, c, keys, base_dir, auto_install=auto_install)
            for c, keys in uses.items()
        )
    )
    return dict(zip(uses, checks, strict=True))


async def check_embedders(config: Config, base_dir: Path) -> list[Check]:
    """Every embedder config's line (see :func:`embedder_checks`)."""
    return list((await embedder_checks(config, base_dir)).values())


def _quick_problem(
    config: EmbedderConfig, base_dir: Path, auto_install: bool
) -> EmbedderError | None:
    """What is wrong with an explicit embedder config, found without loading or sending.

    Packages the first search will install (``auto_install``) are not a problem: the installer
    says so itself when it starts.
    """
    embedder = build_embedder(config, base_dir)
    if isinstance(embedder, SentenceTransformerEmbedder):
        missing = missing_modules()
        if missing:
            return (
                None if auto_install else EmbedderError(not_installed(missing, auto_install=False))
            )
        try:
            resolve_model(embedder.model, base_dir)
        except EmbedderError as exc:
            return exc
    if not installed("numpy"):
        return EmbedderError(f"vector search needs numpy: {INSTALL_HINT}")
    return None


async def warn_unusable_embedders(config: Config, base_dir: Path) -> None:
    """At start-up: one warning for each explicit embedder config that cannot work.

    Meant to run in the background: it never raises and never delays anything.
    """
    try:
        for embedder, keys in _uses(config).items():
            effective = None if embedder is None else effective_embedder(embedder)
            if effective is None:
                continue
            problem = await asyncio.to_thread(
                _quick_problem, effective, base_dir, config.memory.auto_install
            )
            if problem is not None:
                report_keyword_only(", ".join(keys), problem)
    except Exception:  # a failing check must not stop start-up
        logger.exception("checking the memory embedders failed")


def _finish(done: asyncio.Future[None]) -> None:
    if not done.done():  # cancelled when mindroom stops first
        done.set_result(None)


async def warm_up_embedders(config: Config, base_dir: Path) -> None:
    """After start-up, in the background: load the local embedders the config uses, so the
    first turn's recall does not wait for the model (about 7 s). A daemon thread does the
    loading: stopping mindroom never waits for it, and a failure is only logged (the first
    search says it again and stays keyword-only)."""
    for embedder_config in _uses(config):
        embedder = shared_embedder(
            embedder_config, base_dir, auto_install=config.memory.auto_install
        )
        load = getattr(embedder, "load", None)
        if load is None:
            continue
        done = asyncio.get_running_loop().create_future()

        def run(load: Callable[[], None] = load, done: asyncio.Future[None] = done) -> None:
            try:
                load()
            except Exception as exc:  # said once more by the first search, keyword-only
                logger.debug("warming up an embedder failed: %s", exc)
            finally:
                with contextlib.suppress(RuntimeError):  # the loop is gone: mindroom stopped
                    done.get_loop().call_soon_threadsafe(_finish, done)

        threading.Thread(target=run, name="embedder-warm-up", daemon=True).start()
        await done
