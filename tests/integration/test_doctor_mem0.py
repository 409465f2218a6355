"""``mindroom doctor`` for agents on the mem0 backend: the extra, the model, the embedder."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from mindroom.adapters.embeddings import install
from mindroom.adapters.embeddings.local import BUNDLED_ID
from mindroom.adapters.embeddings.probe import embedder_checks
from mindroom.checks import Check
from mindroom.cli.doctor import render, run_doctor
from mindroom.config.schema import Config
from mindroom.memory.mem0 import setup as mem0_setup
from mindroom.memory.mem0.setup import MEM0_REQUIREMENTS, check_mem0, memory_llm
from tests.support.harness import config_text
from tests.support.scripted_model import Reply, ScriptedModel
from tests.unit.test_config import parse

ROOT = Path(__file__).resolve().parents[2]
KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"

MEM0 = f"""\
models:
  default: {{id: small-model, base_url: "http://models.local:8000/v1", api_key: "{KEY}"}}
agents:
  general:
    rooms: [lobby]
    memory_backend: mem0
  coder:
    rooms: [lobby]
"""


async def mem0_lines(config: Config, base_dir: Path) -> dict[str, Check]:
    checks = check_mem0(config, base_dir, await embedder_checks(config, base_dir))
    return {c.name: c for c in checks}


def test_the_requirements_are_the_mem0_extra() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert list(MEM0_REQUIREMENTS) == extras["mem0"]


@pytest.mark.asyncio
async def test_no_mem0_lines_when_no_agent_uses_mem0(tmp_path: Path) -> None:
    assert await mem0_lines(parse(MEM0.replace("memory_backend: mem0", "")), tmp_path) == {}
    # the control: the same config with the override has them
    assert "mem0" in await mem0_lines(parse(MEM0), tmp_path)


@pytest.mark.asyncio
async def test_the_extra_the_default_model_and_the_embedder_of_a_mem0_agent(
    tmp_path: Path, local_embedder: object
) -> None:
    lines = await mem0_lines(parse(MEM0), tmp_path)

    assert list(lines) == ["mem0", "mem0 model", "mem0 embedder"]
    assert lines["mem0"].ok
    assert "mindroom[mem0] is installed (mem0ai 2.2" in lines["mem0"].detail
    assert "agents.general" in lines["mem0"].detail
    assert "coder" not in lines["mem0"].detail
    model = lines["mem0 model"]
    assert model.ok, model
    assert "openai: small-model at http://models.local:8000/v1" in model.detail
    assert "memory.llm unset: defaults.model 'default'" in model.detail
    assert model.detail.endswith("; checked above as model default")
    assert KEY not in model.detail
    assert "api key [redacted]" in model.detail
    assert lines["mem0 embedder"].ok, lines["mem0 embedder"]
    assert lines["mem0 embedder"].detail == f"mem0 embeds with {BUNDLED_ID} (memory.embedder)"


@pytest.mark.asyncio
async def test_a_missing_extra_fails_with_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mem0_setup, "importable", lambda module: module != "mem0")
    line = (await mem0_lines(parse(MEM0), tmp_path))["mem0"]

    assert not line.ok
    assert "mindroom[mem0] is not installed (mem0)" in line.detail
    assert line.fix == f"{sys.executable} -m pip install 'mem0ai>=2.2.1,<2.3' 'chromadb>=1.5,<2'"


@pytest.mark.asyncio
async def test_memory_llm_is_named_with_its_server_and_no_secret(tmp_path: Path) -> None:
    ollama = MEM0 + (
        "memory:\n  llm:\n    provider: ollama\n"
        "    config: {model: llama3.2, host: 'http://gpu-box:11434'}\n"
    )
    line = (await mem0_lines(parse(ollama), tmp_path))["mem0 model"]
    assert line.ok
    assert line.detail == (
        "mem0 extracts memories with ollama: llama3.2 at http://gpu-box:11434 (memory.llm); "
        "not contacted by the doctor"
    )

    openai = MEM0 + (
        "memory:\n  llm:\n    provider: openai\n    config:\n"
        "      model: gpt-4o-mini\n      base_url: 'https://bob:hunter2@llm.example.org/v1'\n"
        f"      api_key: {KEY}\n"
    )
    line = (await mem0_lines(parse(openai), tmp_path))["mem0 model"]
    assert "openai: gpt-4o-mini at https://bob:[redacted]@llm.example.org/v1" in line.detail
    assert "hunter2" not in line.detail
    assert KEY not in line.detail


def test_the_default_ollama_host_and_the_environments_key(monkeypatch: pytest.MonkeyPatch) -> None:
    llm = memory_llm(parse(MEM0 + "memory:\n  llm: {provider: ollama, config: {model: m}}\n"))
    assert (llm.provider, llm.model, llm.base_url) == ("ollama", "m", "http://localhost:11434")
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    llm = memory_llm(parse(MEM0 + "memory:\n  llm: openai\n"))
    assert (llm.provider, llm.model, llm.base_url) == ("openai", None, None)
    assert "api key from OPENAI_API_KEY" in llm.describe()
    assert "mem0's default model" in llm.describe()


@pytest.mark.asyncio
async def test_no_default_model_for_mem0_fails(tmp_path: Path) -> None:
    config = parse(
        "models:\n  big: {id: x}\ndefaults: {model: missing}\n"
        "agents:\n  general: {model: big, memory_backend: mem0}\n"
    )
    line = (await mem0_lines(config, tmp_path))["mem0 model"]
    assert not line.ok
    assert "defaults.model 'missing' is not a configured model" in line.detail
    assert "memory.llm" in line.fix


@pytest.mark.asyncio
async def test_mem0_without_an_embedder_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    off = parse(MEM0 + "memory:\n  embedder: none\n")
    line = (await mem0_lines(off, tmp_path))["mem0 embedder"]
    assert not line.ok
    assert "mem0 needs an embedder; memory.embedder is none" in line.detail

    # unset, and the extra that makes the default is not installed: nothing installs it
    monkeypatch.setattr(install, "importable", lambda module: False)
    line = (await mem0_lines(parse(MEM0), tmp_path))["mem0 embedder"]
    assert not line.ok
    assert "memory.embedder is unset and mindroom[embeddings] is not installed" in line.detail
    assert "install torch==2.13.0 &&" in line.fix


@pytest.mark.asyncio
async def test_an_embedder_that_cannot_work_fails_for_mem0_too(tmp_path: Path) -> None:
    broken = MEM0.replace(
        "memory_backend: mem0",
        "memory_backend: mem0\n    memory_embedder: {provider: sentence_transformers,"
        " config: {model: ./gone}}",
    )
    line = (await mem0_lines(parse(broken), tmp_path))[
        "mem0 embedder (agents.general.memory_embedder)"
    ]
    assert not line.ok
    assert "mem0 needs a working embedder: no sentence-transformers model folder at" in (
        line.detail
    )


@pytest.mark.asyncio
async def test_the_doctor_table_has_the_mem0_lines(tmp_path: Path, model: ScriptedModel) -> None:
    config = tmp_path / "config.yaml"
    agents = {"general": {"rooms": ["lobby"], "memory_backend": "mem0"}}
    config.write_text(config_text(model.base_url, agents, memory={"embedder": "none"}))
    model.push(Reply(text="pong"))

    table = render(await run_doctor(config, tmp_path, "http://127.0.0.1:9"))

    assert "\nok   mem0 " in table
    assert "mem0 extracts memories with openai: " in table
    assert "\nFAIL mem0 embedder " in table
