"""Probing configured models: one tiny completion (``mindroom doctor``) or a reachability check
at start-up, and the one text that says what to do when a model fails (in the doctor, the
start-up warning and the error notice of an agent's or a team's answer).

The ``openai`` package (about a second of CPU to import) is imported by the probes, not with
this module: the bot imports this module at start-up, and runs the probes once it is up.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from pathlib import Path

from mindroom.adapters.agno.models import OLLAMA_DEFAULT_URL, describe_model
from mindroom.adapters.embeddings.probe import warm_up_embedders, warn_unusable_embedders
from mindroom.checks import Check
from mindroom.config.models_schema import AnyModel, LocalEmbedderModel
from mindroom.config.schema import Config, ServedModel
from mindroom.invocation import README_COMMAND

logger = logging.getLogger(__name__)

REACH_TIMEOUT_S = 5.0
_DEFAULT_URLS = {
    "openai": "https://api.openai.com/v1",
    "ollama": OLLAMA_DEFAULT_URL,
    "anthropic": "https://api.anthropic.com",
}


def endpoint(model: ServedModel) -> str:
    """Where requests for ``model`` go."""
    return (model.base_url or _DEFAULT_URLS[model.provider]).rstrip("/")


_KEY_REFUSED = ("401", "403", "api key", "api_key", "unauthorized", "authentication")
_NO_SUCH_MODEL = ("404", "not found", "does not exist", "no such model", "unknown model")


def model_fix(name: str, model: ServedModel, reason: object = "") -> str:
    """What to do when model ``name`` failed (for ``reason``, when known): the doctor, the
    start-up warning and the error notice in the room all say this."""
    settings = (
        "(base_url, api_key, id; or OPENAI_BASE_URL, OPENAI_API_KEY, MINDROOM_MODEL, also read "
        f"from a .env file beside it), then run {README_COMMAND} doctor"
    )
    why = str(reason).lower()
    if any(word in why for word in _KEY_REFUSED):
        first = f"the server at {endpoint(model)} refused the key: check models.{name}.api_key"
    elif any(word in why for word in _NO_SUCH_MODEL):
        first = f"the server at {endpoint(model)} has no model {model.id!r}: check models.{name}.id"
    else:
        first = f"is the model server at {endpoint(model)} running? Check models.{name}"
    return f"{first} in config.yaml {settings}"


def model_failed(name: str, model: ServedModel, reason: object, actor: str = "") -> str:
    """The notice when model ``name`` failed: what failed, why, and :func:`model_fix`.

    ``actor`` names the team or team member whose model it is, when not the answering agent's.
    """
    what = f"model {describe_model(name, model)}"
    what = f"{actor} ({what})" if actor else what
    why = str(reason).strip().rstrip(".")  # "Connection error." is one sentence, not two dots
    return f"{what} failed: {why}. Fix: {model_fix(name, model, why)}"


async def check_model(name: str, model: AnyModel) -> Check:
    """One tiny completion request to a chat model; embedders are checked with memory search
    (:mod:`mindroom.adapters.embeddings.probe`), transcription endpoints on first use."""
    if model.kind != "chat" or isinstance(model, LocalEmbedderModel):
        used = "memory search" if model.kind == "embedder" else "the first voice message"
        return Check(f"model {name}", True, f"a {model.kind} model: checked by {used}")
    if model.provider == "anthropic":
        return Check(f"model {name}", True, "anthropic: not checked (needs a paid request)")
    from openai import AsyncOpenAI

    base = model.base_url or ("http://localhost:11434/v1" if model.provider == "ollama" else None)
    client = AsyncOpenAI(base_url=base, api_key=model.api_key or "none", timeout=15, max_retries=0)
    try:
        await client.chat.completions.create(
            model=model.id, messages=[{"role": "user", "content": "ping"}], max_tokens=1
        )
        return Check(f"model {name}", True, f"{model.id} at {base or 'api.openai.com'} answers")
    except Exception as exc:  # every failure is a finding
        fix = model_fix(name, model, exc)
        return Check(f"model {name}", False, f"{model.id} at {base}: {exc}", fix)
    finally:
        await client.close()


async def _unreachable(model: ServedModel) -> str | None:
    """Why nothing answers at ``model``'s endpoint, or None when something does.

    It lists models (a free request): any HTTP answer counts, a wrong key included; this checks
    the connection and leaves the key to the first turn and the doctor.
    """
    if model.provider == "anthropic":
        return None  # not an OpenAI-compatible endpoint; the doctor does not check it either
    from openai import APIConnectionError, APIStatusError, AsyncOpenAI

    client = AsyncOpenAI(
        base_url=endpoint(model),
        api_key=model.api_key or "none",
        timeout=REACH_TIMEOUT_S,
        max_retries=0,
    )
    try:
        await client.models.list()
    except APIStatusError:
        return None
    except APIConnectionError as exc:  # APITimeoutError is one too
        cause = exc.__cause__
        return f"{exc}: {cause}" if cause else str(exc)
    finally:
        await client.close()
    return None


async def warn_unreachable_models(config: Config) -> None:
    """Log one warning, with the fix, for each configured model whose endpoint does not answer.

    Meant to run in the background at start-up: it never raises and never delays anything.
    """
    try:
        names = [n for n, m in config.models.items() if m.kind == "chat"]
        if names:  # in a thread: the loop keeps answering while the SDK is imported
            await asyncio.to_thread(importlib.import_module, "openai")
        errors = await asyncio.gather(*(_unreachable(config.chat_model(n)) for n in names))
        for name, error in zip(names, errors, strict=True):
            if error is not None:
                model = config.chat_model(name)
                logger.warning(
                    "model %s at %s is unreachable (%s): %s",
                    name,
                    endpoint(model),
                    error,
                    model_fix(name, model),
                )
    except Exception:  # a probe failing must not look like a model failing, nor stop start-up
        logger.exception("checking the models' endpoints failed")


async def warn_at_start(config: Config, config_dir: Path) -> None:
    """The start-up checks, in the background: unreachable models, embedders that cannot work;
    then the local embedders are loaded, so the first turn does not wait for them."""

    async def embedders() -> None:
        await warn_unusable_embedders(config, config_dir)
        await warm_up_embedders(config, config_dir)  # after the check: a bad one is said first

    # apart from the models' check, whose SDK import takes a second the warm-up need not wait
    await asyncio.gather(warn_unreachable_models(config), embedders())
