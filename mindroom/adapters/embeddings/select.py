"""Which embedder a config asks for, and one shared instance of each per process.

``memory.embedder`` unset means "the default": the bundled all-MiniLM-L6-v2 when the
``embeddings`` extra is installed, else none (keyword-only search). ``provider: none`` turns
embeddings off explicitly. Instances are shared process-wide, keyed by their config, so a local
model is loaded once however many memory scopes (or registries) search with it. Building one is
cheap and never fails; loading happens on first use and fails there, with the reason.

A configured local embedder whose packages are missing installs them on first use when
``memory.auto_install`` allows (:mod:`mindroom.adapters.embeddings.install`); the unconfigured
default
never does: without the extra it is simply keyword-only.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from mindroom.adapters.embeddings import Embedder
from mindroom.adapters.embeddings.install import EmbedderInstalling, install_command
from mindroom.adapters.embeddings.local import (
    BUNDLED_ID,
    SentenceTransformerEmbedder,
    bundled_model_path,
)
from mindroom.adapters.embeddings.remote import OpenAICompatibleEmbedder
from mindroom.config.schema import EmbedderConfig
from mindroom.errors import EmbedderError

logger = logging.getLogger(__name__)

DEFAULT = EmbedderConfig(provider="sentence_transformers")


def effective_embedder(config: EmbedderConfig | None) -> EmbedderConfig | None:
    """The embedder config in force for ``config`` (None: keyword-only search)."""
    if config is None:
        return DEFAULT if bundled_model_path() is not None else None
    return None if config.provider == "none" else config


def embedder_in_force(config: EmbedderConfig | None, key: str = "memory.embedder") -> str:
    """Which embedder memory search uses for ``config`` (the value of ``key``) and why, in one
    line: what ``mindroom doctor`` and the dashboard's memory settings both say. (Whether a
    configured embedder actually works is the doctor's probe, not this.)"""
    effective = effective_embedder(config)
    if effective is None and config is None:
        extra = f"for semantic search, install mindroom[embeddings]: {install_command()}"
        return f"keyword-only ({extra})"
    if effective is None:
        return f"keyword-only ({key}: none)"
    if config is None:
        why = f"{key} is unset; the embeddings extra is installed"
        return f"the bundled local model {BUNDLED_ID} ({why})"
    model = effective.config.model
    return f"{effective.provider}{f' {model}' if model else ''} (set in {key})"


def build_embedder(config: EmbedderConfig, base_dir: Path) -> Embedder:
    """A new embedder for ``config`` (nothing is loaded or contacted yet)."""
    settings = config.config
    if config.provider in ("sentence_transformers", "huggingface"):
        return SentenceTransformerEmbedder(settings.model, settings.dimensions, base_dir=base_dir)
    if config.provider == "ollama":
        return OpenAICompatibleEmbedder(
            "ollama", settings.model, dimensions=settings.dimensions, base_url=settings.host
        )
    if config.provider == "openai":
        return OpenAICompatibleEmbedder(
            "openai",
            settings.model,
            dimensions=settings.dimensions,
            base_url=settings.base_url,
            api_key=settings.api_key,
        )
    raise ValueError(f"no embedder for provider {config.provider!r}")


_shared: dict[tuple[EmbedderConfig, Path | None], Embedder] = {}
_shared_lock = threading.Lock()


def shared_embedder(
    config: EmbedderConfig | None, base_dir: Path, *, auto_install: bool | None = None
) -> Embedder | None:
    """The process's one embedder for ``config`` (after defaults), None for keyword-only.

    ``auto_install`` is ``memory.auto_install``: whether a configured local embedder installs
    its missing packages on first use. The shared instance follows the latest caller that says
    (the setting is global: a reloaded config changes it for every memory at once); None leaves
    it as it is (a new instance: off until someone says, e.g. the start-up warm-up).
    """
    effective = effective_embedder(config)
    if effective is None:
        return None
    if effective.provider == "huggingface":  # the same models through the same library
        effective = effective.model_copy(update={"provider": "sentence_transformers"})
    model = effective.config.model
    relative = model is not None and not Path(model).expanduser().is_absolute()
    key = (effective, base_dir.resolve() if relative else None)  # the folder matters only here
    with _shared_lock:
        embedder = _shared.get(key)
        if embedder is None:
            embedder = _shared[key] = build_embedder(effective, base_dir)
    if auto_install is not None and isinstance(embedder, SentenceTransformerEmbedder):
        embedder.auto_install = auto_install and config is not None  # the default never installs
    return embedder


_reported: set[str] = set()


def report_keyword_only(where: str, error: EmbedderError) -> str:
    """Log that memory search falls back to keywords because of ``error``: once per reason per
    process (the start-up check and the first search that meets it share the one line).
    An install in progress is not logged here: the installer says it once itself."""
    note = f"memory search is keyword-only: {error}"
    if isinstance(error, EmbedderInstalling):
        return note
    with _shared_lock:
        first = note not in _reported
        if first:
            if len(_reported) > 1000:  # a bound, not a cache
                _reported.clear()
            _reported.add(note)
    if first:
        logger.warning("%s: %s", where, note)
    return note
