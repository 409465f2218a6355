"""Probing configured models: one tiny completion (``mindroom doctor``) or a reachability check
at start-up, and the one text that says what to do when a model fails (in the doctor, the
start-up warning and the error notice of an agent's or a team's answer).

The ``openai`` package (about a second of CPU to import) is not imported with this module: the
doctor's completion is plain HTTP, and the start-up check imports it in a thread once the bot
is up.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import urllib.error
import urllib.request
from pathlib import Path

from mindroom.adapters.agno.failures import Failure, classify_model_failure, endpoint
from mindroom.adapters.agno.models import describe_model
from mindroom.adapters.embeddings.probe import warm_up_embedders, warn_unusable_embedders
from mindroom.adapters.http_clients import openai_async_http_client
from mindroom.checks import Check
from mindroom.config.models_schema import AnyModel, LocalEmbedderModel
from mindroom.config.schema import Config, ServedModel

logger = logging.getLogger(__name__)

REACH_TIMEOUT_S = 5.0
COMPLETION_TIMEOUT_S = 15.0  # a local server may load the model on its first request

__all__ = ["check_model", "endpoint", "model_failed", "model_fix", "warn_at_start"]


def model_fix(name: str, model: ServedModel, reason: Failure = None) -> str:
    """What to do when model ``name`` failed with ``reason`` (an exception, an HTTP status, the
    error text; None: nothing answered): the doctor, the start-up warning and the error notice
    in the room all say this (:func:`~mindroom.adapters.agno.failures.classify_model_failure`)."""
    return classify_model_failure(reason, name, model).fix


def model_failed(
    name: str,
    model: ServedModel,
    reason: object,
    actor: str = "",
    outcome: BaseException | int | None = None,
) -> str:
    """The notice when model ``name`` failed: what failed, why, and :func:`model_fix`.

    ``actor`` names the team or team member whose model it is, when not the answering agent's.
    ``outcome`` is what the model's last request got (an HTTP status or a transport exception,
    :class:`~mindroom.adapters.agno.failures.ModelCalls`): it classifies the failure when
    known, else ``reason`` does.
    """
    what = f"model {describe_model(name, model)}"
    what = f"{actor} ({what})" if actor else what
    why = str(reason).strip().rstrip(".")  # "Connection error." is one sentence, not two dots
    cause: Failure = outcome
    if cause is None:
        cause = reason if isinstance(reason, BaseException) else why
    return f"{what} failed: {why}. Fix: {model_fix(name, model, cause)}"


async def check_model(name: str, model: AnyModel) -> Check:
    """One tiny completion request to a chat model; embedders are checked with memory search
    (:mod:`mindroom.adapters.embeddings.probe`), transcription endpoints on first use."""
    if model.kind != "chat" or isinstance(model, LocalEmbedderModel):
        used = "memory search" if model.kind == "embedder" else "the first voice message"
        return Check(f"model {name}", True, f"a {model.kind} model: checked by {used}")
    if model.provider == "anthropic":
        return Check(f"model {name}", True, "anthropic: not checked (needs a paid request)")
    base = model.base_url or ("http://localhost:11434/v1" if model.provider == "ollama" else None)
    key = model.api_key or "none"
    try:
        # No base_url: where the SDK sends it (OPENAI_BASE_URL, else OpenAI's API).
        url = (base or os.environ.get("OPENAI_BASE_URL") or endpoint(model)).rstrip("/")
        await asyncio.to_thread(_complete_once, url, key, model.id)
        return Check(f"model {name}", True, f"{model.id} at {base or 'api.openai.com'} answers")
    except Exception as exc:  # every failure is a finding, classified as a turn's would be
        fix = model_fix(name, model, exc)
        return Check(f"model {name}", False, f"{model.id} at {base}: {exc}", fix)


class _NoCompletion(Exception):
    """Why the doctor's tiny completion request failed (its text goes into the finding; the
    HTTP status, when there was one, classifies it as a turn's failure would be)."""

    def __init__(self, text: str, status_code: int | None = None) -> None:
        super().__init__(text)
        self.status_code = status_code


def _complete_once(base: str, api_key: str, model_id: str) -> None:
    """One chat completion of one token from ``base`` (the request the model SDK makes for a
    turn, ``POST {base}/chat/completions`` with the key as a bearer token); raises _NoCompletion
    saying why there was none.

    Plain HTTP from the standard library: importing the model SDK costs more CPU than all the
    doctor's other checks, and the doctor runs no turn. A refusal reads as the SDK's does
    (``Error code: 401 - <body>``), so :func:`model_fix` finds the same cause in it.
    """
    request = urllib.request.Request(
        f"{base}/chat/completions",
        data=json.dumps(
            {"model": model_id, "messages": [{"role": "user", "content": "ping"}], "max_tokens": 1}
        ).encode("utf-8"),
        headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=COMPLETION_TIMEOUT_S) as response:
            raw = response.read()
    except urllib.error.HTTPError as exc:  # before URLError: it is one
        body = exc.read().decode("utf-8", "replace").strip()
        text = f"Error code: {exc.code} - {body[:300] or exc.reason}"
        raise _NoCompletion(text, exc.code) from None
    except urllib.error.URLError as exc:  # refused, no such host, timed out while connecting
        reason = exc.reason if isinstance(exc.reason, TimeoutError) else None
        raise _NoCompletion(f"Connection error: {exc.reason}") from reason  # a timeout says so
    except TimeoutError as exc:  # no answer in time
        raise _NoCompletion(f"Timed out after {COMPLETION_TIMEOUT_S:g} s") from exc
    except OSError as exc:  # cut off while answering
        raise _NoCompletion(f"Connection error: {exc}") from None
    try:
        answer = json.loads(raw or b"null")
    except ValueError:
        raise _NoCompletion(f"{base}/chat/completions did not answer with JSON") from None
    if not isinstance(answer, dict) or "choices" not in answer:
        raise _NoCompletion(f"{base}/chat/completions did not answer with a chat completion")


async def _unreachable(model: ServedModel) -> str | None:
    """Why nothing answers at ``model``'s endpoint, or None when something does.

    It lists models (a free request): any HTTP answer counts, a wrong key included; this checks
    the connection and leaves the key to the first turn and the doctor.
    """
    if model.provider == "anthropic":
        return None  # not an OpenAI-compatible endpoint; the doctor does not check it either
    from openai import APIConnectionError, APIStatusError, AsyncOpenAI  # the bot imported it

    client = AsyncOpenAI(
        base_url=endpoint(model),
        api_key=model.api_key or "none",
        timeout=REACH_TIMEOUT_S,
        max_retries=0,
        http_client=openai_async_http_client(),
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
                    model_fix(name, model, error),
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
