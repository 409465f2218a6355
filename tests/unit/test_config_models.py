"""A model is defined once under ``models:`` and named by its key everywhere.

The older inline forms (``memory.llm`` and ``memory.embedder`` with their own ``provider`` and
``config``, an agent's inline ``memory_embedder``, ``media.speech_to_text`` with its own
``base_url``) still load, to the same effective settings, with a deprecation warning that names
the form to write. Pure: every config is parsed from a string with an explicit ``env``.
"""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest

from mindroom.config.load import parse_config
from mindroom.config.memory_schema import (
    EmbedderConfig,
    EmbedderSettings,
    MemoryLlmConfig,
    MemoryLlmSettings,
)
from mindroom.config.models_schema import ConfigDeprecationWarning, SpeechEndpoint
from mindroom.config.schema import Config
from mindroom.errors import ConfigError
from mindroom.memory.mem0.setup import memory_llm

ROOT = Path(__file__).resolve().parents[2]

BASE = """\
models:
  default:
    id: some-model
agents:
  general:
    rooms: [lobby]
"""


def parse_logged(text: str, caplog: pytest.LogCaptureFixture) -> tuple[Config, list[str]]:
    """The config of ``text`` and the deprecation lines logged while reading it."""
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="mindroom.config"):
        config = parse_config(text, "config.yaml", env={})
    lines = [r.getMessage() for r in caplog.records if r.name == "mindroom.config"]
    return config, lines


def parse_quiet(text: str, caplog: pytest.LogCaptureFixture) -> Config:
    """``text`` parsed, failing on any deprecation (logged or warned)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigDeprecationWarning)
        config, lines = parse_logged(text, caplog)
    assert lines == []
    return config


# -- the older inline forms: same settings, one warning each naming the new form ----------------

OLD_LLM = (
    BASE
    + """\
memory:
  llm:
    provider: ollama
    config:
      model: llama3.2
      host: http://gpu:11434
      temperature: 0.1
"""
)
NEW_LLM = """\
models:
  default:
    id: some-model
  extractor:
    provider: ollama
    id: llama3.2
    host: http://gpu:11434
    temperature: 0.1
    timeout_seconds: 60
agents:
  general:
    rooms: [lobby]
memory:
  llm: extractor
"""


def test_old_memory_llm_loads_with_a_warning_naming_the_new_form(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config, lines = parse_logged(OLD_LLM, caplog)
    assert lines == [
        "config.yaml: memory.llm with its own provider and config is deprecated: add the model "
        "under models: (provider: ollama, id: llama3.2, host: http://gpu:11434, temperature: "
        "0.1, timeout_seconds: 60) and write "
        "memory.llm: <key>"
    ]
    settings = MemoryLlmSettings(model="llama3.2", host="http://gpu:11434", temperature=0.1)
    assert config.memory_llm == MemoryLlmConfig(provider="ollama", config=settings)


def test_memory_llm_by_key_is_the_same_model_as_the_old_inline_form(
    caplog: pytest.LogCaptureFixture,
) -> None:
    old = memory_llm(parse_logged(OLD_LLM, caplog)[0])
    new = memory_llm(parse_quiet(NEW_LLM, caplog))
    assert (new.provider, new.model, new.base_url, new.temperature) == (
        "ollama",
        "llama3.2",
        "http://gpu:11434",
        0.1,
    )
    assert (old.provider, old.model, old.base_url, old.api_key, old.temperature) == (
        new.provider,
        new.model,
        new.base_url,
        new.api_key,
        new.temperature,
    )
    assert old.timeout_seconds == new.timeout_seconds == 60


OLD_EMBEDDER = (
    BASE
    + """\
memory:
  embedder:
    provider: openai
    config:
      model: text-embedding-3-small
      base_url: http://embed:8000/v1
      api_key: sk-test
      dimensions: 256
"""
)
NEW_EMBEDDER = """\
models:
  default:
    id: some-model
  embed:
    kind: embedder
    provider: openai
    id: text-embedding-3-small
    base_url: http://embed:8000/v1
    api_key: sk-test
    dimensions: 256
agents:
  general:
    rooms: [lobby]
memory:
  embedder: embed
"""


def test_old_memory_embedder_loads_with_the_same_settings_and_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    old, lines = parse_logged(OLD_EMBEDDER, caplog)
    assert len(lines) == 1
    assert lines[0].startswith("config.yaml: memory.embedder with its own provider and config")
    assert "add the embedder under models: (kind: embedder, provider: openai" in lines[0]
    assert lines[0].endswith("write memory.embedder: <key>")
    assert "sk-test" not in lines[0]  # a key is never repeated into the log
    settings = EmbedderSettings(
        model="text-embedding-3-small",
        base_url="http://embed:8000/v1",
        api_key="sk-test",
        dimensions=256,
    )
    expected = EmbedderConfig(provider="openai", config=settings)
    assert old.memory_embedder == expected
    assert old.agent_embedder("general") == expected
    new = parse_quiet(NEW_EMBEDDER, caplog)
    assert new.memory_embedder == expected
    assert new.agent_embedder("general") == expected


def test_old_embedder_shorthand_and_agent_override_warn_and_resolve_as_before(
    caplog: pytest.LogCaptureFixture,
) -> None:
    text = BASE.replace(
        "    rooms: [lobby]\n",
        "    rooms: [lobby]\n    memory_embedder: {provider: ollama, config: {model: nomic}}\n",
    )
    config, lines = parse_logged(text + "memory:\n  embedder: sentence_transformers\n", caplog)
    assert len(lines) == 2
    assert lines[0].startswith("config.yaml: memory.embedder with its own provider")
    assert "(kind: embedder, provider: sentence_transformers)" in lines[0]
    assert lines[1].startswith("config.yaml: agents.general.memory_embedder with its own")
    assert lines[1].endswith("write agents.general.memory_embedder: <key>")
    assert config.memory_embedder == EmbedderConfig(provider="sentence_transformers")
    assert config.agent_embedder("general") == EmbedderConfig(
        provider="ollama", config=EmbedderSettings(model="nomic")
    )
    new = parse_quiet(
        BASE.replace("id: some-model", "id: some-model\n  local: {provider: sentence_transformers}")
        + "memory:\n  embedder: local\n",
        caplog,
    )
    assert new.memory_embedder == config.memory_embedder


def test_old_inline_embedder_none_says_write_none(caplog: pytest.LogCaptureFixture) -> None:
    config, lines = parse_logged(BASE + "memory:\n  embedder: {provider: none}\n", caplog)
    assert lines == [
        "config.yaml: memory.embedder with its own provider and config is deprecated: write "
        "memory.embedder: none"
    ]
    assert config.memory_embedder == EmbedderConfig(provider="none")
    assert parse_quiet(BASE + "memory:\n  embedder: none\n", caplog).memory_embedder == (
        config.memory_embedder
    )


def test_old_speech_to_text_loads_with_the_same_endpoint_and_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    old_text = BASE + "media:\n  speech_to_text:\n    base_url: http://stt:9000/v1\n"
    old, lines = parse_logged(old_text, caplog)
    assert len(lines) == 1
    assert lines[0].startswith("config.yaml: media.speech_to_text with its own base_url is")
    assert "kind: speech_to_text, provider: openai, id: whisper-1" in lines[0]
    assert lines[0].endswith("write media.speech_to_text: {model: <key>}")
    expected = SpeechEndpoint(base_url="http://stt:9000/v1", api_key="none", model="whisper-1")
    assert old.speech_to_text == expected
    new_text = (
        BASE.replace(
            "id: some-model",
            "id: some-model\n  whisper:\n    kind: speech_to_text\n    id: whisper-1\n"
            "    base_url: http://stt:9000/v1",
        )
        + "media:\n  speech_to_text:\n    model: whisper\n"
    )
    assert parse_quiet(new_text, caplog).speech_to_text == expected


def test_config_built_in_python_warns_with_a_deprecation_warning() -> None:
    data = {
        "models": {"default": {"id": "m"}},
        "memory": {"llm": {"provider": "openai", "config": {"model": "gpt-x"}}},
    }
    with pytest.warns(ConfigDeprecationWarning, match="add the model under models:"):
        Config.model_validate(data)


# -- the new forms load silently ----------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["config.yaml", "deploy/config.yaml", "mindroom/config/starter/config.yaml"]
)
def test_shipped_configs_load_without_deprecations(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    text = (ROOT / path).read_text(encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigDeprecationWarning)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="mindroom.config"):
            parse_config(text, path, env={"MINDROOM_DATABASE_URL": "postgresql://u@h/db"})
    assert [r for r in caplog.records if r.name == "mindroom.config"] == []


def test_new_forms_load_without_warnings(caplog: pytest.LogCaptureFixture) -> None:
    for text in (NEW_LLM, NEW_EMBEDDER):
        parse_quiet(text, caplog)
    # the positive control: the same check fails on an old form
    old = {"models": {"d": {"id": "m"}}, "memory": {"llm": "openai"}}
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConfigDeprecationWarning)
        with pytest.raises(ConfigDeprecationWarning):
            Config.model_validate(old)


# -- a key that names no model -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "path"),
    [
        ("memory:\n  llm: extractr\n", "memory.llm"),
        ("memory:\n  embedder: extractr\n", "memory.embedder"),
        ("media:\n  speech_to_text: {model: extractr}\n", "media.speech_to_text.model"),
        ("router:\n  model: extractr\n", "router.model"),
    ],
)
def test_unknown_model_key_is_an_error_naming_the_key_and_the_known_keys(
    extra: str, path: str
) -> None:
    text = BASE.replace("id: some-model", "id: some-model\n  extractor: {id: llama3.2}") + extra
    with pytest.raises(ConfigError) as info:
        parse_config(text, "config.yaml", env={})
    assert str(info.value) == (
        f"config.yaml: {path}: unknown model 'extractr' (models: default, extractor)"
    )


def test_a_model_of_the_wrong_kind_is_an_error() -> None:
    text = BASE.replace(
        "id: some-model", "id: some-model\n  local: {provider: sentence_transformers}"
    )
    with pytest.raises(ConfigError) as info:
        parse_config(text + "memory:\n  llm: local\n", "config.yaml", env={})
    assert str(info.value) == (
        "config.yaml: memory.llm: models.local is a embedder model, not a chat model "
        "(set its kind, or name another model)"
    )
    with pytest.raises(ConfigError, match="agents.general.model: models.default is a embedder"):
        parse_config(
            BASE.replace("id: some-model", "id: e\n    kind: embedder"), "config.yaml", env={}
        )


def test_a_provider_shape_rejects_another_providers_key() -> None:
    text = BASE.replace("id: some-model", "id: some-model\n    provider: anthropic\n    host: x")
    with pytest.raises(ConfigError) as info:
        parse_config(text, "config.yaml", env={})
    assert str(info.value) == "config.yaml: models.default.host (line 5): unknown key"
    bad = BASE.replace("id: some-model", "id: some-model\n    provider: mistral")
    with pytest.raises(ConfigError, match="provider must be one of openai, anthropic"):
        parse_config(bad, "config.yaml", env={})


def test_an_old_shorthand_that_cannot_work_names_its_key() -> None:
    for extra, message in (
        ("memory: {embedder: ollama}", "memory.embedder: provider 'ollama' needs config.model"),
        ("memory: {llm: ollama}", "memory.llm: provider 'ollama' needs config.model"),
    ):
        with pytest.raises(ConfigError, match=f"^config.yaml: {message}"):
            parse_config(BASE + extra + "\n", "config.yaml", env={})
