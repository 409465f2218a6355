"""Configuration: the schema of config.yaml and how it is read."""

from mindroom.config.load import load_config, parse_config
from mindroom.config.schema import AgentConfig, Config, ModelConfig

__all__ = ["AgentConfig", "Config", "ModelConfig", "load_config", "parse_config"]
