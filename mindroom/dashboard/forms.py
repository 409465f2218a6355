"""Forms over ``config.yaml`` keys: render the values as the file has them, save a change.

A form is a list of :class:`Field` under a base key (``agents.general``, ``memory``). It shows
each value as written in the file (a ``${VAR}`` stays a reference; a secret shows as
``[redacted]`` and is kept when submitted unchanged) and an empty input for a key the file
leaves out (its default or inherited value, shown as the placeholder). Saving goes through
the same round-trip config store as ``mindroom config set`` (:mod:`mindroom.config.store`):
under the config lock, only the changed keys' text is rewritten, the file is validated as a
whole, and the bot's watcher hot-reloads it. The page carries the digest of the file it was
rendered from; when the file changed on disk since (a person saved it in an editor, another
tab saved), nothing is written and the page says so.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from mindroom.config.store import ConfigDocument, edit_config, parse_value
from mindroom.errors import ConfigError
from mindroom.redact import REDACTED, is_env_reference, is_secret_key, redact_text

Kind = Literal["text", "lines", "list", "choice", "flag", "number"]
BASE_FIELD = "base"
_UNSET = object()


class StaleForm(ConfigError):
    """The file changed since the page was rendered: nothing was written."""


@dataclass(frozen=True)
class Field:
    """One input: ``key`` below the form's base key."""

    key: str
    label: str
    kind: Kind = "text"
    choices: tuple[str, ...] = ()
    hint: str = ""  # the default or inherited value, shown when the file leaves the key out
    # the mapping holding this key may be written as this key's value alone (``embedder: none``
    # for ``embedder: {provider: none}``): shown as such, turned into a mapping when edited
    shorthand: bool = False


def _stored(doc: ConfigDocument, key: str, shorthand: bool = False) -> Any:
    try:
        return doc.get(key)
    except ConfigError:
        if shorthand and "." in key:
            parent = _stored(doc, key.rsplit(".", 1)[0])
            if isinstance(parent, str):
                return parent
        return _UNSET


def _unfold_shorthands(
    doc: ConfigDocument, base: str, fields: Sequence[Field], form: Mapping[str, Any]
) -> None:
    """Write ``key: value`` shorthands whose keys the form changes as mappings first."""
    for field in fields:
        full = f"{base}.{field.key}" if base else field.key
        parent = full.rsplit(".", 1)[0]
        value = _stored(doc, parent) if field.shorthand and "." in full else None
        if not isinstance(value, str):
            continue
        under = [
            f for f in fields if (f"{base}.{f.key}" if base else f.key).startswith(parent + ".")
        ]
        if any(
            str(form.get(f.key, "")).strip() != (value if f is field else "")
            for f in under
            if f.key in form
        ):
            doc.set(parent, {full.rsplit(".", 1)[1]: value})


def shown(field: Field, value: Any, full_key: str) -> str:
    """The input's text for a value as stored (empty when unset)."""
    if value is _UNSET or value is None:
        return ""
    if is_secret_key(full_key):  # only a whole ${VAR} reference is shown: it names no secret
        text = str(value).strip()
        return text if is_env_reference(text) else REDACTED
    if isinstance(value, str):
        return redact_text(value)  # a password inside a URL, a key pasted into a base_url
    if field.kind in ("list",) and isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if field.kind == "lines" and isinstance(value, list):
        return "\n".join(str(v) for v in value)
    if field.kind == "flag":
        return "true" if value is True else "false" if value is False else str(value)
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


def parsed(field: Field, raw: str) -> Any:
    """The value an input's text stands for; None leaves the key out of the file (ValueError
    for text that is not of the field's kind)."""
    text = raw.replace("\r\n", "\n")
    if field.kind == "lines":
        return [line.strip() for line in text.split("\n") if line.strip()] or None
    text = text.strip()
    if not text:
        return None
    if field.kind == "list":
        return [part.strip() for part in text.split(",") if part.strip()]
    if field.kind == "flag":
        return text == "true"
    if field.kind == "number":
        value = parse_value(text)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{text!r} is not a number")
        return value
    return text


@dataclass(frozen=True)
class FieldRow:
    """One input as a form shows it (the template ``macros.html`` draws it)."""

    name: str  # the field's key below the base: the input's name
    label: str
    full: str  # the whole config key, shown under the input
    value: str
    hint: str
    options: tuple[str, ...] | None  # a select's choices (None: a text input or textarea)
    lines: bool  # a textarea
    error: str


def field_rows(
    doc: ConfigDocument,
    base: str,
    fields: Sequence[Field],
    errors: Mapping[str, str],
    submitted: Mapping[str, str] | None = None,
) -> list[FieldRow]:
    """The inputs of a form, each with its error (from the last save) beside it."""
    rows = []
    for field in fields:
        full = f"{base}.{field.key}" if base else field.key
        value = (
            submitted[field.key]
            if submitted is not None and field.key in submitted
            else shown(field, _stored(doc, full, field.shorthand), full)
        )
        options: tuple[str, ...] | None = None
        if field.kind in ("choice", "flag"):
            options = ("true", "false") if field.kind == "flag" else field.choices
        rows.append(
            FieldRow(
                name=field.key,
                label=field.label,
                full=full,
                value=value,
                hint=field.hint,
                options=options,
                lines=field.kind == "lines",
                error=errors.get(field.key, ""),
            )
        )
    return rows


def field_errors(message: str, base: str, fields: Sequence[Field]) -> dict[str, str]:
    """Which field a validation error belongs to (by its key path); "" for the whole form."""
    for field in sorted(fields, key=lambda f: -len(f.key)):
        full = f"{base}.{field.key}" if base else field.key
        if full in message:
            return {field.key: message}
    return {"": message}


def check_fresh(doc: ConfigDocument, form: Mapping[str, Any]) -> None:
    """StaleForm unless the file still holds the bytes the page was rendered from."""
    if str(form.get(BASE_FIELD, "")) != doc.digest:
        raise StaleForm(
            f"{doc.path.name} changed on disk since this page was loaded; nothing was saved. "
            "Reload the page to see the file as it is now."
        )


def save_fields(path: Path, base: str, fields: Sequence[Field], form: Mapping[str, Any]) -> bool:
    """Write the submitted values of ``fields`` (only those that changed); True when the file
    changed. ConfigError (naming the key) when a value is invalid, :class:`StaleForm` when the
    file changed since the page was rendered."""
    with edit_config(path) as doc:
        check_fresh(doc, form)
        _unfold_shorthands(doc, base, fields, form)
        for field in fields:
            if field.key not in form:
                continue
            full = f"{base}.{field.key}" if base else field.key
            raw = str(form[field.key])
            before = _stored(doc, full, field.shorthand)
            if raw.replace("\r\n", "\n") == shown(field, before, full):
                continue  # as shown (a redacted secret among them): it stays as it is
            try:
                value = parsed(field, raw)
            except ValueError as exc:
                raise ConfigError(f"{full}: {exc}") from None
            if value is None:
                if before is not _UNSET:
                    doc.unset(full)
            elif before is _UNSET or before != value:
                doc.set(full, value)
        return doc.save()
