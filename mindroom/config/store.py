"""Edit ``config.yaml`` without losing anything: ruamel round-trip, validate, replace atomically.

Comments, key order, quoting and the indentation of untouched parts stay byte for byte: only
the lines of the changed value are rewritten. Every edit is validated as a whole file before it
replaces the old one (atomically), and the file is written only when its text changes, so an
edit that changes nothing does not wake the hot-reload watcher.
"""

from __future__ import annotations

import copy
import io
import re
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from mindroom.atomic import atomic_write
from mindroom.config.load import parse_config
from mindroom.config.schema import Config
from mindroom.errors import ConfigError


def _yaml() -> YAML:
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _guess_indent(text: str) -> tuple[int, int]:
    """(sequence, offset) as the file writes block sequences: '- ' under its key or indented."""
    for match in re.finditer(r"^( *)[\w-]+:\n( *)- ", text, re.MULTILINE):
        parent, dash = len(match.group(1)), len(match.group(2))
        return dash - parent + 2, dash - parent
    return 4, 2


def parse_value(raw: str) -> Any:
    """A CLI or chat value as YAML: ``true``, ``3``, ``[a, b]``, ``{k: v}`` or a string."""
    try:
        value = YAML(typ="safe").load(raw)
    except YAMLError:
        return raw
    return raw if value is None and raw.strip() not in ("null", "~") else value


class ConfigDocument:
    """One config file, loaded for round-trip editing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.original = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such file (mindroom config init writes one)") from None
        self.yaml = _yaml()
        sequence, offset = _guess_indent(self.original)
        self.yaml.indent(mapping=2, sequence=sequence, offset=offset)
        try:
            self.doc = self.yaml.load(self.original) or CommentedMap()
        except YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from None

    def _walk(self, key: str, create: bool) -> tuple[Any, str]:
        """The mapping that holds ``key``'s last part (the deepest existing one with
        ``create``), and the rest of the path from there."""
        parts = [p for p in key.split(".") if p]
        if not parts:
            raise ConfigError("empty key: use a dotted path like agents.general.role")
        node = self.doc
        for index, part in enumerate(parts[:-1]):
            if not isinstance(node, CommentedMap):
                raise ConfigError(f"{key}: {part!r} is inside a value that is not a mapping")
            if part not in node:
                if not create:
                    raise ConfigError(f"{key}: no such key in {self.path.name}")
                return node, ".".join(parts[index:])
            node = node[part]
        if not isinstance(node, CommentedMap):
            raise ConfigError(f"{key}: the parent is not a mapping")
        return node, parts[-1]

    def get(self, key: str) -> Any:
        """The value at dotted ``key`` (as in the file, before ``${VAR}`` expansion)."""
        parent, last = self._walk(key, create=False)
        if last not in parent:
            raise ConfigError(f"{key}: no such key in {self.path.name}")
        return parent[last]

    def set(self, key: str, value: Any) -> None:
        """Set dotted ``key`` (creating mappings on the way)."""
        parent, rest = self._walk(key, create=True)
        first, *deeper = rest.split(".")
        for part in reversed(deeper):  # build missing mappings whole, then add them once
            value = {part: value}
        if first in parent:
            parent[first] = _to_yaml(value)
        else:
            _append(parent, first, _to_yaml(value))

    def unset(self, key: str) -> None:
        """Remove dotted ``key`` (comments after the block stay where they were)."""
        parent, last = self._walk(key, create=False)
        if last not in parent:
            raise ConfigError(f"{key}: no such key in {self.path.name}")
        keys = list(parent.keys())
        token = _pop_trailing(parent) if keys[-1] == last and len(keys) > 1 else None
        del parent[last]
        if token is not None:
            _push_trailing(parent, keys[-2], token)

    def add_agent(
        self, name: str, *, role: str = "", model: str | None = None, rooms: list[str] = ()
    ) -> None:
        """Add agent ``name`` (refused when it exists)."""
        agents = self.doc.get("agents")
        if agents is None:
            _append(self.doc, "agents", CommentedMap())
            agents = self.doc["agents"]
        if name in agents:
            raise ConfigError(f"agents.{name}: an agent of that name exists already")
        entry = CommentedMap()
        entry["display_name"] = name.replace("_", " ").title()
        if role:
            entry["role"] = role
        if model:
            entry["model"] = model
        entry["rooms"] = _to_yaml(list(rooms))
        _append(agents, name, entry)

    def text(self) -> str:
        """The document as it would be written."""
        out = io.StringIO()
        self.yaml.dump(self.doc, out)
        return out.getvalue()

    def validate(self) -> Config:
        """Validate the edited document as a whole file (raises ConfigError)."""
        return parse_config(self.text(), str(self.path))

    def save(self) -> bool:
        """Validate, then replace the file atomically if the text changed; True when written."""
        text = self.text()
        parse_config(text, str(self.path))
        if text == self.original:
            return False
        atomic_write(self.path, text)
        self.original = text
        return True


def _pop_trailing(node: Any) -> Any:
    """Detach the comment and blank lines that follow the last item of ``node`` (ruamel keeps
    them on the deepest last item), so they can stay at the end of the block."""
    if isinstance(node, CommentedMap) and node:
        last = list(node.keys())[-1]
        found = _pop_trailing(node[last])
        if found is not None:
            return found
        entry = node.ca.items.get(last)
        if entry and len(entry) > 2 and entry[2] is not None:
            return _split_token(entry, 2)
    elif isinstance(node, CommentedSeq) and node:
        found = _pop_trailing(node[-1])
        if found is not None:
            return found
        entry = node.ca.items.get(len(node) - 1)
        if entry and entry[0] is not None:
            return _split_token(entry, 0)
    return None


def _split_token(entry: list[Any], index: int) -> Any:
    """Keep an end-of-line comment where it is; return what follows it (blank lines, comment
    lines) as a token of its own, or None when nothing follows."""
    token = entry[index]
    value = token.value
    if value.startswith("#"):  # an end-of-line comment: it belongs to its line
        head, newline, rest = value.partition("\n")
        if not rest:
            return None
        token.value = head + newline
        moved = copy.copy(token)
        moved.value = "\n" + rest  # ruamel's token starts with the end of the line it follows
        return moved
    entry[index] = None
    return token


def _push_trailing(parent: CommentedMap, key: Any, token: Any) -> None:
    """Attach ``token`` after the (deepest last item of the) value at ``parent[key]``."""
    node = parent[key]
    if isinstance(node, CommentedMap) and node:
        _push_trailing(node, list(node.keys())[-1], token)
    elif isinstance(node, CommentedSeq) and node and not node.fa.flow_style():
        _merge(node.ca.items.setdefault(len(node) - 1, [None, None, None, None]), 0, token)
    else:
        _merge(parent.ca.items.setdefault(key, [None, None, None, None]), 2, token)


def _merge(entry: list[Any], index: int, token: Any) -> None:
    """Put ``token`` after an end-of-line comment already in ``entry[index]``, if any."""
    existing = entry[index]
    if existing is not None and existing.value.startswith("#"):
        existing.value = existing.value.rstrip("\n") + token.value
    else:
        entry[index] = token


def _append(mapping: CommentedMap, key: str, value: Any) -> None:
    """Add ``key`` at the end of ``mapping``, keeping the block's trailing comments last."""
    token = _pop_trailing(mapping) if mapping and key not in mapping else None
    mapping[key] = value
    if token is not None:
        _push_trailing(mapping, key, token)


def _to_yaml(value: Any) -> Any:
    if isinstance(value, dict):
        node = CommentedMap()
        for k, v in value.items():
            node[k] = _to_yaml(v)
        return node
    if isinstance(value, list):
        seq = CommentedSeq(_to_yaml(v) for v in value)
        seq.fa.set_flow_style()
        return seq
    return value


def dump_value(value: Any) -> str:
    """A config value as YAML text, for showing it (scalars as they are)."""
    if isinstance(value, (dict, list)):
        out = io.StringIO()
        yaml = _yaml()
        yaml.dump(value, out)
        return out.getvalue().rstrip()
    return str(value)
