"""Read ``config.yaml``: parse, expand ``${VAR}``, validate, and explain failures.

Every failure is a :class:`~mindroom.errors.ConfigError` whose message names the file, the key
path (with the line when known) and the problem, e.g.::

    config.yaml: agents.general.modle (line 12): unknown key

A key written in an older form that still loads is logged as a warning on the
``mindroom.config`` logger, with the file and the form to write instead, e.g.::

    config.yaml: memory.llm with its own provider and config is deprecated: add the model
    under models: (provider: ollama, id: llama3.2) and write memory.llm: <key>

Writing the file back (round-trip editing) is deliberately not here.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from mindroom.config.environment import load_dotenv_beside
from mindroom.config.models_schema import is_union_tag
from mindroom.config.schema import DEPRECATIONS, Config
from mindroom.errors import ConfigError

__all__ = ["expand_env", "load_config", "load_dotenv_beside", "parse_config"]

logger = logging.getLogger("mindroom.config")

_ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand_env(value: str, env: Mapping[str, str], where: str) -> str:
    """Replace ``${VAR}`` and ``${VAR:-default}`` in ``value`` from ``env``.

    ``${VAR:-default}`` uses the default when VAR is unset or empty; a bare ``${VAR}`` that is
    unset is an error naming ``where``.
    """

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        found = env.get(name)
        if found:
            return found
        if default is not None:
            return default
        if found is not None:
            return found
        raise ConfigError(
            f"{where}: environment variable {name} is not set "
            f"(set it, or write ${{{name}:-default}})"
        )

    return _ENV_RE.sub(replace, value)


def _expand_tree(node: Any, env: Mapping[str, str], path: str, where: str) -> Any:
    if isinstance(node, str):
        return expand_env(node, env, f"{where}: {path}")
    if isinstance(node, Mapping):
        return {
            key: _expand_tree(value, env, f"{path}.{key}" if path else str(key), where)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_expand_tree(v, env, f"{path}[{i}]", where) for i, v in enumerate(node)]
    return node


def _line_of(doc: Any, loc: tuple[int | str, ...]) -> int | None:
    """Best-effort 1-based line of a key path in the round-trip document."""
    node, line = doc, None
    for part in loc:
        if isinstance(node, CommentedMap) and part in node:
            line = node.lc.key(part)[0] + 1
            node = node[part]
        elif isinstance(node, CommentedSeq) and isinstance(part, int) and part < len(node):
            line = node.lc.item(part)[0] + 1
            node = node[part]
        else:
            break
    return line


def _explain(error: ValidationError, doc: Any, where: str) -> str:
    lines = []
    for item in error.errors():
        loc = tuple(
            p
            for p in item["loc"]
            if not (isinstance(p, str) and p.startswith("function-")) and not is_union_tag(p)
        )
        if item["type"] == "unknown_provider":  # found by the models' discriminator
            loc = (*loc, "provider")
        path = ".".join(str(p) for p in loc)
        line = _line_of(doc, loc)
        at = f" (line {line})" if line else ""
        if not path:  # a cross-reference check: its message names the key itself
            lines.append(f"{where}: {item['msg'].removeprefix('Value error, ')}")
            continue
        message = item["msg"]
        if item["type"] == "extra_forbidden":
            message = "unknown key"
        message = message.removeprefix("Value error, ")
        lines.append(f"{where}: {path}{at}: {message}")
    return "\n".join(lines)


def parse_config(text: str, where: str, env: Mapping[str, str] | None = None) -> Config:
    """Validate the YAML ``text`` of a config; ``where`` names its source in errors."""
    try:
        doc = YAML(typ="rt").load(text)
    except YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML: {exc}") from exc
    if doc is None:
        doc = CommentedMap()
    if not isinstance(doc, Mapping):
        raise ConfigError(f"{where}: the top level must be a mapping of sections")
    data = _expand_tree(doc, os.environ if env is None else env, "", where)
    deprecations: list[str] = []
    try:
        config = Config.model_validate(data, context={DEPRECATIONS: deprecations})
    except ValidationError as exc:
        raise ConfigError(_explain(exc, doc, where)) from None
    for message in deprecations:
        logger.warning("%s: %s", where, message)
    return config


def load_config(path: Path, env: Mapping[str, str] | None = None) -> Config:
    """Read and validate the config file at ``path``."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file (create one, or pass --config PATH)") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") from None
    return parse_config(text, str(path), env)
