"""Edit ``config.yaml`` without losing anything: splice the text, validate, replace atomically.

An edit rewrites only the characters of the value or entry it changes (see
:mod:`mindroom.config.yaml_text`): comments, blank lines, quoting, indentation, line endings
(CRLF stays CRLF), a byte-order mark, a ``---`` marker and long lines elsewhere stay byte for
byte. Every edit is validated as a whole file before it replaces the old one (atomically), and
the file is written only when its text changes, so an edit that changes nothing does not wake
the hot-reload watcher.

Two writers, one file: a document remembers the exact bytes it was loaded from. Saving takes
the config lock (``flock`` on ``.config.yaml.lock`` beside the file) and refuses, naming the
file, when the file no longer holds those bytes: a change made meanwhile (by a person's editor,
which takes no lock) is never overwritten. :func:`edit_config` holds the lock from load to save,
so mindroom's own writers (``mindroom config set``, ``!config set``) never refuse each other:
they take turns.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, Node
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

from mindroom.atomic import acquire_lock, release_lock
from mindroom.config import yaml_text as yt
from mindroom.config.load import parse_config
from mindroom.config.schema import Config
from mindroom.errors import ConfigError

LOCK_TIMEOUT_SECONDS = 30.0
_QUOTED = {"'": SingleQuotedScalarString, '"': DoubleQuotedScalarString}
_BOM = "\ufeff"


def parse_value(raw: str) -> Any:
    """A CLI or chat value as YAML: ``true``, ``3``, ``[a, b]``, ``{k: v}`` or a string."""
    try:
        value = YAML(typ="safe").load(raw)
    except YAMLError:
        return raw
    return raw if value is None and raw.strip() not in ("null", "~") else value


def lock_path(path: Path) -> Path:
    """The lock file of the config at ``path`` (beside the real file, hidden)."""
    real = Path(os.path.realpath(path))
    return real.with_name(f".{real.name}.lock")


@contextmanager
def config_lock(path: Path, timeout: float = LOCK_TIMEOUT_SECONDS) -> Iterator[None]:
    """Hold the config's write lock; waits up to ``timeout`` seconds for another writer."""
    where = lock_path(path)
    try:
        fd = acquire_lock(where, timeout, mode=0o644)
    except TimeoutError:
        raise ConfigError(
            f"{path}: another edit has held {where.name} for {timeout:.0f} s; "
            "nothing was written, try again"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot create the lock file {where}: {exc.strerror}") from None
    try:
        yield
    finally:
        release_lock(fd)


@contextmanager
def edit_config(path: Path) -> Iterator[ConfigDocument]:
    """Load ``path`` under the config lock and keep it until the block ends: edit and
    ``save()`` inside the block, and no other mindroom writer can come between."""
    with config_lock(path):
        doc = ConfigDocument(path)
        doc._lock_held = True
        try:
            yield doc
        finally:
            doc._lock_held = False


class _EmptyValue(Exception):
    """The walk of a dotted key met ``key:`` with no value (``value``) at part ``index``."""

    def __init__(self, key: Node, value: Node, index: int, flow: bool) -> None:
        super().__init__(index)
        self.key, self.value, self.index, self.flow = key, value, index, flow


class _Walk(NamedTuple):
    """Where a dotted key leads: the deepest mapping reached (None in an empty file), the key
    node that holds it (None at the top), whether that key is itself inside ``{...}``, and how
    many parts of the key exist."""

    parts: list[str]
    mapping: MappingNode | None
    owner: Node | None
    owner_in_flow: bool
    found: int


def _digest(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


class ConfigDocument:
    """One config file, loaded for round-trip editing."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_held = False
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such file (mindroom config init writes one)") from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        self._seen = _digest(raw)
        try:
            self.original = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8"
            ) from None
        self._bom = _BOM if self.original.startswith(_BOM) else ""
        self._body = self.original[len(self._bom) :]
        self._parse()
        self._style = yt.detect_style(self._body, self._root)

    def _parse(self) -> None:
        try:
            self._root: Node | None = yt.compose(self._body)
            self.doc = YAML(typ="rt").load(self._body) or CommentedMap()
        except YAMLError as exc:
            raise ConfigError(f"{self.path}: not valid YAML: {exc}") from None

    def _splice(self, start: int, end: int, new: str) -> None:
        self._body = self._body[:start] + new + self._body[end:]
        self._parse()

    def _find(self, key: str) -> _Walk:
        """Walk dotted ``key`` through the mappings of the file."""
        parts = [p for p in key.split(".") if p]
        if not parts:
            raise ConfigError("empty key: use a dotted path like agents.general.role")
        if self._root is None:
            return _Walk(parts, None, None, False, 0)
        node, owner, owner_in_flow = self._root, None, False
        for index, part in enumerate(parts):
            if index and yt.is_empty_null(node):  # "key:" with no value yet: fill it in
                raise _EmptyValue(owner, node, index, owner_in_flow)  # type: ignore[arg-type]
            if not isinstance(node, MappingNode):
                where = repr(parts[index - 1]) if index else "the top level"
                raise ConfigError(f"{key}: {where} is a value that is not a mapping")
            found = yt.entry(node, part)
            if found is None or index == len(parts) - 1:
                return _Walk(parts, node, owner, owner_in_flow, index + (found is not None))
            owner_in_flow = bool(node.flow_style)
            owner, node = found
            if node.start_mark.index < owner.end_mark.index:  # an alias (*name) of an earlier node
                raise ConfigError(f"{key}: {part!r} is an alias; edit the anchored value")
        raise AssertionError("unreachable")

    def get(self, key: str) -> Any:
        """The value at dotted ``key`` (as in the file, before ``${VAR}`` expansion)."""
        node: Any = self.doc
        for part in [p for p in key.split(".") if p] or [""]:
            if not isinstance(node, dict) or part not in node:
                raise ConfigError(f"{key}: no such key in {self.path.name}")
            node = node[part]
        return node

    def set(self, key: str, value: Any) -> None:
        """Set dotted ``key`` (creating mappings on the way)."""
        try:
            walk = self._find(key)
        except _EmptyValue as empty:
            for part in reversed([p for p in key.split(".") if p][empty.index :]):
                value = {part: value}
            self._replace(empty.key, empty.value, value, flow=empty.flow)
            return
        parts, mapping, found = walk.parts, walk.mapping, walk.found
        if mapping is not None and found == len(parts):
            if self.get(key) == value:  # the same value: leave its text (and quoting) alone
                return
            key_node, value_node = yt.entry(mapping, parts[-1])  # type: ignore[misc]
            quote = getattr(value_node, "style", None)
            if isinstance(value, str) and quote in _QUOTED:
                value = _QUOTED[quote](value)  # keep the file's quoting of this value
            self._replace(key_node, value_node, value, flow=bool(mapping.flow_style))
            return
        for part in reversed(parts[found + 1 :]):  # missing mappings are built whole
            value = {part: value}
        if mapping is None:
            self._add_to_top(parts[0], value)
        else:
            self._add(walk, parts[found], value)

    def unset(self, key: str) -> None:
        """Remove dotted ``key``; comments and blank lines around it stay."""
        try:
            parts, mapping, owner, owner_in_flow, found = self._find(key)
        except _EmptyValue:
            mapping = None
        if mapping is None or found < len(parts):
            raise ConfigError(f"{key}: no such key in {self.path.name}")
        text = self._body
        position = [k.value for k, _ in mapping.value].index(parts[-1])
        key_node, value_node = mapping.value[position]
        start, end = key_node.start_mark.index, yt.entry_end(text, key_node, value_node)
        if len(mapping.value) == 1 and owner is not None:
            self._replace(owner, mapping, {}, flow=owner_in_flow)
        elif mapping.flow_style and len(mapping.value) == 1:
            self._splice(mapping.start_mark.index, mapping.end_mark.index, "{}")
        elif mapping.flow_style and position + 1 < len(mapping.value):
            self._splice(start, mapping.value[position + 1][0].start_mark.index, "")
        elif mapping.flow_style:  # the last pair: from the end of the one before it
            before = mapping.value[position - 1]
            self._splice(yt.entry_end(text, *before), end, "")
        elif text[yt.line_start(text, start) : start].strip():
            # something shares the key's line (a "--- " or a tag): deleting lines would take it too
            raise ConfigError(f"{key}: shares its line with other text; remove it in an editor")
        else:
            self._splice(yt.line_start(text, start), yt.line_end(text, end), "")

    def add_agent(
        self, name: str, *, role: str = "", model: str | None = None, rooms: Sequence[str] = ()
    ) -> None:
        """Add agent ``name`` (refused when it exists)."""
        agents = self.doc.get("agents")
        if isinstance(agents, dict) and name in agents:
            raise ConfigError(f"agents.{name}: an agent of that name exists already")
        entry: dict[str, Any] = {"display_name": name.replace("_", " ").title()}
        if role:
            entry["role"] = role
        if model:
            entry["model"] = model
        entry["rooms"] = list(rooms)
        self.set(f"agents.{name}", entry)

    def _replace(self, key: Node, old: Node, value: Any, *, flow: bool) -> None:
        """Put ``value`` in place of the value node ``old`` of ``key`` (``flow``: inside
        ``{...}``, where only flow-style text is valid)."""
        text, style = self._body, self._style
        colon, end = yt.after_colon(text, key), yt.entry_end(text, key, old)
        if flow:
            inline = yt.render_inline(value)
            if yt.is_empty_null(old):
                self._splice(colon, colon, " " + inline)
            else:
                self._splice(old.start_mark.index, end, inline)
            return
        rendered = yt.render_entry("k", value, key.start_mark.column, style)[len("k:") :]
        rendered = rendered[: -len(style.newline)]
        block = rendered.startswith(style.newline)  # a non-empty mapping: lines of its own
        lines = rendered[len(style.newline) :] + style.newline
        if yt.is_block(old):
            comment = text[colon : yt.line_end(text, colon)].rstrip("\r\n")
            if block:  # keep the key line (and its comment); the new lines replace the old
                self._splice(yt.line_end(text, colon), yt.line_end(text, end), lines)
            else:
                self._splice(colon, end, rendered + (comment if comment.strip() else ""))
        elif block:  # a scalar becomes a mapping: new lines after the key's line
            self._splice(colon, end, "")
            at = yt.line_end(self._body, colon)
            self._splice(at, at, lines)
        elif yt.is_empty_null(old):
            self._splice(colon, colon, rendered)
        else:
            self._splice(old.start_mark.index, end, rendered.lstrip(" "))

    def _add(self, walk: _Walk, key: str, value: Any) -> None:
        """Add ``key: value`` at the end of the mapping ``walk`` reached."""
        text, style, mapping = self._body, self._style, walk.mapping
        assert mapping is not None
        if mapping.flow_style and not mapping.value and walk.owner and not walk.owner_in_flow:
            self._replace(walk.owner, mapping, {key: value}, flow=False)  # "{}" becomes a block
        elif mapping.flow_style and not mapping.value:
            start, end = mapping.start_mark.index, mapping.end_mark.index
            self._splice(start, end, yt.render_inline({key: value}))
        elif mapping.flow_style:
            at = yt.entry_end(text, *mapping.value[-1])
            self._splice(at, at, ", " + yt.render_inline({key: value})[1:-1])
        else:
            column = mapping.value[0][0].start_mark.column
            at = yt.line_end(text, yt.entry_end(text, *mapping.value[-1]))
            lead = "" if at == 0 or text[at - 1] == "\n" else style.newline
            line = " " * column + yt.render_entry(key, value, column, style)
            self._splice(at, at, lead + line)

    def _add_to_top(self, key: str, value: Any) -> None:
        """Add ``key: value`` to a file with no mapping yet (empty, or comments only)."""
        text = self._body
        lead = "" if not text or text.endswith("\n") else self._style.newline
        self._splice(len(text), len(text), lead + yt.render_entry(key, value, 0, self._style))

    @property
    def digest(self) -> str:
        """The SHA-256 (hex) of the bytes this document was loaded from (or last saved)."""
        return self._seen.hex()

    def text(self) -> str:
        """The document as it would be written."""
        return self._bom + self._body

    def validate(self) -> Config:
        """Validate the edited document as a whole file (raises ConfigError)."""
        return parse_config(self._body, str(self.path))

    def save(self) -> bool:
        """Validate, then replace the file atomically if the text changed; True when written.

        Refused (ConfigError, nothing written) when the file no longer holds the bytes this
        document was loaded from.
        """
        text = self.text()
        self.validate()
        if text == self.original:
            return False
        data = text.encode("utf-8")
        with nullcontext() if self._lock_held else config_lock(self.path):
            try:
                current = self.path.read_bytes()
            except FileNotFoundError:
                current = None
            if current is None or _digest(current) != self._seen:
                raise ConfigError(
                    f"{self.path}: changed since it was read; run the command again "
                    "(nothing was written)"
                )
            # imported here: the CLI's other config commands never load the memory protocol
            from mindroom.memory.files.protocol import replace_if_unchanged

            if not replace_if_unchanged(Path(os.path.realpath(self.path)), self._seen.hex(), data):
                raise ConfigError(  # a save landed while this one was being put in place
                    f"{self.path}: changed while it was being saved; run the command again "
                    "(nothing was written)"
                )
        self._seen = _digest(data)
        self.original = text
        return True


def dump_value(value: Any) -> str:
    """A config value as YAML text, for showing it (scalars as they are)."""
    if isinstance(value, (dict, list)):
        out = io.StringIO()
        yaml = YAML(typ="rt")
        yaml.width = yt.NO_WRAP
        yaml.indent(mapping=2, sequence=4, offset=2)
        yaml.dump(value, out)
        return out.getvalue().rstrip()
    return str(value)
