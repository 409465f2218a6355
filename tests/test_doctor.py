"""``mindroom doctor`` against a real homeserver and the scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindroom.agents.probe import model_fix
from mindroom.config import load_config
from mindroom.doctor import render, run_doctor
from tests.harness import config_text
from tests.scripted_model import Reply, ScriptedModel


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_doctor_reports_working_parts_and_explains_broken_ones(
    tmp_path: Path, model: ScriptedModel, synapse, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "config.yaml"
    text = config_text(model.base_url, {"general": {"rooms": ["r"]}})
    config.write_text(
        text.replace(
            '"models": {',
            '"models": {"down": {"id": "x", "base_url": '
            '"http://127.0.0.1:9/v1", "max_retries": 0},',
            1,
        )
    )
    model.push(Reply(text="pong"))
    monkeypatch.setenv("MATRIX_REGISTRATION_SHARED_SECRET", synapse.shared_secret)

    checks = {c.name: c for c in await run_doctor(config, tmp_path, synapse.url)}

    assert checks["config"].ok
    assert checks["homeserver"].ok
    assert checks["registration"].ok
    assert checks["model default"].ok
    assert not checks["model down"].ok
    assert "base_url" in checks["model down"].fix
    # the same words as the start-up warning and the error notice in the room
    assert checks["model down"].fix == model_fix("down", load_config(config).models["down"])
    assert checks["storage"].ok
    table = render(list(checks.values()))
    assert "FAIL model down" in table
    assert model.requests[0]["max_tokens"] == 1


@pytest.mark.asyncio
async def test_doctor_names_a_broken_config_and_an_unreachable_homeserver(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("agents:\n  general:\n    modle: x\n")
    checks = {c.name: c for c in await run_doctor(config, tmp_path, "http://127.0.0.1:9")}
    assert not checks["config"].ok
    assert "unknown key" in checks["config"].detail
    assert not checks["homeserver"].ok
    assert "mindroom run --local" in checks["homeserver"].fix
