"""The model and embedding clients share one TLS context per process (building one reads the
whole CA bundle: 25-50 ms of CPU), built as httpx would build its own."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from typing import Any

import certifi
import httpx
import pytest

from mindroom.adapters import http_clients
from mindroom.adapters.agno.models import build_model
from mindroom.adapters.agno.recording import recording_http_client
from mindroom.adapters.embeddings.remote import OpenAICompatibleEmbedder
from mindroom.adapters.http_clients import (
    openai_async_http_client,
    openai_http_client,
    tls_context,
)
from mindroom.config.models_schema import OpenAIModel


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """Every TLS context built from here on (the real ones: counted, not replaced)."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    http_clients._context.cache_clear()
    calls: list[dict[str, Any]] = []
    real = ssl.create_default_context

    def counting(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        calls.append(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(ssl, "create_default_context", counting)
    yield calls
    http_clients._context.cache_clear()


def test_the_counter_sees_what_httpx_builds_for_itself(built: list[dict[str, Any]]) -> None:
    httpx.AsyncHTTPTransport()  # the positive control: httpx's own default builds one
    httpx.AsyncHTTPTransport()
    assert len(built) == 2


def test_clients_and_models_share_one_context(built: list[dict[str, Any]]) -> None:
    model = OpenAIModel(provider="openai", id="m", base_url="http://127.0.0.1:9/v1")
    build_model("default", model)
    build_model("other", model)
    recording_http_client("default")
    openai_async_http_client()
    openai_http_client()
    embedder = OpenAICompatibleEmbedder("openai", "e", base_url=model.base_url, api_key="k")
    embedder._get_client()
    assert built == [{"cafile": certifi.where()}]  # one, from httpx's default bundle


def test_the_context_follows_the_certificate_settings(
    built: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    default = tls_context()
    assert tls_context() is default
    monkeypatch.setenv("SSL_CERT_FILE", certifi.where())  # as a reloaded .env may set it
    from_file = tls_context()
    assert from_file is not default
    assert tls_context() is from_file
    monkeypatch.delenv("SSL_CERT_FILE")
    monkeypatch.setenv("SSL_CERT_DIR", "/etc/ssl/certs")
    assert tls_context() not in (default, from_file)
    monkeypatch.delenv("SSL_CERT_DIR")
    assert tls_context() is default
    assert built == [
        {"cafile": certifi.where()},
        {"cafile": certifi.where()},
        {"capath": "/etc/ssl/certs"},
    ]
    assert default.verify_mode == ssl.CERT_REQUIRED
    assert default.check_hostname
