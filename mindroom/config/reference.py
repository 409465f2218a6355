"""The configuration reference, generated from the schema: every key of ``config.yaml`` with its
type, default and description.

    python -m mindroom.config.reference > docs/reference/configuration.md

A key's description is its pydantic ``Field(description=...)``; a key that has none is described
by the comment written beside it in the schema (the lines just above it, or the rest of its
line), so the reference says what the source says. The older inline forms that still load with a
deprecation warning (``memory.llm.config`` and the like) are left out: the reference shows what
to write. A test regenerates this and compares it with the checked-in file.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import types
from collections.abc import Iterator
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from mindroom.config.models_schema import ModelConfig
from mindroom.config.schema import Config

COMMAND = "python -m mindroom.config.reference > docs/reference/configuration.md"

_INTRO = f"""\
# Configuration reference

Every key of `config.yaml`, generated from the schema (`{COMMAND}`; do not edit by hand).
Unknown keys are errors. `<name>` stands for a key you choose (an agent's, a room's, a
model's); a value written `${{VAR}}` or `${{VAR:-default}}` is read from the environment.

A model is defined once under `models:` and named by its key everywhere else: agents, teams,
the router, `memory.llm`, `memory.embedder` and `media.speech_to_text.model`. The older inline
forms of these (`memory.llm.config`, `memory.embedder.config`, a `media.speech_to_text` with its
own `base_url`) still load, with a warning that names the form to write.
"""


def _strip(annotation: Any) -> Any:
    """The annotation without ``Annotated`` wrappers."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _members(annotation: Any) -> list[Any]:
    annotation = _strip(annotation)
    if get_origin(annotation) in (Union, types.UnionType):
        return [m for a in get_args(annotation) for m in _members(a)]
    return [annotation]


def _is_ref_union(annotation: Any) -> bool:
    """A ``<model key> | <older inline form>`` field."""
    members = [m for m in _members(annotation) if m is not type(None)]
    return str in members and any(isinstance(m, type) and issubclass(m, BaseModel) for m in members)


def _type_name(annotation: Any) -> str:
    if _is_ref_union(annotation):
        optional = type(None) in _members(annotation)
        return "model key" + (" or null" if optional else "")
    annotation = _strip(annotation)
    origin = get_origin(annotation)
    if origin is Literal:
        return " or ".join(json.dumps(v) for v in get_args(annotation))
    if origin in (Union, types.UnionType):
        names = list(
            dict.fromkeys(_type_name(a) for a in get_args(annotation) if a is not type(None))
        )
        optional = type(None) in get_args(annotation)
        return " or ".join(names) + (" or null" if optional else "")
    if origin is list:
        return f"list of {_type_name(get_args(annotation)[0])}"
    if origin is tuple:
        return f"list of {_type_name(get_args(annotation)[0])}"
    if origin is dict:
        return f"map of {_type_name(get_args(annotation)[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return {str: "text", int: "integer", float: "number", bool: "true or false"}.get(
        annotation, str(annotation)
    )


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return ""
    if isinstance(value, dict) and value and isinstance(next(iter(value.values())), BaseModel):
        return ", ".join(value)  # e.g. the default maintenance jobs, by name
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return ", ".join(str(getattr(v, "name", v)) for v in value)
    return "`" + json.dumps(value, ensure_ascii=False) + "`" if value not in ({}, []) else "none"


_COMMENT = re.compile(r"^\s*#\s?(.*)$")


def _comments(cls: type[BaseModel]) -> dict[str, str]:
    """The comment the schema's source writes beside each field of ``cls``: the comment lines
    just above it, or the comment at the end of its line."""
    try:
        lines = inspect.getsource(cls).splitlines()
    except (OSError, TypeError):
        return {}
    found: dict[str, str] = {}
    above: list[str] = []
    for line in lines:
        comment = _COMMENT.match(line)
        if comment:
            above.append(comment.group(1).strip())
            continue
        field = re.match(r"^    ([a-z_][a-z0-9_]*)\s*:", line)
        if field and field.group(1) in cls.model_fields:
            trailing = line.split("  # ", 1)[1].strip() if "  # " in line else ""
            text = " ".join(above) or trailing
            if text:
                found[field.group(1)] = text
        above = []
    return found


def _description(cls: type[BaseModel], name: str, field: FieldInfo) -> str:
    text = field.description or _comments(cls).get(name, "")
    if not text and field.annotation is not None:
        section = _section(field.annotation)
        if section is not None and section.__doc__:
            text = inspect.cleandoc(section.__doc__).split("\n\n")[0]
    return " ".join(text.split())


def _section(annotation: Any) -> type[BaseModel] | None:
    """The model a key opens (itself, or the values of a map or list of them)."""
    if _is_ref_union(annotation):
        return None
    annotation = _strip(annotation)
    origin = get_origin(annotation)
    if origin in (dict, list):
        return _section(get_args(annotation)[-1])
    # a section written in a new and an older form (media.speech_to_text) shows the new one,
    # which the union lists first
    members = [m for m in _members(annotation) if m is not type(None)]
    if members and isinstance(members[0], type) and issubclass(members[0], BaseModel):
        return members[0]
    return None


def _rows(cls: type[BaseModel], prefix: str) -> Iterator[tuple[str, str, str, str]]:
    for name, field in cls.model_fields.items():
        key = f"{prefix}{name}"
        annotation = field.annotation
        yield key, _type_name(annotation), _default(field), _description(cls, name, field)
        section = _section(annotation)
        if section is None:
            continue
        origin = get_origin(_strip(annotation))
        inner = f"{key}.<name>" if origin is dict else f"{key}[]" if origin is list else key
        yield from _rows(section, f"{inner}.")


def _table(rows: list[tuple[str, str, str, str]]) -> list[str]:
    def cell(text: str) -> str:
        return text.replace("|", "\\|")

    out = ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for key, kind, default, text in rows:
        out.append(f"| `{key}` | {cell(kind)} | {cell(default)} | {cell(text)} |")
    return out


def render() -> str:
    """The whole reference, as Markdown."""
    out = [_INTRO]
    for name, field in Config.model_fields.items():
        out.append(f"## `{name}`\n")
        out.append(_description(Config, name, field) + "\n")
        if name == "models":
            for member in _members(ModelConfig):
                provider = member.model_fields["provider"]
                title = " or ".join(f"`{p}`" for p in get_args(_strip(provider.annotation)))
                out.append(f"### `models.<name>` with provider {title}\n")
                out.append(inspect.cleandoc(member.__doc__ or "") + "\n")
                out.extend(_table(list(_rows(member, "models.<name>."))))
                out.append("")
            continue
        section = _section(field.annotation)
        rows = list(_rows(section, f"{name}.")) if section is not None else []
        if section is not None and get_origin(_strip(field.annotation)) is dict:
            rows = list(_rows(section, f"{name}.<name>."))
        if not rows:
            rows = [(name, _type_name(field.annotation), _default(field), "")]
        out.extend(_table(rows))
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
