"""Embedders: the bundled local model, OpenAI-compatible servers (the scripted one), doctor."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from mindroom.adapters.embeddings import Embedder
from mindroom.adapters.embeddings.local import (
    BUNDLED_ID,
    SentenceTransformerEmbedder,
    bundled_model_path,
)
from mindroom.adapters.embeddings.probe import (
    check_embedder,
    check_embedders,
    warn_unusable_embedders,
)
from mindroom.adapters.embeddings.query import query_encoder
from mindroom.adapters.embeddings.remote import OpenAICompatibleEmbedder
from mindroom.adapters.embeddings.select import build_embedder, shared_embedder
from mindroom.config.schema import EmbedderConfig
from mindroom.errors import EmbedderError
from mindroom.memory.files.store import FileMemory
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.candidates import search_candidates
from tests.support.scripted_model import ScriptedModel, scripted_embedding
from tests.unit.test_config import BASE, parse


def test_the_default_embedder_is_the_bundled_minilm(local_embedder: Embedder) -> None:
    assert local_embedder.model_id == BUNDLED_ID

    vectors = local_embedder.embed(["I love my dog", "My puppy is great", "Tax forms are due"])

    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_the_bundled_model_by_path_name_or_huggingface_provider_is_one_model(
    tmp_path: Path, local_embedder: Embedder
) -> None:
    bundled = bundled_model_path()
    assert bundled is not None
    for config in (
        EmbedderConfig(provider="huggingface"),
        EmbedderConfig(provider="sentence_transformers", config={"model": str(bundled)}),
        EmbedderConfig(provider="sentence_transformers", config={"model": "all-MiniLM-L6-v2"}),
    ):
        assert build_embedder(config, tmp_path).model_id == BUNDLED_ID
    # one loaded model for every spelling of the default
    assert shared_embedder(EmbedderConfig(provider="huggingface"), tmp_path) is local_embedder
    assert shared_embedder(None, tmp_path) is local_embedder


def test_dimensions_truncate_the_local_model_and_key_its_vectors_apart(tmp_path: Path) -> None:
    embedder = SentenceTransformerEmbedder(None, 128, base_dir=tmp_path)
    vectors = embedder.embed(["a short text", "another one"])
    assert vectors.shape == (2, 128)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, rtol=1e-5)
    assert embedder.model_id == f"{BUNDLED_ID}:128"


def test_a_local_model_that_is_not_there_is_a_clear_error_every_time(tmp_path: Path) -> None:
    embedder = SentenceTransformerEmbedder("./models/missing", base_dir=tmp_path)
    for _ in range(2):
        with pytest.raises(EmbedderError, match="no sentence-transformers model folder at"):
            embedder.embed(["hello"])


def test_a_hub_name_that_is_not_cached_fails_offline_with_the_fix(tmp_path: Path) -> None:
    embedder = SentenceTransformerEmbedder("someone/not-a-cached-model", base_dir=tmp_path)
    with pytest.raises(EmbedderError, match="offline.*path of a local model folder"):
        embedder.embed(["hello"])


def test_the_openai_provider_embeds_in_batches_through_the_server(model: ScriptedModel) -> None:
    embedder = OpenAICompatibleEmbedder(
        "openai", "text-embedding-3-small", base_url=model.base_url, api_key="k", batch_size=2
    )
    texts = ["one fish", "two fish", "red fish", "blue fish", "a whale"]

    vectors = embedder.embed(texts)

    assert [r["input"] for r in model.embedding_requests] == [texts[:2], texts[2:4], texts[4:]]
    assert all(r["model"] == "text-embedding-3-small" for r in model.embedding_requests)
    expected = np.array([scripted_embedding(t) for t in texts], dtype=np.float32)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert embedder.model_id == "openai:text-embedding-3-small"


def test_the_openai_provider_asks_for_the_configured_dimensions(model: ScriptedModel) -> None:
    config = EmbedderConfig(
        provider="openai",
        config={"model": "small", "dimensions": 16, "base_url": model.base_url, "api_key": "k"},
    )
    embedder = build_embedder(config, Path.cwd())

    assert embedder.embed(["hello"]).shape == (1, 16)
    assert model.embedding_requests[-1]["dimensions"] == 16
    assert embedder.model_id == "openai:small:16"


def test_the_ollama_provider_uses_the_openai_compatible_endpoint_on_its_host(
    model: ScriptedModel,
) -> None:
    config = EmbedderConfig(
        provider="ollama",
        config={"model": "nomic-embed-text", "host": f"http://127.0.0.1:{model.port}"},
    )
    embedder = build_embedder(config, Path.cwd())

    vectors = embedder.embed(["hello there"])

    assert vectors.shape == (1, 64)
    assert model.embedding_requests[-1]["model"] == "nomic-embed-text"
    assert embedder.model_id == "ollama:nomic-embed-text"


def test_a_failing_server_is_an_embedder_error_naming_it(model: ScriptedModel) -> None:
    model.embeddings_status = 500
    embedder = OpenAICompatibleEmbedder("openai", "small", base_url=model.base_url, api_key="k")
    with pytest.raises(EmbedderError, match=f"openai embedder small at {model.base_url}"):
        embedder.embed(["hello"])


def test_the_vector_index_works_with_the_openai_provider(
    tmp_path: Path, model: ScriptedModel
) -> None:
    embedder = OpenAICompatibleEmbedder("openai", "small", base_url=model.base_url, api_key="k")
    (tmp_path / "workspace").mkdir()
    memory = FileMemory(MemoryScope("agent_x", tmp_path / "workspace", tmp_path / "s"), embedder)
    try:
        memory.add_sync("The garden gate is green", actor="test")
        memory.add_sync("Dinner is at eight", actor="test")
        vectors = memory.vectors
        assert vectors is not None
        assert vectors.search("green garden", 1)[0].entry.text == "The garden gate is green"
        memory.add_sync("The boat is blue", actor="test")
        assert vectors.search("blue boat", 1)[0].entry.text == "The boat is blue"
    finally:
        memory.close()
    inputs = [r["input"] for r in model.embedding_requests]
    entry_inputs = [i for i in inputs if i not in (["green garden"], ["blue boat"])]
    assert entry_inputs == [
        ["The garden gate is green", "Dinner is at eight"],
        ["The boat is blue"],
    ]


# -- doctor --------------------------------------------------------------------------------------


def test_doctor_says_which_embedder_memory_search_uses(tmp_path: Path) -> None:
    check = check_embedder(None, ["memory.embedder"], tmp_path)
    assert check.ok
    assert check.name == "memory search"
    assert check.detail == f"keywords and vectors: {BUNDLED_ID} (local, loads on the first search)"

    off = check_embedder(EmbedderConfig(provider="none"), ["memory.embedder"], tmp_path)
    assert off.ok
    assert off.detail == "keyword-only (memory.embedder: none)"


def test_doctor_fails_an_embedder_that_cannot_load_and_says_what_to_fix(tmp_path: Path) -> None:
    config = EmbedderConfig(provider="sentence_transformers", config={"model": "./nothing"})

    check = check_embedder(config, ["agents.coder.memory_embedder"], tmp_path)

    assert not check.ok
    assert check.name == "memory search (agents.coder.memory_embedder)"
    assert "no sentence-transformers model folder" in check.detail
    assert "agents.coder.memory_embedder" in check.fix


@pytest.mark.asyncio
async def test_doctor_checks_a_remote_embedder_with_one_request(
    tmp_path: Path, model: ScriptedModel
) -> None:
    text = BASE + (
        "memory:\n  embedder:\n    provider: openai\n    config:\n"
        f"      model: small\n      base_url: {model.base_url}\n      api_key: k\n"
    )
    [check] = await check_embedders(parse(text), tmp_path)

    assert check.ok, check
    answers = f"openai:small at {model.base_url} answers (64 dimensions)"
    assert check.detail == f"keywords and vectors: {answers}"
    assert [r["input"] for r in model.embedding_requests] == [["ping"]]

    model.embeddings_status = 503
    [down] = await check_embedders(parse(text), tmp_path)
    assert not down.ok
    assert "503" in down.detail


@pytest.mark.asyncio
async def test_an_unusable_embedder_is_one_warning_from_start_up_to_the_first_search(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = parse(
        BASE + "    memory_embedder:\n      provider: sentence_transformers\n"
        "      config: {model: ./gone}\n"
    )
    registry = MemoryRegistry(config, tmp_path, tmp_path)
    try:
        with caplog.at_level(logging.WARNING):
            await warn_unusable_embedders(config, tmp_path)
            memory = registry.for_agent("general")
            assert memory is not None
            memory.add_sync("Bob plays the violin on Sundays", actor="test")
            found = [search_candidates(memory, "Bob violin") for _ in range(2)]
    finally:
        registry.close()

    warnings = [r.getMessage() for r in caplog.records if "keyword-only" in r.getMessage()]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("agents.general.memory_embedder: memory search is keyword-only")
    assert f"no sentence-transformers model folder at {tmp_path / 'gone'}" in warnings[0]
    for result in found:  # the turn's search still works, on keywords
        assert [h.entry.text for h in result.keyword] == ["Bob plays the violin on Sundays"]
        assert result.vector is None


def test_a_query_embedded_without_torch_equals_the_models_own_vector(
    local_embedder: Embedder,
) -> None:
    """The numpy BERT the CLI embeds queries with computes what sentence-transformers does."""
    assert isinstance(local_embedder, SentenceTransformerEmbedder)
    bundled = bundled_model_path()
    assert bundled is not None
    encoder = query_encoder(bundled)
    assert encoder is not None
    texts = [
        "who plays the violin?",
        "a",
        "Which café did Zoë visit on 2023-05-01 with Dr. Smith?",
        "a long entry about the tax forms and the garden " * 40,  # truncated at 256 tokens
    ]

    expected = local_embedder.embed(texts)
    found = encoder.encode(texts)
    # an embedder that has not loaded the model embeds queries the numpy way; a loaded one
    # with the model it has
    by_fresh = SentenceTransformerEmbedder(base_dir=Path.cwd()).embed_queries(texts)
    by_loaded = local_embedder.embed_queries(texts)

    assert found.shape == expected.shape == (4, 384)
    assert found.dtype == np.float32
    np.testing.assert_allclose(found, expected, atol=1e-5)
    assert np.min(np.sum(found * expected, axis=1)) > 0.99999
    np.testing.assert_array_equal(by_fresh, found)
    np.testing.assert_array_equal(by_loaded, expected)


def test_a_model_that_is_not_a_mean_pooled_bert_has_no_numpy_query_path(tmp_path: Path) -> None:
    bundled = bundled_model_path()
    assert bundled is not None
    assert query_encoder(bundled) is not None  # the positive control
    folder = tmp_path / "cls-pooled"
    shutil.copytree(bundled, folder, ignore=shutil.ignore_patterns("model.safetensors"))
    (folder / "model.safetensors").symlink_to(bundled / "model.safetensors")
    assert query_encoder(folder) is not None
    pooling = folder / "1_Pooling" / "config.json"
    settings = json.loads(pooling.read_text())
    settings.update(pooling_mode_mean_tokens=False, pooling_mode_cls_token=True)
    pooling.write_text(json.dumps(settings))
    assert query_encoder(folder) is None
    # and truncated dimensions go through the model itself
    embedder = SentenceTransformerEmbedder(str(bundled), 128, base_dir=tmp_path)
    assert embedder._numpy_encoder() is None
