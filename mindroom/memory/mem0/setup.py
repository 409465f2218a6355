"""What the mem0 backend runs with, and ``mindroom doctor``'s lines about it.

Besides ``memory.backend: mem0`` (or an agent's ``memory_backend: mem0``) mem0 needs three
things: the optional extra ``mindroom[mem0]`` (mem0ai and Chroma), a language model for its
extraction and an embedder. The model is ``memory.llm``, else the config's default model
(``defaults.model``): one model setting is enough, and mindroom never quietly sends memories to
an ollama server nobody configured. The embedder is the agent's
memory search embedder (``agents.<name>.memory_embedder``, else ``memory.embedder``); mem0 has
no keyword-only mode, so "none" is a failure here where file memory would fall back to keywords.

:func:`memory_llm` resolves the model into plain data (for the engine and the doctor);
:func:`check_mem0` checks all three without importing mem0 or sending anything (the default
model and the embedders have their own doctor lines that do contact them). Nothing is installed
here: ``mindroom[mem0]`` is named as a command.
"""

from __future__ import annotations

import importlib.metadata
import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from mindroom.adapters.embeddings.install import install_command, installed
from mindroom.adapters.embeddings.select import build_embedder, effective_embedder
from mindroom.checks import Check
from mindroom.config.schema import Config, EmbedderConfig
from mindroom.errors import ConfigError
from mindroom.redact import redact_text

# pyproject's ``mem0`` extra (tests/integration/test_doctor_mem0.py keeps them in step)
MEM0_REQUIREMENTS = ("mem0ai>=2.2.1,<2.3", "chromadb>=1.5,<2")
_MODULES = {"mem0": "mem0ai", "chromadb": "chromadb"}  # module: its distribution
OLLAMA_HOST = "http://localhost:11434"
_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def importable(module: str) -> bool:
    """Whether ``module`` of the mem0 extra is there (without importing it)."""
    return installed(module)


def mem0_install_command() -> str:
    """The command that installs ``mindroom[mem0]`` into this interpreter."""
    return shlex.join([sys.executable, "-m", "pip", "install", *MEM0_REQUIREMENTS])


@dataclass(frozen=True)
class MemoryLlm:
    """The model mem0 extracts memories with, and which config key chose it."""

    provider: Literal["openai", "anthropic", "ollama"]
    model: str | None  # None: mem0's own default for the provider
    base_url: str | None  # ollama: its host; openai: None means OPENAI_BASE_URL or api.openai.com
    api_key: str | None
    temperature: float | None
    timeout_seconds: float
    source: str

    def describe(self) -> str:
        """A line for people: provider, model, server and whether a key is set (never the key)."""
        model = self.model or "mem0's default model"
        where = f" at {redact_text(self.base_url)}" if self.base_url else ""
        env = _KEY_ENV.get(self.provider)
        if self.api_key:
            key = ", api key [redacted]"
        elif env and os.environ.get(env):
            key = f", api key from {env}"
        else:
            key = ", no api key" if env else ""
        return f"{self.provider}: {model}{where}{key} ({self.source})"


def memory_llm(config: Config) -> MemoryLlm:
    """The model mem0 uses: ``memory.llm``, else the default model. Raises :class:`ConfigError`
    when neither names one."""
    llm = config.memory_llm
    if llm is not None:
        settings = llm.config
        host = settings.host or OLLAMA_HOST
        return MemoryLlm(
            provider=llm.provider,
            model=settings.model,
            base_url=host if llm.provider == "ollama" else settings.base_url,
            api_key=settings.api_key,
            temperature=settings.temperature,
            timeout_seconds=settings.timeout_seconds,
            source="memory.llm",
        )
    name = config.defaults.model
    if name not in config.models:
        raise ConfigError(
            f"memory.llm is unset and defaults.model {name!r} is not a configured model"
        )
    model = config.chat_model(name)
    return MemoryLlm(
        provider=model.provider,
        model=model.id,
        base_url=model.base_url,
        api_key=model.api_key,
        temperature=model.temperature,
        timeout_seconds=model.timeout_seconds,
        source=f"memory.llm unset: defaults.model {name!r}",
    )


def mem0_users(config: Config) -> list[str]:
    """The config keys of what uses mem0: agents, and teams when ``memory.backend`` is mem0."""
    users = [f"agents.{n}" for n in config.agents if config.agent_memory_backend(n) == "mem0"]
    if config.memory.backend == "mem0" and config.teams:
        users.append("teams")
    return users


def check_mem0(
    config: Config, base_dir: Path, embedders: Mapping[EmbedderConfig | None, Check]
) -> list[Check]:
    """The doctor's mem0 lines (none when nothing uses mem0). ``embedders`` are the memory
    search lines by embedder config, so an embedder is contacted once per doctor run."""
    users = mem0_users(config)
    if not users:
        return []
    return [_check_extra(users), _check_llm(config), *_check_embedders(config, base_dir, embedders)]


def _check_extra(users: list[str]) -> Check:
    missing = [module for module in _MODULES if not importable(module)]
    who = ", ".join(users)
    if missing:
        detail = f"{who} use memory backend mem0, but mindroom[mem0] is not installed "
        return Check("mem0", False, detail + f"({', '.join(missing)})", mem0_install_command())
    versions = ", ".join(f"{d} {importlib.metadata.version(d)}" for d in _MODULES.values())
    return Check("mem0", True, f"mindroom[mem0] is installed ({versions}); used by {who}")


def _check_llm(config: Config) -> Check:
    try:
        llm = memory_llm(config)
    except ConfigError as exc:
        fix = "set memory.llm (provider and config.model), or define the default model"
        return Check("mem0 model", False, str(exc), fix)
    contacted = (
        "not contacted by the doctor"
        if config.memory.llm is not None
        else f"checked above as model {config.defaults.model}"
    )
    return Check("mem0 model", True, f"mem0 extracts memories with {llm.describe()}; {contacted}")


def _embedder_uses(config: Config) -> dict[EmbedderConfig | None, list[str]]:
    """Each embedder config mem0 scopes search with, and the keys that name it."""
    uses: dict[EmbedderConfig | None, list[str]] = {}
    for name in config.agents:
        if config.agent_memory_backend(name) == "mem0":
            own = config.agents[name].memory_embedder
            key = f"agents.{name}.memory_embedder" if own is not None else "memory.embedder"
            uses.setdefault(config.agent_embedder(name), []).append(key)
    if config.memory.backend == "mem0" and config.teams:
        uses.setdefault(config.memory_embedder, []).append("memory.embedder")
    return {c: sorted(set(keys)) for c, keys in uses.items()}


def _check_embedders(
    config: Config, base_dir: Path, embedders: Mapping[EmbedderConfig | None, Check]
) -> list[Check]:
    uses = _embedder_uses(config)
    checks = []
    for embedder, keys in uses.items():
        shared = keys == ["memory.embedder"]
        name = "mem0 embedder" if shared else f"mem0 embedder ({', '.join(keys)})"
        effective = effective_embedder(embedder)
        if effective is None:
            if embedder is None:
                why = "memory.embedder is unset and mindroom[embeddings] is not installed"
                fix = f"install it: {install_command()}, or set memory.embedder"
            else:
                why, fix = f"{keys[0]} is none", f"set {keys[0]} to an embedder"
            checks.append(Check(name, False, f"mem0 needs an embedder; {why}", fix))
            continue
        model_id = build_embedder(effective, base_dir).model_id
        searched = embedders.get(embedder)
        if searched is not None and not searched.ok:
            detail = f"mem0 needs a working embedder: {searched.detail}"
            checks.append(Check(name, False, detail, searched.fix))
        elif searched is not None and searched.warning:
            detail = f"mem0: {searched.detail}"
            checks.append(Check(name, True, detail, searched.fix, warning=True))
        else:
            checks.append(Check(name, True, f"mem0 embeds with {model_id} ({', '.join(keys)})"))
    return checks
