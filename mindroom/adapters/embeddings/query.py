"""A query's embedding without torch: the BERT forward pass of a sentence-transformers model in
numpy, for a process that only needs to embed a search query.

Every ``mindroom memory recall`` is a new process. Its entries' vectors are already stored
(:mod:`mindroom.memory.search.vectors`), so the query is all it has to embed, and importing
sentence-transformers and torch for that costs about 9 CPU-seconds here (2 cores), against
0.2 s for numpy, tokenizers and safetensors (which sentence-transformers installs anyway).
:class:`QueryEncoder` reads the same model folder (``model.safetensors``, ``tokenizer.json``)
and computes the same function: BERT (absolute positions, exact GELU), mean pooling over the
tokens, unit length. It agrees with the torch model to float32 rounding (cosine above
0.99999, checked on the bundled model by ``tests/integration/test_embedders.py``), so a query
embedded here ranks the stored entries as one embedded by torch does, up to ties that close.
A process that has the torch model loaded anyway (the running bot, after its start-up warm-up)
embeds queries with it instead: numpy's BLAS runs these small products on every core, and
on a busy machine its threads fight (3 s a query at load 16, against 0.26 s on one thread);
``mindroom memory recall`` sets one BLAS thread before numpy loads.

Only models that are exactly that shape are taken (:func:`query_encoder` returns None for any
other, and the caller loads sentence-transformers): a ``BertModel`` whose ``modules.json`` is
Transformer, mean Pooling and Normalize, with no ``dimensions`` truncation. Entries are never
embedded here: they go in batches through the torch model, so a rebuilt index stays equal to an
incrementally built one.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

_Matrix = npt.NDArray[np.float32]
_erf = np.frompyfunc(math.erf, 1, 1)  # exact GELU, as the model was trained with
_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _mean_pooling_only(pooling: Any) -> bool:
    if not isinstance(pooling, dict) or not pooling.get("pooling_mode_mean_tokens"):
        return False
    return not any(
        v for k, v in pooling.items() if k.startswith("pooling_mode_") and "mean_tokens" not in k
    )


def query_encoder(folder: Path) -> QueryEncoder | None:
    """The numpy encoder of the model in ``folder``, or None when it is not a plain BERT with
    mean pooling and normalisation (nothing is loaded yet)."""
    modules = _read(folder / "modules.json")
    config = _read(folder / "config.json")
    if not isinstance(modules, list) or not isinstance(config, dict):
        return None
    kinds = [m.get("type") for m in modules if isinstance(m, dict)]
    if kinds != [_TRANSFORMER, _POOLING, _NORMALIZE] or modules[0].get("path") != "":
        return None
    pooling = _read(folder / str(modules[1].get("path") or "") / "config.json")
    if not _mean_pooling_only(pooling):
        return None
    plain_bert = (
        config.get("model_type") == "bert"
        and config.get("hidden_act") == "gelu"
        and config.get("position_embedding_type", "absolute") == "absolute"
    )
    files = (folder / "model.safetensors", folder / "tokenizer.json")
    if not plain_bert or not all(f.is_file() for f in files):
        return None
    settings = _read(folder / "sentence_bert_config.json") or {}
    max_length = int(settings.get("max_seq_length") or config.get("max_position_embeddings", 512))
    return QueryEncoder(folder, config, max_length)


def _mapped(path: Path) -> dict[str, npt.NDArray[Any]]:
    """The tensors of a safetensors file. float32 ones are views of the file mapped into
    memory (a query reads a few rows of the 47 MB word embeddings, not all 90 MB); a file
    with other float types is read whole by safetensors."""
    with path.open("rb") as handle:
        size = int.from_bytes(handle.read(8), "little")
        header = json.loads(handle.read(size))
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    if any(v["dtype"] != "F32" for v in tensors.values() if v["dtype"][0] in "FB"):
        from safetensors.numpy import load_file

        return dict(load_file(str(path)))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + size)
    return {
        name: data[start:end].view(np.float32).reshape(info["shape"])
        for name, info in tensors.items()
        if info["dtype"] == "F32"
        for start, end in [info["data_offsets"]]
    }


class QueryEncoder:
    """The BERT of one model folder in numpy; loads on first use. Thread-safe."""

    def __init__(self, folder: Path, config: dict[str, Any], max_length: int) -> None:
        self.folder = folder
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.max_length = max_length
        self._lock = threading.Lock()
        self._weights: dict[str, _Matrix] | None = None
        self._tokenizer: Any = None

    def _load(self) -> tuple[dict[str, _Matrix], Any]:
        with self._lock:
            if self._weights is None:
                from tokenizers import Tokenizer

                weights = _mapped(self.folder / "model.safetensors")
                tokenizer = Tokenizer.from_file(str(self.folder / "tokenizer.json"))
                tokenizer.no_padding()
                tokenizer.enable_truncation(self.max_length)
                # strip a "bert." prefix some checkpoints carry; keep float32 as torch does
                self._weights = {
                    k.removeprefix("bert."): np.asarray(v, np.float32) for k, v in weights.items()
                }
                self._tokenizer = tokenizer
            return self._weights, self._tokenizer

    def encode(self, texts: list[str]) -> _Matrix:
        """One unit-length row per text."""
        weights, tokenizer = self._load()
        rows = [self._one(weights, tokenizer.encode(text)) for text in texts]
        return np.stack(rows).astype(np.float32)

    def _norm(self, x: _Matrix, w: dict[str, _Matrix], name: str) -> _Matrix:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * w[f"{name}.weight"] + w[f"{name}.bias"]

    @staticmethod
    def _dense(x: _Matrix, w: dict[str, _Matrix], name: str) -> _Matrix:
        return x @ w[f"{name}.weight"].T + w[f"{name}.bias"]

    def _one(self, w: dict[str, _Matrix], encoding: Any) -> _Matrix:
        ids = np.asarray(encoding.ids, np.intp)
        types = np.asarray(encoding.type_ids, np.intp)
        n = len(ids)
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:n]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = self._norm(x, w, "embeddings.LayerNorm")
        width = x.shape[1]
        size = width // self.heads
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}"

            def heads(t: _Matrix) -> _Matrix:
                return t.reshape(n, self.heads, size).transpose(1, 0, 2)

            q = heads(self._dense(x, w, f"{p}.attention.self.query"))
            k = heads(self._dense(x, w, f"{p}.attention.self.key"))
            v = heads(self._dense(x, w, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 2, 1) / np.float32(math.sqrt(size))
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(1, 0, 2).reshape(n, width)
            attended = self._dense(context, w, f"{p}.attention.output.dense")
            x = self._norm(x + attended, w, f"{p}.attention.output.LayerNorm")
            inner = self._dense(x, w, f"{p}.intermediate.dense")
            inner = inner * 0.5 * (1.0 + _erf(inner / math.sqrt(2.0)).astype(np.float32))
            out = self._dense(inner, w, f"{p}.output.dense")
            x = self._norm(x + out, w, f"{p}.output.LayerNorm")
        pooled = x.mean(axis=0)
        norm = float(np.linalg.norm(pooled))
        return pooled / norm if norm > 0 else pooled
