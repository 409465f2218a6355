"""Chat-completion requests sent as built, without the ``openai`` SDK's walk of every body.

Before each request the SDK walks the body against its parameter types
(``maybe_transform``), to rename aliased keys and format dates and files. It walks each value
once per member of its union type, so a request with twenty earlier messages costs about
10 ms of CPU here, more than the rest of the request (the walk is a known upstream cost). The
chat-completion parameter types have no alias and no format: for them the walk only drops
the arguments left unset and returns an equal body.

:func:`install` makes ``chat.completions.create`` skip the walk when both hold:

- the installed SDK's chat-completion parameter types have no alias or format anywhere (walked
  once per type, at the first request; a future SDK that adds one gets its walk back);
- the body is plain JSON data (dicts with string keys, lists, strings, numbers, booleans,
  None) apart from the unset arguments at its top.

Otherwise, and for every other endpoint, the SDK's own walk runs. The body sent is the same
either way (``tests/unit/test_openai_bodies.py`` compares them). It is installed where mindroom
makes chat requests through the SDK: Agno's models and mem0's extraction model.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Annotated, Any, get_args, get_origin, get_type_hints

logger = logging.getLogger(__name__)

__all__ = ["install", "plain_body"]

_MARK = "_mindroom_plain_bodies"
_SCALARS = (str, int, float, bool, type(None))


def install() -> None:
    """Skip the SDK's walk of plain chat-completion bodies from now on, in this process (once;
    later calls do nothing). Never raises: an SDK it does not recognise keeps its walk."""
    try:
        from openai.resources.chat.completions import completions as module
    except ImportError:  # pragma: no cover - openai is a dependency
        return
    walk, async_walk = (
        getattr(module, "maybe_transform", None),
        getattr(module, "async_maybe_transform", None),
    )
    if walk is None or async_walk is None:
        logger.debug("openai's completions module has no maybe_transform: bodies are walked")
        return
    if getattr(walk, _MARK, False):
        return
    setattr(module, "maybe_transform", _skipping(walk))  # noqa: B010 (the SDK's own name)
    setattr(module, "async_maybe_transform", _skipping_async(async_walk))  # noqa: B010


def plain_body(data: object, expected_type: object) -> dict[str, Any] | None:
    """``data`` as the SDK's walk would send it, when that walk can be skipped: its top-level
    unset arguments dropped. None when the walk must run."""
    if not isinstance(data, dict) or not _identity(expected_type):
        return None
    from openai import NotGiven, Omit

    body = {k: v for k, v in data.items() if not isinstance(v, NotGiven | Omit)}
    return body if _plain(body) else None


def _skipping(walk: Callable[[object, object], Any]) -> Callable[[object, object], Any]:
    @functools.wraps(walk)
    def maybe_transform(data: object, expected_type: object) -> Any:  # noqa: ANN401
        body = plain_body(data, expected_type)
        return walk(data, expected_type) if body is None else body

    setattr(maybe_transform, _MARK, True)
    return maybe_transform


def _skipping_async(walk: Callable[[object, object], Any]) -> Callable[[object, object], Any]:
    @functools.wraps(walk)
    async def async_maybe_transform(data: object, expected_type: object) -> Any:  # noqa: ANN401
        body = plain_body(data, expected_type)
        return await walk(data, expected_type) if body is None else body

    setattr(async_maybe_transform, _MARK, True)
    return async_maybe_transform


def _plain(value: object) -> bool:
    """True for JSON data made only of dicts (string keys), lists and scalars."""
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())  # type: ignore[attr-defined]
    if kind is list:
        return all(_plain(v) for v in value)  # type: ignore[attr-defined]
    return kind in _SCALARS


@functools.cache
def _identity(expected_type: object) -> bool:
    """True when the SDK's walk leaves a plain body of ``expected_type`` as it is: one of the
    chat-completion parameter types, with no alias or format anywhere in it."""
    try:
        from openai.types.chat import completion_create_params as params

        chat = {
            params.CompletionCreateParams,
            params.CompletionCreateParamsStreaming,
            params.CompletionCreateParamsNonStreaming,
        }
        if expected_type not in chat:
            return False
        return not has_transforms(expected_type)
    except Exception:  # an SDK shaped otherwise: keep its walk
        logger.debug("cannot inspect %r: its bodies are walked", expected_type, exc_info=True)
        return False


def has_transforms(annotation: object, seen: set[int] | None = None) -> bool:
    """True when the SDK's walk would change some value of ``annotation``: an alias or a
    format (``PropertyInfo``) anywhere in it, through TypedDicts, unions and containers."""
    from openai._utils._transform import PropertyInfo  # the SDK's own marker
    from typing_extensions import is_typeddict

    seen = set() if seen is None else seen
    if id(annotation) in seen or isinstance(annotation, str | int | float | bool | None):
        return False
    seen.add(id(annotation))
    if get_origin(annotation) is Annotated:
        for meta in getattr(annotation, "__metadata__", ()):
            if isinstance(meta, PropertyInfo) and (meta.alias or meta.format):
                return True
        return has_transforms(get_args(annotation)[0], seen)
    if is_typeddict(annotation):
        hints = get_type_hints(annotation, include_extras=True)
        return any(has_transforms(hint, seen) for hint in hints.values())
    return any(has_transforms(arg, seen) for arg in get_args(annotation))
