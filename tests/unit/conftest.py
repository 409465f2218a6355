"""The unit layer loads no model: a unit test that would load the local embedding model fails
at once, saying what to do (configure ``memory.embedder: none``, or move the test to
tests/integration, where the session shares one loaded model: the ``local_embedder`` fixture,
which tests/conftest.py counts as integration). A model that cannot be found still fails as
it does in the product, so the tests of that failure stay here."""

from __future__ import annotations

import pytest

from mindroom.adapters.embeddings import local


def _refuse(self: local.SentenceTransformerEmbedder) -> object:
    local.resolve_model(self.model, self.base_dir)  # a missing model: the product's own error
    # pytest.fail raises a BaseException: no "could not load, search keyword-only" fallback
    # can swallow it and let the test pass on a path it did not mean to test.
    pytest.fail(
        f"a unit test loaded the embedding model {self.model_id!r}: set memory.embedder: none "
        "in its config, or move it to tests/integration"
    )


@pytest.fixture(autouse=True)
def _no_model_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local.SentenceTransformerEmbedder, "_import_and_load", _refuse)
