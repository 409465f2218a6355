"""Fixtures: one Synapse for the whole session, one scripted model server, per-test bots."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from mindroom.matrix.homeserver import EmbeddedHomeserver
from tests.harness import BotHarness, BotProcess, CredentialCache, Human
from tests.scripted_model import ScriptedModel

os.environ["AGNO_TELEMETRY"] = "false"
# The tests must never reach a real model or homeserver by accident.
for _var in (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "MATRIX_HOMESERVER",
    "MATRIX_REGISTRATION_SHARED_SECRET",
    "MINDROOM_MODEL",
):
    os.environ.pop(_var, None)


@pytest.fixture(scope="session")
def synapse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedHomeserver]:
    """A real Synapse on loopback (free port, SQLite), shared by every test of the session.

    It runs on its own event loop: tests each get a fresh loop, the homeserver outlives them.
    """
    homeserver = EmbeddedHomeserver(tmp_path_factory.mktemp("synapse"), port=0)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(homeserver.start())
    try:
        yield homeserver
    finally:
        loop.run_until_complete(homeserver.stop())
        loop.close()


@pytest.fixture(scope="session")
def model_server() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


@pytest.fixture
def model(model_server: ScriptedModel) -> Iterator[ScriptedModel]:
    """The scripted model, emptied for this test."""
    model_server.clear()
    yield model_server
    model_server.clear()


@pytest.fixture(scope="session")
def credential_cache(tmp_path_factory: pytest.TempPathFactory) -> CredentialCache:
    return CredentialCache(tmp_path_factory.mktemp("creds") / "credentials.json")


@pytest_asyncio.fixture
async def bot(
    synapse: EmbeddedHomeserver, tmp_path: Path, credential_cache: CredentialCache
) -> AsyncIterator[BotHarness]:
    harness = BotHarness(synapse, tmp_path / "storage", credential_cache)
    yield harness
    await harness.stop()


@pytest.fixture
def bot_process(
    synapse: EmbeddedHomeserver, tmp_path: Path, credential_cache: CredentialCache
) -> Iterator[BotProcess]:
    process = BotProcess(synapse, tmp_path / "storage", credential_cache)
    yield process
    if process.proc is not None and process.proc.poll() is None:
        process.proc.kill()
        process.proc.wait()


@pytest_asyncio.fixture
async def human(synapse: EmbeddedHomeserver) -> AsyncIterator[Human]:
    person = await Human.create(synapse)
    yield person
    await person.close()
