"""Remote embedders: an OpenAI-compatible ``/embeddings`` endpoint (providers openai, ollama).

``openai`` talks to ``config.base_url`` (else ``OPENAI_BASE_URL``, else api.openai.com) with
``config.api_key`` (else ``OPENAI_API_KEY``), like a model does; ``ollama`` to its
OpenAI-compatible ``/v1`` on ``config.host`` (default ``http://localhost:11434``), so no extra
package is needed. Requests are synchronous (callers run :meth:`embed` in a worker thread),
batched, with a short timeout; any failure is an :class:`EmbedderError` naming the server.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from mindroom.adapters.embeddings import unit_rows
from mindroom.adapters.http_clients import openai_http_client
from mindroom.errors import EmbedderError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    from openai import OpenAI

OLLAMA_HOST = "http://localhost:11434"
OPENAI_DEFAULT_MODEL = "text-embedding-3-small"
BATCH = 128  # inputs per request: far below every server's limit, small enough to retry


def ollama_base_url(host: str | None) -> str:
    """The OpenAI-compatible endpoint of the ollama server at ``host``."""
    base = (host or OLLAMA_HOST).rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


class OpenAICompatibleEmbedder:
    """Embeddings from an OpenAI-compatible server (``openai`` or ``ollama``)."""

    def __init__(
        self,
        provider: Literal["openai", "ollama"],
        model: str | None,
        *,
        dimensions: int | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
        batch_size: int = BATCH,
    ) -> None:
        self.provider = provider
        self.model = model or OPENAI_DEFAULT_MODEL
        self.dimensions = dimensions
        if provider == "ollama":
            self.base_url: str | None = ollama_base_url(base_url)
            self.api_key = api_key or "ollama"
        else:
            self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
            self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or "none"
        self.timeout = timeout
        self.batch_size = batch_size
        suffix = f":{dimensions}" if dimensions else ""
        self._model_id = f"{provider}:{self.model}{suffix}"
        self._client: OpenAI | None = None
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def where(self) -> str:
        """The server, for messages."""
        return self.base_url or "api.openai.com"

    def __repr__(self) -> str:
        return f"OpenAICompatibleEmbedder({self._model_id!r} at {self.where})"

    def _get_client(self) -> OpenAI:
        with self._lock:
            if self._client is None:
                from openai import OpenAI

                self._client = OpenAI(
                    base_url=self.base_url,
                    api_key=self.api_key,
                    timeout=self.timeout,
                    max_retries=1,
                    http_client=openai_http_client(),
                )
            return self._client

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            rows.extend(self._request(list(texts[start : start + self.batch_size])))
        width = len(rows[0]) if rows else (self.dimensions or 0)
        if self.dimensions and width != self.dimensions:
            raise EmbedderError(
                f"{self.provider} embedder {self.model} at {self.where} returned {width}-"
                f"dimensional vectors; config.dimensions says {self.dimensions}"
            )
        try:
            matrix = np.asarray(rows, dtype=np.float32).reshape(len(rows), width)
        except ValueError as exc:
            raise EmbedderError(
                f"{self.provider} embedder {self.model} at {self.where} returned vectors of "
                "different sizes"
            ) from exc
        return unit_rows(matrix)

    def _request(self, batch: list[str]) -> list[list[float]]:
        try:
            client = self._get_client()
            if self.dimensions:
                response = client.embeddings.create(
                    model=self.model,
                    input=batch,
                    encoding_format="float",
                    dimensions=self.dimensions,
                )
            else:
                response = client.embeddings.create(
                    model=self.model, input=batch, encoding_format="float"
                )
        except Exception as exc:  # connection, status, bad answer: all one finding
            raise EmbedderError(
                f"{self.provider} embedder {self.model} at {self.where}: {exc}"
            ) from exc
        data = sorted(response.data, key=lambda item: item.index)
        if len(data) != len(batch):
            raise EmbedderError(
                f"{self.provider} embedder {self.model} at {self.where} answered "
                f"{len(data)} vectors for {len(batch)} texts"
            )
        return [list(item.embedding) for item in data]
