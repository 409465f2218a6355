"""One classification of model failures, for every place that explains one.

A model call fails in a few ways that a person fixes differently: nothing answers at the
endpoint, it does not answer in time, it refuses the key (401, 403), it has no such model or
endpoint (404), it limits the rate or the quota is spent (429), it fails itself (5xx), it refuses
the request otherwise (another 4xx), or it answers with something that is not a chat
completion. :func:`failure_kind` tells which from what is known about the failure (an exception
of the ``openai`` SDK or of httpx, an HTTP status, or the text Agno reports instead of raising),
and :func:`classify_model_failure` words it for model ``name``: a short ``user_text`` (what
happened, for the notice in the room) and an ``operator_hint`` (which key to check).

The error notice of a turn (:func:`mindroom.adapters.agno.probe.model_failed`), the start-up
warning and ``mindroom doctor`` all call it, so a refused key reads the same in all three.

Agno reports a failed run as text without the HTTP status (a 401 comes back as "Incorrect API
key provided"), so the model clients send their requests through
:class:`~mindroom.adapters.agno.recording.RecordingTransport`: inside
:func:`recording_model_calls` it keeps the last failing outcome of each model in the current
turn (a status or a transport exception), and a failure is classified from that, never from
the words of a server's error message when the status is known. This module imports neither
the model SDK nor its HTTP client (the doctor classifies its own plain HTTP request with it).

Context overflow (:mod:`mindroom.sessions.overflow`) and running out of descriptors
(:func:`mindroom.app.resources.exhaustion_message`) are recognised before this, elsewhere.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum

from mindroom.config.schema import ServedModel
from mindroom.invocation import README_COMMAND

OLLAMA_DEFAULT_URL = "http://localhost:11434/v1"
DEFAULT_URLS = {
    "openai": "https://api.openai.com/v1",
    "ollama": OLLAMA_DEFAULT_URL,
    "anthropic": "https://api.anthropic.com",
}


def endpoint(model: ServedModel) -> str:
    """Where requests for ``model`` go."""
    return (model.base_url or DEFAULT_URLS[model.provider]).rstrip("/")


class FailureKind(StrEnum):
    """Why a model call failed, as far as a person fixing it is concerned."""

    UNREACHABLE = "unreachable"  # no connection: nothing listens, wrong host, DNS
    TIMEOUT = "timeout"  # connected (or trying), but no answer in time
    KEY_REFUSED = "key_refused"  # 401, 403
    NOT_FOUND = "not_found"  # 404: no such model, or the base_url misses its /v1
    RATE_LIMITED = "rate_limited"  # 429: too many requests, or the quota is spent
    SERVER_ERROR = "server_error"  # 5xx: the server's own failure
    REJECTED = "rejected"  # another 4xx: the request itself was refused
    BAD_RESPONSE = "bad_response"  # an answer that is not a chat completion
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ModelFailure:
    """A classified model failure of one configured model, worded for people.

    ``user_text`` says what happened ("the server at http://... refused the key");
    ``operator_hint`` what to check ("check models.default.api_key"); :attr:`fix` is both,
    followed by where the settings live and the doctor to run.
    """

    kind: FailureKind
    status: int | None
    user_text: str
    operator_hint: str

    @property
    def fix(self) -> str:
        """The whole advice, the same in the room, the log and the doctor."""
        settings = (
            "(base_url, api_key, id; or OPENAI_BASE_URL, OPENAI_API_KEY, MINDROOM_MODEL, also "
            f"read from a .env file beside it), then run {README_COMMAND} doctor"
        )
        return f"{self.user_text}: {self.operator_hint} in config.yaml {settings}"


Failure = BaseException | int | str | None


def _kind_of_status(status: int) -> FailureKind:
    if status in (401, 403):
        return FailureKind.KEY_REFUSED
    if status == 404:
        return FailureKind.NOT_FOUND
    if status == 429:
        return FailureKind.RATE_LIMITED
    if status in (408, 504):
        return FailureKind.TIMEOUT
    if status >= 500:
        return FailureKind.SERVER_ERROR
    if status >= 400:
        return FailureKind.REJECTED
    return FailureKind.BAD_RESPONSE  # a failure with a success status: the body was wrong


def _sdk_kind(exc: BaseException) -> tuple[FailureKind, int | None] | None:
    """The kind of an exception of the model SDK or its HTTP client. They are looked up, never
    imported: an exception of a library this process has not imported cannot be at hand (the
    doctor classifies without importing either)."""
    openai, httpx = sys.modules.get("openai"), sys.modules.get("httpx")
    if openai is not None:
        if isinstance(exc, openai.APIResponseValidationError):
            return FailureKind.BAD_RESPONSE, exc.status_code
        if isinstance(exc, openai.APIStatusError):
            return _kind_of_status(exc.status_code), exc.status_code
        if isinstance(exc, openai.APITimeoutError):
            return FailureKind.TIMEOUT, None
        if isinstance(exc, openai.APIConnectionError):
            return FailureKind.UNREACHABLE, None
    if httpx is not None:
        if isinstance(exc, httpx.TimeoutException):
            return FailureKind.TIMEOUT, None
        if isinstance(exc, httpx.TransportError):
            return FailureKind.UNREACHABLE, None
        if isinstance(exc, httpx.DecodingError):
            return FailureKind.BAD_RESPONSE, None
    return None


def _kind_of_exception(exc: BaseException) -> tuple[FailureKind, int | None] | None:
    """The kind of one exception of the chain, or None when it tells nothing."""
    if (found := _sdk_kind(exc)) is not None:
        return found
    if isinstance(exc, TimeoutError):
        return FailureKind.TIMEOUT, None
    if isinstance(exc, ConnectionError):
        return FailureKind.UNREACHABLE, None
    if isinstance(exc, json.JSONDecodeError):
        return FailureKind.BAD_RESPONSE, None
    status = getattr(exc, "status_code", None)  # Agno's ModelProviderError, among others
    if isinstance(status, int) and status >= 400:
        return _kind_of_status(status), status
    return None


_ERROR_CODE = re.compile(r"\b(?:error code|status(?: code)?|http)[: ]+([1-5]\d\d)\b", re.I)
_TEXT_KINDS: tuple[tuple[FailureKind, re.Pattern[str]], ...] = (
    (
        FailureKind.KEY_REFUSED,
        re.compile(
            r"api[ _-]?key|unauthori[sz]ed|authenticat|forbidden|permission denied|"
            r"invalid[ _-]token|\b40[13]\b",
            re.I,
        ),
    ),
    (
        FailureKind.RATE_LIMITED,
        re.compile(r"rate[ _-]?limit|quota|too many requests|\b429\b", re.I),
    ),
    (
        FailureKind.NOT_FOUND,
        re.compile(r"not found|does not exist|no such model|unknown model|\b404\b", re.I),
    ),
    (FailureKind.TIMEOUT, re.compile(r"timed out|timeout", re.I)),
    (
        FailureKind.UNREACHABLE,
        re.compile(
            r"connection (?:error|refused|reset)|connect(?:ion)? ?error|name or service not known|"
            r"nodename nor servname|no route to host|network is unreachable|"
            r"temporary failure in name resolution",
            re.I,
        ),
    ),
    (
        FailureKind.SERVER_ERROR,
        re.compile(r"internal server error|bad gateway|service unavailable|overloaded", re.I),
    ),
    (
        FailureKind.BAD_RESPONSE,
        re.compile(
            r"expecting value|invalid json|not valid json|unexpected (?:response|content)|"
            r"validation error|no choices",
            re.I,
        ),
    ),
)


def _kind_of_text(text: str) -> tuple[FailureKind, int | None]:
    if match := _ERROR_CODE.search(text):
        status = int(match.group(1))
        return _kind_of_status(status), status
    for kind, pattern in _TEXT_KINDS:
        if pattern.search(text):
            return kind, None
    return FailureKind.UNKNOWN, None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def failure_kind(failure: Failure) -> tuple[FailureKind, int | None]:
    """Which kind of failure ``failure`` is, and its HTTP status when one is known.

    ``failure`` is an exception (its causes are examined too: the first one that tells wins),
    an HTTP status, the error text Agno returned instead of raising, or None (nothing is known:
    the endpoint is taken as unreachable, as when a start-up probe could not connect).
    """
    if failure is None:
        return FailureKind.UNREACHABLE, None
    if isinstance(failure, bool):
        return FailureKind.UNKNOWN, None
    if isinstance(failure, int):
        return _kind_of_status(failure), failure
    if isinstance(failure, BaseException):
        for exc in _chain(failure):
            if (found := _kind_of_exception(exc)) is not None:
                return found
        return _kind_of_text(str(failure))
    return _kind_of_text(str(failure))


def classify_model_failure(failure: Failure, name: str, model: ServedModel) -> ModelFailure:
    """Classify ``failure`` of configured model ``name`` and word it (see :class:`ModelFailure`)."""
    kind, status = failure_kind(failure)
    at = endpoint(model) + (f" (HTTP {status})" if status else "")
    key = f"models.{name}"
    if kind is FailureKind.UNREACHABLE:
        text, hint = f"is the model server at {at} running? Nothing answered there", f"check {key}"
    elif kind is FailureKind.TIMEOUT:
        text = f"the model server at {at} did not answer within {model.timeout_seconds:g} s"
        hint = f"check that it is not overloaded, or raise {key}.timeout_seconds"
    elif kind is FailureKind.KEY_REFUSED:
        text, hint = f"the server at {at} refused the key", f"check {key}.api_key"
    elif kind is FailureKind.NOT_FOUND:
        text = f"the server at {at} has no model {model.id!r} (or no such endpoint)"
        hint = f"check {key}.id, and that {key}.base_url ends where the API starts (often /v1)"
    elif kind is FailureKind.RATE_LIMITED:
        text = f"the server at {at} limits the rate or the quota is used up"
        hint = f"wait and try again, or check the plan of the account behind {key}.api_key"
    elif kind is FailureKind.SERVER_ERROR:
        text = f"the model server at {at} failed"
        hint = f"the fault is on its side: see its logs, or check {key}"
    elif kind is FailureKind.REJECTED:
        text = f"the server at {at} refused the request"
        hint = f"check {key} (id, base_url) against what the server serves"
    elif kind is FailureKind.BAD_RESPONSE:
        text = f"the server at {at} did not answer like an OpenAI-compatible chat model"
        hint = f"check that {key}.base_url is its OpenAI-compatible endpoint"
    else:
        text, hint = f"the model server at {at} failed", f"check {key}"
    return ModelFailure(kind, status, text, hint)


# -- what the model clients record -------------------------------------------------------------


@dataclass
class ModelCalls:
    """The last failing outcome of each configured model's requests in one turn, by model key
    (absent: its last request succeeded, or it made none)."""

    failures: dict[str, BaseException | int] = field(default_factory=dict)

    def last_failure(self, model: str) -> BaseException | int | None:
        """What the last request of model ``model`` got, when it failed."""
        return self.failures.get(model)

    def note(self, model: str, outcome: BaseException | int | None) -> None:
        """Record the outcome of a request of ``model`` (None: it succeeded)."""
        if outcome is None:
            self.failures.pop(model, None)
        else:
            self.failures[model] = outcome


_CALLS: contextvars.ContextVar[ModelCalls | None] = contextvars.ContextVar(
    "mindroom_model_calls", default=None
)


@contextlib.contextmanager
def recording_model_calls() -> Iterator[ModelCalls]:
    """Record the outcome of the model requests made in this context (tasks started in it too:
    they share the record)."""
    calls = ModelCalls()
    token = _CALLS.set(calls)
    try:
        yield calls
    finally:
        _CALLS.reset(token)


def current_model_calls() -> ModelCalls | None:
    """The record of the model requests of the context this runs in (None: none is kept)."""
    return _CALLS.get()
