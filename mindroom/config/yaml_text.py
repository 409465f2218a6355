"""Where the parts of a YAML text are, and how to write a new part in the file's own style.

Round-trip editing here is text splicing: ruamel composes the text into nodes that carry their
exact start and end offsets, an edit replaces or removes only the characters of the value or
entry it changes, and new entries are rendered by ruamel with the indentation the file already
uses and then inserted. Everything else (comments, blank lines, quoting, line endings, a BOM, a
``---`` marker, indentation, long lines) is never re-emitted, so it cannot change.

This module only locates and renders; :mod:`mindroom.config.store` decides what to edit.
"""

from __future__ import annotations

import io
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

# ruamel wraps long scalars at ``width``; a value the file keeps on one line must stay on one.
NO_WRAP = 1_000_000_000


@dataclass(frozen=True)
class Style:
    """How a file indents: mapping children, sequence items and the dash of a sequence."""

    mapping: int = 2
    sequence: int = 4
    offset: int = 2
    newline: str = "\n"


def detect_style(text: str, root: Node | None) -> Style:
    """The indentation and line ending ``text`` mostly uses (defaults where it has none)."""
    crlf = text.count("\r\n")
    newline = "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"
    mappings: Counter[int] = Counter()
    sequences: Counter[tuple[int, int]] = Counter()

    def visit(node: Node | None) -> None:
        if isinstance(node, MappingNode):
            for key, value in node.value:
                nested = is_block(value) and value.value
                if nested and isinstance(value, MappingNode):
                    step = value.value[0][0].start_mark.column - key.start_mark.column
                    if step > 0:
                        mappings[step] += 1
                elif nested and isinstance(value, SequenceNode):
                    dash = value.start_mark.column - key.start_mark.column
                    item = value.value[0].start_mark.column - key.start_mark.column
                    if dash >= 0 and item >= dash + 2:
                        sequences[(item, dash)] += 1
                visit(value)
        elif isinstance(node, SequenceNode):
            for item in node.value:
                visit(item)

    visit(root)
    mapping = mappings.most_common(1)[0][0] if mappings else 2
    sequence, offset = sequences.most_common(1)[0][0] if sequences else (mapping + 2, mapping)
    return Style(mapping=mapping, sequence=sequence, offset=offset, newline=newline)


def compose(text: str) -> Node | None:
    """The node tree of ``text`` with exact offsets (raises ruamel's YAMLError)."""
    return YAML(typ="rt").compose(text)


def is_block(node: Node) -> bool:
    """A block (indented) mapping or sequence, as opposed to a scalar or a flow collection."""
    return isinstance(node, (MappingNode, SequenceNode)) and not node.flow_style


def is_empty_null(node: Node) -> bool:
    """``key:`` with nothing after it (its marks point at whatever follows, not at itself)."""
    return isinstance(node, ScalarNode) and node.value == "" and not node.style


def entry(mapping: MappingNode, key: str) -> tuple[Node, Node] | None:
    """The (key node, value node) of ``key`` in ``mapping``, or None."""
    for key_node, value_node in mapping.value:
        if isinstance(key_node, ScalarNode) and key_node.value == key:
            return key_node, value_node
    return None


def after_colon(text: str, key: Node) -> int:
    """The offset just after the ``:`` that follows ``key``."""
    index = key.end_mark.index
    while index < len(text) and text[index] in " \t":
        index += 1
    return index + 1 if text.startswith(":", index) else index


def content_end(text: str, node: Node) -> int:
    """Where the last character of ``node``'s own text is (comments and blank lines after a
    block are not part of it; an end-of-line comment after the last value is not either)."""
    if isinstance(node, MappingNode) and not node.flow_style and node.value:
        key, value = node.value[-1]
        return entry_end(text, key, value)
    if isinstance(node, SequenceNode) and not node.flow_style and node.value:
        return content_end(text, node.value[-1])
    end = node.end_mark.index
    while end > node.start_mark.index and text[end - 1] in " \t\r\n":
        end -= 1  # a block scalar's marks run over the blank lines after it
    return end


def entry_end(text: str, key: Node, value: Node) -> int:
    """Where the text of the entry ``key: value`` ends."""
    return after_colon(text, key) if is_empty_null(value) else content_end(text, value)


def line_start(text: str, index: int) -> int:
    """The offset of the first character of the line holding ``index``."""
    return text.rfind("\n", 0, index) + 1


def line_end(text: str, index: int) -> int:
    """The offset just after the line break of the line holding ``index`` (or the end)."""
    found = text.find("\n", index)
    return len(text) if found < 0 else found + 1


def to_yaml(value: Any) -> Any:
    """Plain data as ruamel nodes in mindroom's style: mappings as blocks, lists in flow."""
    if isinstance(value, dict):
        node = CommentedMap()
        for key, item in value.items():
            node[key] = to_yaml(item)
        return node
    if isinstance(value, list):
        seq = CommentedSeq(to_yaml(item) for item in value)
        seq.fa.set_flow_style()
        return seq
    return value


def render_entry(key: str, value: Any, column: int, style: Style) -> str:
    """``key: value`` as lines starting at ``column``, in ``style``, with the file's line ending.

    The first line carries no leading indentation (the caller places it); every line ends with
    a line break.
    """
    yaml = YAML(typ="rt")
    yaml.width = NO_WRAP
    yaml.indent(mapping=style.mapping, sequence=style.sequence, offset=style.offset)
    out = io.StringIO()
    yaml.dump({key: to_yaml(value)}, out)
    lines = out.getvalue().splitlines()
    pad = " " * column
    shifted = [lines[0]] + [pad + line if line else line for line in lines[1:]]
    return "".join(line + style.newline for line in shifted)


def render_inline(value: Any) -> str:
    """``value`` as flow-style text on one line (for a value inside ``{...}`` or ``[...]``)."""
    yaml = YAML(typ="rt")
    yaml.width = NO_WRAP
    yaml.default_flow_style = True
    out = io.StringIO()
    yaml.dump(CommentedMap([("k", to_yaml(value))]), out)
    return out.getvalue().strip()[len("{k: ") : -len("}")]
