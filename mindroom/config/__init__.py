"""Configuration: the schema of config.yaml and how it is read.

The names below are imported on first use (the schema's models take a third of a second of
CPU to build), so that importing a submodule such as :mod:`mindroom.config.environment` costs
only that submodule: ``mindroom run --local`` launches its homeserver before it reads the
config.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mindroom.config.load import load_config, parse_config
    from mindroom.config.schema import AgentConfig, Config, ModelConfig

__all__ = ["AgentConfig", "Config", "ModelConfig", "load_config", "parse_config"]

_HOMES = {
    "AgentConfig": "mindroom.config.schema",
    "Config": "mindroom.config.schema",
    "ModelConfig": "mindroom.config.schema",
    "load_config": "mindroom.config.load",
    "parse_config": "mindroom.config.load",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value
