"""Voice messages to text: an OpenAI-compatible transcription endpoint (``media.speech_to_text``).

One request per voice message (``POST {base_url}/audio/transcriptions`` with the audio file),
through the ``openai`` client, as the model calls go. A failure raises :class:`ModelError`
with the endpoint's words; the caller turns it into a notice.
"""

from __future__ import annotations

import openai

from mindroom.adapters.http_clients import openai_async_http_client
from mindroom.config.models_schema import SpeechEndpoint
from mindroom.errors import ModelError

TIMEOUT_S = 120.0


async def transcribe(settings: SpeechEndpoint, audio: bytes, name: str) -> str:
    """The text spoken in ``audio`` (a file called ``name``)."""
    client = openai.AsyncOpenAI(
        base_url=settings.base_url,
        api_key=settings.api_key,
        timeout=TIMEOUT_S,
        max_retries=1,
        http_client=openai_async_http_client(),
    )
    try:
        result = await client.audio.transcriptions.create(model=settings.model, file=(name, audio))
    except openai.OpenAIError as exc:
        raise ModelError(f"speech to text at {settings.base_url} failed: {exc}") from exc
    finally:
        await client.close()
    return str(getattr(result, "text", "") or "").strip()
