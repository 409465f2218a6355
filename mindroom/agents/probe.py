"""Probing a configured model for ``mindroom doctor``: one tiny completion request."""

from __future__ import annotations

from openai import AsyncOpenAI

from mindroom.checks import Check
from mindroom.config.schema import ModelConfig


async def check_model(name: str, model: ModelConfig) -> Check:
    """One tiny completion request."""
    if model.provider == "anthropic":
        return Check(f"model {name}", True, "anthropic: not checked (needs a paid request)")
    base = model.base_url or ("http://localhost:11434/v1" if model.provider == "ollama" else None)
    client = AsyncOpenAI(base_url=base, api_key=model.api_key or "none", timeout=15, max_retries=0)
    try:
        await client.chat.completions.create(
            model=model.id, messages=[{"role": "user", "content": "ping"}], max_tokens=1
        )
        return Check(f"model {name}", True, f"{model.id} at {base or 'api.openai.com'} answers")
    except Exception as exc:  # every failure is a finding
        return Check(
            f"model {name}",
            False,
            f"{model.id} at {base}: {exc}",
            "check base_url, api_key and id (OPENAI_BASE_URL, OPENAI_API_KEY, MINDROOM_MODEL)",
        )
    finally:
        await client.close()
