"""nio's checks of what the homeserver sends, compiled once instead of interpreted each time.

nio checks every response and event it parses against a JSON schema of its own
(``nio.schemas.Schemas``), filling in the defaults the schema names as it goes, and parses
nothing that fails. It does so with ``jsonschema``, which interprets the schema at every call:
about 0.45 ms for a small sync response and 0.1 ms for each event in it, a tenth of the bot's
CPU per reply, spent on every sync of every account.

:func:`install` gives nio a ``validate_json`` that runs each of nio's schemas as Python code
``fastjsonschema`` generated once (the same draft 4, the same defaults filled in, nio's two
formats): about 0.03 ms for the same sync response. A schema is compiled once it has been
used a few times (:data:`COMPILE_AFTER`), so a short-lived process pays nothing. A failure is
raised as jsonschema's ``ValidationError``, which is what nio catches. A schema that is not one
of nio's, or that ``fastjsonschema`` cannot compile, is checked by nio's own function, as
before.
"""

from __future__ import annotations

import copy
import importlib
import logging
import re
import sys
import threading
from collections.abc import Callable
from typing import Any

import fastjsonschema
import nio.schemas
from jsonschema.exceptions import ValidationError

logger = logging.getLogger(__name__)

__all__ = ["compiled", "install", "validate_json", "with_nested_defaults"]

# The modules that imported nio's validate_json by name, and so must be given the new one.
_USERS = ("nio.responses", "nio.events.misc", "nio.crypto.olm_machine")
_DRAFT_4 = "http://json-schema.org/draft-04/schema#"

# nio's format checks (``nio.schemas.Checker``), as predicates on strings
_FORMATS: dict[str, Callable[[Any], bool]] = {
    "user_id": lambda value: value.startswith("@") and ":" in value,
    "http_url": lambda value: re.match(r"^https?://.+", value) is not None,
}

_original = nio.schemas.validate_json
_compiled: dict[int, Callable[[Any], Any] | None] = {}
_uses: dict[int, int] = {}

COMPILE_AFTER = 20
"""Uses of a schema before it is compiled. Compiling costs 2-22 ms of CPU per schema, the
price of 20-50 checks, so a schema a process checks a few times (a short command, the start-up's
one-off requests) keeps nio's check, and one it checks often (syncs, room events) is compiled."""
_lock = threading.Lock()


def _nio_schemas() -> dict[int, dict[str, Any]]:
    """nio's own schemas by identity (every schema nio checks with is one of these)."""
    return {id(s): s for s in vars(nio.schemas.Schemas).values() if isinstance(s, dict)}


_SCHEMAS = _nio_schemas()


def validate_json(instance: object, schema: dict[str, Any]) -> None:
    """nio's ``validate_json``, compiled: fills in ``instance``'s defaults, and raises
    ``jsonschema.ValidationError`` when it does not match ``schema``."""
    key = id(schema)
    check = _compiled[key] if key in _compiled else _compile_when_used(schema)
    if check is None:
        _original(instance, schema)
        return
    try:
        check(instance)
    except fastjsonschema.JsonSchemaValueException as exc:
        raise ValidationError(exc.message) from None


def install() -> None:
    """Give nio the compiled ``validate_json`` (once; later calls do nothing)."""
    with _lock:
        if nio.schemas.validate_json is validate_json:
            return
        for name in _USERS:
            try:
                module = sys.modules.get(name) or importlib.import_module(name)
            except ImportError:  # nio without its encryption extra has no olm_machine
                continue
            if getattr(module, "validate_json", None) is _original:
                module.validate_json = validate_json  # type: ignore[attr-defined]
            else:
                logger.debug("%s does not use nio's validate_json; left as it is", name)
        nio.schemas.validate_json = validate_json  # type: ignore[assignment]


def _compile_when_used(schema: dict[str, Any]) -> Callable[[Any], Any] | None:
    """The compiled check of ``schema`` once it has been used :data:`COMPILE_AFTER` times
    (then kept); None (nio's own check) before that, and for a schema that is not nio's or
    does not compile. Only nio's are kept: they live as long as the process, so their
    identities stay theirs."""
    key = id(schema)
    if _SCHEMAS.get(key) is not schema:
        return None
    with _lock:
        _uses[key] = uses = _uses.get(key, 0) + 1
    if uses < COMPILE_AFTER:
        return None
    check = compiled(schema)
    with _lock:
        _compiled[id(schema)] = check
    return check


def compiled(schema: dict[str, Any]) -> Callable[[Any], Any] | None:
    """``schema`` compiled as nio checks it; None when fastjsonschema cannot compile it."""
    try:
        return fastjsonschema.compile(
            {"$schema": _DRAFT_4, **with_nested_defaults(schema)},
            formats=_FORMATS,
            use_default=True,
        )
    except fastjsonschema.JsonSchemaDefinitionException as exc:
        logger.debug("a nio schema is left to jsonschema: %s", exc)
        return None


# keywords whose value maps names to subschemas, and keywords whose value is data
_SCHEMA_MAPS = ("properties", "patternProperties", "definitions", "dependencies")
_DATA = ("default", "enum", "const", "examples")


def with_nested_defaults(schema: Any) -> Any:  # noqa: ANN401 (any part of a JSON schema)
    """A copy of ``schema`` whose object defaults hold the defaults inside them too.

    nio's check sets a missing property to its default and then checks that default against
    the property's schema, which fills in the defaults named there: ``rooms`` becomes
    ``{"invite": {}, "join": {}, "leave": {}}``, not ``{}``. (It sets the schema's own object,
    so nio's schemas fill up as they are used.) The compiled check sets a default as it is
    written, so the defaults are filled in here, once, bottom up.
    """
    if isinstance(schema, list):
        return [with_nested_defaults(part) for part in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: with_nested_defaults(sub) for name, sub in value.items()}
        elif key in _DATA:
            out[key] = copy.deepcopy(value)
        else:
            out[key] = with_nested_defaults(value)
    for sub in (out.get("properties") or {}).values():
        if isinstance(sub, dict) and "default" in sub:
            sub["default"] = _filled(sub["default"], sub)
    return out


def _filled(value: Any, schema: dict[str, Any]) -> Any:  # noqa: ANN401 (JSON data)
    """``value`` with the defaults ``schema`` names for it filled in, at every depth."""
    if not isinstance(value, dict):
        return value
    for name, sub in _subschemas(schema.get("properties")):
        if name in value:
            _filled(value[name], sub)
        elif "default" in sub:
            value[name] = copy.deepcopy(sub["default"])  # filled already: bottom up
    for pattern, sub in _subschemas(schema.get("patternProperties")):
        for name in [n for n in value if re.search(pattern, n)]:
            _filled(value[name], sub)
    return value


def _subschemas(mapping: object) -> list[tuple[str, dict[str, Any]]]:
    """The (name, subschema) pairs of a ``properties`` or ``patternProperties`` value."""
    if not isinstance(mapping, dict):
        return []
    return [(name, sub) for name, sub in mapping.items() if isinstance(sub, dict)]
