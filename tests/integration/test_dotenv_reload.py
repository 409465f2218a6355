"""The ``.env`` beside config.yaml in a running mindroom (a real process on a real homeserver):
a change of the file alone is applied (the shell's values still win, a removed one goes away),
and ``mindroom doctor`` says which values the running bot uses where they differ from the
files."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from mindroom.config.environment import ENVIRONMENT_FILE
from tests.support.harness import BotProcess, Human, config_text, unique
from tests.support.scripted_model import ScriptedModel, system_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.asyncio, pytest.mark.timeout(300)]

DEAD_URL = "http://127.0.0.1:9/v1"  # nothing listens


def _published(storage: Path) -> dict:
    path = storage / "mindroom_data" / ENVIRONMENT_FILE
    return json.loads(path.read_text())["variables"] if path.exists() else {}


def _doctor(storage: Path, homeserver: str) -> subprocess.CompletedProcess[str]:
    """``mindroom doctor`` as a person runs it: their shell (without the variable the bot's
    shell set) plus the .env."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MR_")}
    env["MATRIX_HOMESERVER"] = homeserver
    return subprocess.run(
        [sys.executable, "-m", "mindroom", "doctor", "--config", str(storage / "config.yaml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=storage,
    )


async def test_a_changed_dotenv_is_applied_and_the_doctor_names_what_the_bot_uses(
    bot_process: BotProcess,
    human: Human,
    model: ScriptedModel,
    synapse: EmbeddedHomeserver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    storage = bot_process.storage
    storage.mkdir(parents=True)
    room = unique("dotenv")
    agents = {"general": {"rooms": [room], "role": "Role: ${MR_EXTRA:-nothing extra}."}}
    config = config_text("${MR_MODEL_URL}", agents)
    config = config.replace('"id": "scripted"', '"id": "${MR_MODEL_ID}"')
    config = config.replace('"api_key": "test"', '"api_key": "${MR_API_KEY}"')
    (storage / "config.yaml").write_text(config)
    dotenv = storage / ".env"
    dotenv.write_text(
        f"MR_MODEL_URL={DEAD_URL}\nMR_MODEL_ID=from-the-file\n"
        "MR_API_KEY=sk-first-secret-value\nMR_EXTRA=soon gone\n"
    )
    monkeypatch.setenv("MR_MODEL_ID", "from-the-shell")  # the bot's shell: wins over .env
    bot_process.start()
    await bot_process.wait_running()
    room_id = await human.join(f"#{room}:{synapse.server_name}")

    # The .env at start: the model is the file's dead URL
    asked = await human.send(room_id, "hello")
    notice = (await human.wait_for_reply(room_id, asked, timeout=60))["content"]["body"]
    assert f"is the model server at {DEAD_URL} running?" in notice
    published = _published(storage)
    assert published["MR_MODEL_URL"] == {"origin": ".env", "value": DEAD_URL}
    assert published["MR_MODEL_ID"] == {"origin": "shell", "value": "from-the-shell"}
    assert published["MR_API_KEY"]["value"].startswith("sha256:")
    assert "sk-first-secret-value" not in (storage / "mindroom_data" / ENVIRONMENT_FILE).read_text()

    # The doctor, run from a shell without MR_MODEL_ID, reads the file's value: it says so
    done = await asyncio.to_thread(_doctor, storage, synapse.url)
    assert "running bot" in done.stdout, done.stdout + done.stderr
    assert (
        "MR_MODEL_ID=from-the-shell (from the shell that started it) "
        "(config/.env now say from-the-file)"
    ) in done.stdout
    assert "restart it" in done.stdout
    assert "MR_MODEL_URL=" not in done.stdout  # the control: what agrees is not listed
    assert "sk-first-secret-value" not in done.stdout

    # Only .env changes: the running bot takes it (no edit of config.yaml)
    dotenv.write_text(
        f"MR_MODEL_URL={model.base_url}\nMR_MODEL_ID=also-from-the-file\n"
        "MR_API_KEY=sk-second-secret-value\n"
    )
    await wait_until(
        lambda: _published(storage).get("MR_MODEL_URL", {}).get("value") == model.base_url,
        "the bot to publish the new MR_MODEL_URL",
    )
    model.push("answered through the new URL")
    again = await human.send(room_id, "hello again")
    reply = await human.wait_for_reply(room_id, again, timeout=60)
    assert reply["content"]["body"] == "answered through the new URL"
    request = model.requests[-1]
    assert request["model"] == "from-the-shell"  # the shell's value never changes
    assert "Role: nothing extra." in system_text(request)  # removed from .env: gone
    assert "soon gone" not in system_text(request)
    await bot_process.stop()
