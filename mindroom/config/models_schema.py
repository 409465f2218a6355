"""``models:``: every model endpoint, defined once and referred to by its key.

A model entry says what it is (``kind``: a ``chat`` model, an ``embedder`` or a
``speech_to_text`` endpoint) and where it is served; its shape depends on ``provider`` (a
pydantic discriminated union: an ``openai`` entry takes ``base_url``, an ``ollama`` one
``host`` too, a local ``sentence_transformers`` embedder only a model path). Everything that uses
a model names its key: ``agents.<name>.model``, ``defaults.model``, ``router.model``,
``memory.llm``, ``memory.embedder``, ``agents.<name>.memory_embedder`` and
``media.speech_to_text.model``.

The older inline forms (``memory.llm.config``, ``memory.embedder.config``, a
``media.speech_to_text`` with its own ``base_url``) still load; :mod:`mindroom.config.schema`
warns about each with a :class:`ConfigDeprecationWarning` that names the form to write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag

from mindroom.config.strict import Strict as _Strict

ModelKind = Literal["chat", "embedder", "speech_to_text"]
LOCAL_EMBEDDER_PROVIDERS = ("sentence_transformers", "huggingface")


class ConfigDeprecationWarning(FutureWarning):
    """A config key or form that still loads but should be rewritten; the message names the
    new form. A FutureWarning, so Python shows it by default: it is meant for the people who
    write the config, not for developers."""


class _Endpoint(_Strict):
    """The fields every served model has."""

    kind: ModelKind = Field(
        default="chat",
        description="what the model is used as: `chat` (agents, teams, the router, "
        "memory.llm), `embedder` (memory.embedder) or `speech_to_text` "
        "(media.speech_to_text.model)",
    )
    id: str = Field(min_length=1, description="the model's name at the server, e.g. `llama3.2`")
    base_url: str | None = Field(
        default=None,
        description="the OpenAI-compatible endpoint; unset: `OPENAI_BASE_URL`, else the "
        "provider's public API",
    )
    api_key: str | None = Field(
        default=None, description="unset: the provider's environment variable (`OPENAI_API_KEY`)"
    )
    temperature: float | None = Field(default=None, description="unset: the server's default")
    timeout_seconds: float = Field(
        default=120.0, gt=0, description="one request may take this long"
    )
    max_retries: int = Field(default=2, ge=0, description="retries of a failed request")
    context_tokens: int | None = Field(
        default=None,
        ge=256,
        description="the model's context budget; a thread whose history nears it is compacted",
    )
    dimensions: int | None = Field(
        default=None, ge=1, le=65536, description="an embedder's vector size, when it may choose"
    )


class OpenAIModel(_Endpoint):
    """An OpenAI-compatible server (OpenAI itself, vLLM, llama.cpp, Ollama's ``/v1``...)."""

    provider: Literal["openai"] = Field(
        default="openai", description="any OpenAI-compatible server"
    )


class AnthropicModel(_Endpoint):
    """Anthropic's API (needs ``pip install 'mindroom[anthropic]'``); chat only."""

    provider: Literal["anthropic"] = Field(description="Anthropic's API")
    kind: Literal["chat"] = Field(default="chat", description="Anthropic serves chat models only")


class OllamaModel(_Endpoint):
    """An Ollama server: chat through its OpenAI-compatible ``/v1`` (``base_url``, default
    ``http://localhost:11434/v1``), embeddings and mem0's extraction at ``host``."""

    provider: Literal["ollama"] = Field(description="an Ollama server")
    kind: Literal["chat", "embedder"] = Field(
        default="chat", description="`chat` or `embedder` (e.g. `nomic-embed-text`)"
    )
    host: str | None = Field(
        default=None,
        min_length=1,
        description="Ollama's own address (default `http://localhost:11434`), used by "
        "embedders and memory.llm",
    )


class LocalEmbedderModel(_Strict):
    """A sentence-transformers embedder run in this process (``mindroom[embeddings]``)."""

    provider: Literal["sentence_transformers", "huggingface"] = Field(
        description="a local sentence-transformers model (`huggingface` is the same)"
    )
    kind: Literal["embedder"] = Field(default="embedder", description="always `embedder`")
    id: str | None = Field(
        default=None,
        min_length=1,
        description="the path of a sentence-transformers model folder (relative to the config "
        "file); unset: the bundled all-MiniLM-L6-v2",
    )
    dimensions: int | None = Field(
        default=None, ge=1, le=65536, description="truncate vectors to this size"
    )


def _provider_tag(value: Any) -> str:
    provider = value.get("provider", "openai") if isinstance(value, dict) else value.provider
    return "(local)" if provider in LOCAL_EMBEDDER_PROVIDERS else f"({provider})"


def is_union_tag(part: object) -> bool:
    """Whether ``part`` of an error's location is one of the tags below, which name a branch
    of a union and no key of the file (error messages leave them out)."""
    return isinstance(part, str) and part.startswith("(") and part.endswith(")")


def ref_tag(value: Any) -> str:
    """The branch of a ``<key> | <older inline form>`` union ``value`` is."""
    return "(key)" if isinstance(value, str) else "(inline)"


def _speech_tag(value: Any) -> str:
    if isinstance(value, SpeechToTextConfig):
        return "(inline)"
    inline = isinstance(value, dict) and ("base_url" in value or "api_key" in value)
    return "(inline)" if inline else "(key)"


ServedModel = OpenAIModel | AnthropicModel | OllamaModel
"""A model at a server: what agents, teams, the router and memory.llm may use."""

ModelConfig = Annotated[
    Annotated[OpenAIModel, Tag("(openai)")]
    | Annotated[AnthropicModel, Tag("(anthropic)")]
    | Annotated[OllamaModel, Tag("(ollama)")]
    | Annotated[LocalEmbedderModel, Tag("(local)")],
    Discriminator(
        _provider_tag,
        custom_error_type="unknown_provider",
        custom_error_message="provider must be one of openai, anthropic, ollama, "
        "sentence_transformers, huggingface",
    ),
]
"""One entry of ``models:``, its shape chosen by ``provider`` (``openai`` when unset)."""

AnyModel = OpenAIModel | AnthropicModel | OllamaModel | LocalEmbedderModel


class SpeechToTextConfig(_Strict):
    """The older inline form of ``media.speech_to_text``: an OpenAI-compatible transcription
    endpoint of its own (deprecated: define it under ``models:`` with ``kind: speech_to_text``
    and write ``media.speech_to_text.model: <key>``)."""

    base_url: str = Field(description="the endpoint (`POST {base_url}/audio/transcriptions`)")
    api_key: str = Field(default="none", description="its key")
    model: str = Field(default="whisper-1", description="the model's name at the server")


class SpeechToTextModel(_Strict):
    """``media.speech_to_text``: voice messages are transcribed by this model."""

    model: str = Field(
        min_length=1,
        description="a key of `models:` whose entry has `kind: speech_to_text` (an "
        "OpenAI-compatible `/audio/transcriptions` endpoint)",
    )


@dataclass(frozen=True)
class SpeechEndpoint:
    """Where voice messages are transcribed, resolved from either form of
    ``media.speech_to_text``."""

    base_url: str | None  # None: OPENAI_BASE_URL, else api.openai.com
    api_key: str
    model: str


SpeechToText = Annotated[
    Annotated[SpeechToTextModel, Tag("(key)")] | Annotated[SpeechToTextConfig, Tag("(inline)")],
    Discriminator(_speech_tag),
]
"""``media.speech_to_text``: ``{model: <key>}``, or the older inline endpoint."""
