"""Turn a configured model into an Agno model object.

Only ``openai`` (any OpenAI-compatible server), ``ollama`` (through its OpenAI-compatible
``/v1`` endpoint, so no extra package is needed) and ``anthropic`` (needs the ``anthropic``
package) are known. Model objects are built once per configured model and shared: they hold the
HTTP connection pool, whose requests go through
:class:`~mindroom.adapters.agno.recording.RecordingTransport` (a failed turn is classified by
the HTTP status its last request got).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mindroom.adapters.agno.failures import OLLAMA_DEFAULT_URL
from mindroom.config.schema import ServedModel
from mindroom.errors import ConfigError

if TYPE_CHECKING:  # Agno is imported when a model is built: the doctor only describes them
    from agno.models.base import Model

__all__ = ["OLLAMA_DEFAULT_URL", "build_model", "describe_model"]


def describe_model(name: str, config: ServedModel) -> str:
    """A short human description, e.g. ``default (openai: llama3.2 at http://...)``."""
    where = f" at {config.base_url}" if config.base_url else ""
    return f"{name} ({config.provider}: {config.id}{where})"


def build_model(name: str, config: ServedModel) -> Model:
    """Build the Agno model for the configured model ``name``."""
    if config.provider in ("openai", "ollama"):
        from agno.models.openai import OpenAIChat, OpenAILike

        from mindroom.adapters import openai_bodies
        from mindroom.adapters.agno.recording import recording_http_client

        openai_bodies.install()  # the SDK does not walk each request body again
        base_url = config.base_url or (OLLAMA_DEFAULT_URL if config.provider == "ollama" else None)
        cls = OpenAILike if base_url else OpenAIChat
        return cls(
            id=config.id,
            base_url=base_url,
            api_key=config.api_key or ("ollama" if config.provider == "ollama" else None),
            temperature=config.temperature,
            timeout=config.timeout_seconds,
            max_retries=config.max_retries,
            # its outcomes are recorded, so a failed turn is classified by the HTTP status
            http_client=recording_http_client(name),
        )
    if config.provider == "anthropic":
        try:
            from agno.models.anthropic import Claude
        except ImportError as exc:
            raise ConfigError(
                f"models.{name}: provider 'anthropic' needs the anthropic package "
                "(pip install 'mindroom[anthropic]')"
            ) from exc
        return Claude(
            id=config.id,
            api_key=config.api_key,
            temperature=config.temperature,
            timeout=config.timeout_seconds,
        )
    raise ConfigError(f"models.{name}: unknown provider {config.provider!r}")
