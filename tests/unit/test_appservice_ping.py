"""The appservice's start-up ping: asked again when it fails, so a homeserver whose retry timer
fired just before it (Synapse answers 502 "AlreadyCalled" and forces nothing) still delivers
what it kept at once. The homeserver's answers are given here; tests/integration/
test_appservice.py runs the ping against a real Synapse."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from mindroom.adapters.matrix import appservice
from mindroom.adapters.matrix.appservice import Appservice
from mindroom.config.schema import AppserviceConfig

pytestmark = pytest.mark.asyncio

ALREADY_CALLED = (
    502,
    {
        "errcode": "M_AS_PING_CONNECTION_FAILED",
        "error": "AlreadyCalled: cannot cancel a call that has already been called",
    },
)
PONG = (200, {"duration_ms": 3})


def answering(monkeypatch: pytest.MonkeyPatch, *answers: tuple[int, dict[str, Any]]) -> list[str]:
    """The homeserver answers the pings with ``answers`` in turn (the last one from then on);
    the paths asked, in order."""
    asked: list[str] = []

    async def request(
        homeserver: str, token: str, method: str, path: str, body: object = None
    ) -> tuple[int, dict[str, Any]]:
        asked.append(path)
        return answers[min(len(asked), len(answers)) - 1]

    monkeypatch.setattr(appservice, "_service_request", request)
    monkeypatch.setattr(appservice, "_PING_AGAIN_S", (0.01, 0.01))
    return asked


def service(tmp_path: Path) -> Appservice:
    return Appservice(AppserviceConfig(), "http://127.0.0.1:8008", tmp_path)


async def test_a_ping_refused_because_the_retry_timer_had_just_fired_is_asked_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    asked = answering(monkeypatch, ALREADY_CALLED, PONG)
    with caplog.at_level(logging.INFO, logger=appservice.__name__):
        await service(tmp_path).ping()

    assert asked == ["/_matrix/client/v1/appservice/mindroom/ping"] * 2
    assert "the homeserver reaches the appservice" in caplog.text
    assert "cannot reach" not in caplog.text


async def test_a_ping_that_keeps_failing_is_asked_three_times_then_warned_about(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    asked = answering(monkeypatch, (502, {"error": "ClientConnectorError: refused"}))
    with caplog.at_level(logging.INFO, logger=appservice.__name__):
        await service(tmp_path).ping()

    assert len(asked) == 3
    assert "cannot reach the appservice at http://127.0.0.1:9009" in caplog.text
    assert "refused" in caplog.text


@pytest.mark.parametrize(
    "answer", [PONG, (404, {}), (400, {"errcode": "M_UNRECOGNIZED"})], ids=["200", "404", "old"]
)
async def test_a_ping_answered_or_unknown_to_the_homeserver_is_asked_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: tuple[int, dict[str, Any]]
) -> None:
    asked = answering(monkeypatch, answer, ALREADY_CALLED)

    await service(tmp_path).ping()

    assert len(asked) == 1
