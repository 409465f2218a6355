"""``memory.embedder``, ``agents.<name>.memory_embedder``: parsed strictly; errors name the key."""

from __future__ import annotations

import pytest

from mindroom.config.schema import EmbedderConfig
from tests.unit.test_config import BASE, config_error, parse

LOCAL = "memory:\n  embedder:\n    provider: sentence_transformers\n"


def test_no_embedder_configured_means_the_default() -> None:
    config = parse(BASE)
    assert config.memory_embedder is None
    assert config.agent_embedder("general") is None


def test_memory_embedder_with_its_config_is_read() -> None:
    config = parse(
        BASE + "memory:\n  embedder:\n    provider: ollama\n    config:\n"
        "      model: nomic-embed-text\n      host: http://gpu-box:11434\n      dimensions: 256\n"
    )
    embedder = config.memory_embedder
    assert embedder is not None
    assert embedder.provider == "ollama"
    assert embedder.config.model == "nomic-embed-text"
    assert embedder.config.host == "http://gpu-box:11434"
    assert embedder.config.dimensions == 256
    assert config.agent_embedder("general") == embedder


def test_a_bare_provider_name_and_none_are_shorthands() -> None:
    assert parse(BASE + "memory:\n  embedder: none\n").memory_embedder == EmbedderConfig(
        provider="none"
    )
    assert parse(BASE + "memory:\n  embedder: huggingface\n").memory_embedder == (
        EmbedderConfig(provider="huggingface")
    )


def test_an_agent_overrides_the_embedder() -> None:
    config = parse(
        BASE
        + "    memory_embedder:\n      provider: openai\n      config: {model: small}\n"
        + LOCAL
    )
    override = config.agent_embedder("general")
    assert override is not None
    assert override.provider == "openai"
    assert override.config.model == "small"
    assert config.memory_embedder == EmbedderConfig(provider="sentence_transformers")


@pytest.mark.parametrize(
    ("embedder", "message"),
    [
        ("provider: word2vec", "memory.embedder.provider"),
        ("provider: openai\n    config: {modle: x}", "memory.embedder.config.modle"),
        ("provider: openai\n    config: {dimensions: 0}", "memory.embedder.config.dimensions"),
        (
            "provider: openai\n    config: {host: 'http://x'}",
            "config.host is only for provider 'ollama', not 'openai'; an OpenAI server is "
            "config.base_url",
        ),
        (
            "provider: ollama\n    config: {model: m, base_url: 'http://x'}",
            "config.base_url is only for provider 'openai', not 'ollama'; ollama's server is "
            "config.host",
        ),
        (
            "provider: sentence_transformers\n    config: {api_key: k}",
            "config.api_key is only for provider 'openai'",
        ),
        ("provider: ollama", "provider 'ollama' needs config.model"),
        ("provider: none\n    config: {model: x}", "provider 'none' takes no config"),
    ],
)
def test_a_wrong_embedder_config_is_refused_naming_the_key(embedder: str, message: str) -> None:
    error = config_error(BASE + f"memory:\n  embedder:\n    {embedder}\n")
    assert message in error
    assert "memory.embedder" in error


def test_a_wrong_agent_embedder_names_the_agents_key() -> None:
    error = config_error(BASE + "    memory_embedder: {provider: ollama}\n")
    assert "agents.general.memory_embedder" in error
    assert "needs config.model" in error


def test_private_agents_sharing_a_memory_folder_must_share_the_embedder() -> None:
    text = (
        BASE
        + "    private: {per: user, root: mind_data}\n"
        + "  diary:\n    private: {per: user, root: mind_data}\n"
        + "    memory_embedder: none\n"
    )
    error = config_error(text)
    assert "agents.diary.memory_embedder" in error
    assert "shares the private memory folder 'mind_data' with 'general'" in error
    # positive control: the same two agents with one embedder are fine
    parse(text.replace("    memory_embedder: none\n", ""))
