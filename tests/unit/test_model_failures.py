"""One classification of model failures: each way a model call fails, from an HTTP status, an
exception of the openai SDK or httpx, or the text Agno reports, and the words each gets."""

from __future__ import annotations

import json

import httpx
import httpx2
import openai
import pytest

from mindroom.adapters.agno.failures import FailureKind, classify_model_failure, failure_kind
from mindroom.adapters.agno.probe import model_failed, model_fix
from mindroom.config import parse_config
from tests.support.harness import config_text

URL = "http://127.0.0.1:9/v1"


def _model():  # type: ignore[no-untyped-def]
    return parse_config(config_text(URL, {"general": {}}), "config.yaml").models["default"]


def _status_error(status: int) -> openai.APIStatusError:
    request = httpx2.Request("POST", f"{URL}/chat/completions")
    response = httpx2.Response(status, request=request, json={"error": {"message": "nope"}})
    return openai.APIStatusError("nope", response=response, body=None)


def _connection_error() -> openai.APIConnectionError:
    request = httpx2.Request("POST", f"{URL}/chat/completions")
    try:
        raise openai.APIConnectionError(request=request) from ConnectionRefusedError(111, "no")
    except openai.APIConnectionError as exc:
        return exc


def _timeout() -> openai.APITimeoutError:
    return openai.APITimeoutError(request=httpx2.Request("POST", f"{URL}/chat/completions"))


@pytest.mark.parametrize(
    ("failure", "kind", "status"),
    [
        # HTTP statuses, as the model client records them
        (401, FailureKind.KEY_REFUSED, 401),
        (403, FailureKind.KEY_REFUSED, 403),
        (404, FailureKind.NOT_FOUND, 404),
        (429, FailureKind.RATE_LIMITED, 429),
        (500, FailureKind.SERVER_ERROR, 500),
        (502, FailureKind.SERVER_ERROR, 502),
        (503, FailureKind.SERVER_ERROR, 503),
        (504, FailureKind.TIMEOUT, 504),
        (400, FailureKind.REJECTED, 400),
        (422, FailureKind.REJECTED, 422),
        # exceptions of the openai SDK (the doctor's probe) and of the transport (a turn's)
        (_status_error(401), FailureKind.KEY_REFUSED, 401),
        (_status_error(404), FailureKind.NOT_FOUND, 404),
        (_status_error(429), FailureKind.RATE_LIMITED, 429),
        (_status_error(500), FailureKind.SERVER_ERROR, 500),
        (_connection_error(), FailureKind.UNREACHABLE, None),
        (_timeout(), FailureKind.TIMEOUT, None),
        (httpx.ConnectError("All connection attempts failed"), FailureKind.UNREACHABLE, None),
        (httpx.ReadTimeout("timed out"), FailureKind.TIMEOUT, None),
        (ConnectionRefusedError(111, "Connection refused"), FailureKind.UNREACHABLE, None),
        (json.JSONDecodeError("Expecting value", "<html>", 0), FailureKind.BAD_RESPONSE, None),
        # the text Agno reports instead of raising, when nothing better is known
        ("Error code: 401 - Incorrect API key provided", FailureKind.KEY_REFUSED, 401),
        ("Incorrect API key provided", FailureKind.KEY_REFUSED, None),
        ("Unauthorized", FailureKind.KEY_REFUSED, None),
        ("model 'x' not found", FailureKind.NOT_FOUND, None),
        ("Rate limit reached for requests", FailureKind.RATE_LIMITED, None),
        ("You exceeded your current quota", FailureKind.RATE_LIMITED, None),
        ("Connection error.", FailureKind.UNREACHABLE, None),
        ("Request timed out.", FailureKind.TIMEOUT, None),
        ("Internal Server Error", FailureKind.SERVER_ERROR, None),
        ("Expecting value: line 1 column 1 (char 0)", FailureKind.BAD_RESPONSE, None),
        ("something odd", FailureKind.UNKNOWN, None),
        # nothing known: a probe that could not connect
        (None, FailureKind.UNREACHABLE, None),
    ],
)
def test_each_failure_gets_its_kind(failure: object, kind: FailureKind, status: int | None) -> None:
    assert failure_kind(failure) == (kind, status)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("failure", "words"),
    [
        (401, "(HTTP 401) refused the key: check models.default.api_key"),
        (403, "(HTTP 403) refused the key: check models.default.api_key"),
        (404, "(HTTP 404) has no model 'scripted' (or no such endpoint): check models.default.id"),
        (429, "(HTTP 429) limits the rate or the quota is used up: wait and try again"),
        (500, "(HTTP 500) failed: the fault is on its side"),
        (None, f"is the model server at {URL} running?"),
        ("Request timed out.", "did not answer within 20 s: check that it is not overloaded"),
        ("Expecting value", "did not answer like an OpenAI-compatible chat model"),
    ],
)
def test_each_kind_says_what_to_check(failure: object, words: str) -> None:
    fix = model_fix("default", _model(), failure)  # type: ignore[arg-type]
    assert words in fix
    assert fix.endswith(" doctor")  # each ends the same way


def test_the_recorded_status_wins_over_the_words_of_the_error() -> None:
    # A 401 whose body says nothing of keys: the status decides, in the notice as in the doctor
    notice = model_failed("default", _model(), "Connection error.", outcome=401)
    assert "failed: Connection error. Fix: " in notice
    assert "(HTTP 401) refused the key: check models.default.api_key" in notice
    assert "running?" not in notice
    # control: without the status the same words are taken as an unreachable server
    assert "running?" in model_failed("default", _model(), "Connection error.")


def test_the_doctor_and_the_notice_say_the_same_for_the_same_failure() -> None:
    model = _model()
    doctor = model_fix("default", model, _status_error(401))  # what check_model catches
    notice = model_failed("default", model, "Incorrect API key provided", outcome=401)
    assert notice.endswith(f"Fix: {doctor}")
    failure = classify_model_failure(401, "default", model)
    assert failure.user_text in doctor
    assert failure.operator_hint == "check models.default.api_key"
