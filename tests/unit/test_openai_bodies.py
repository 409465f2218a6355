"""Chat-completion bodies skip the openai SDK's walk only where the walk changes nothing.

Each body is compared with what the SDK's own walk (``openai._utils.maybe_transform``, which
:func:`mindroom.adapters.openai_bodies.install` leaves in place) makes of it.
"""

from __future__ import annotations

import copy
from typing import Annotated, Any, Required, TypedDict

import pytest
from openai import NOT_GIVEN, omit
from openai._utils import async_maybe_transform, maybe_transform
from openai._utils._transform import PropertyInfo
from openai.resources.chat.completions import completions as completions_module
from openai.types.chat import completion_create_params as params

from mindroom.adapters import openai_bodies

STREAMING = params.CompletionCreateParamsStreaming
WHOLE = params.CompletionCreateParamsNonStreaming


def agno_like_body() -> dict[str, Any]:
    """A body as a turn with history, tools and an image sends it, with the SDK's unset
    arguments at its top as ``create`` passes them."""
    return {
        "model": "m",
        "stream": True,
        "messages": [
            {"role": "system", "content": "You are general.\n<memory>likes tea</memory>"},
            {"role": "user", "content": "what do I like?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "search_memory", "arguments": '{"query": "likes"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "likes tea"},
            {"role": "assistant", "content": "You like tea."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "and this?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                ],
            },
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "search_memory",
                    "description": "Search what you remember.",
                    "parameters": {
                        "type": "object",
                        "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}},
                        "required": ["query"],
                        "additionalProperties": False,
                    },
                },
            }
        ],
        "tool_choice": "auto",
        "stream_options": {"include_usage": True},
        "temperature": 0.2,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "x", "schema": {"type": "object"}, "strict": True},
        },
        "user": None,
        "audio": NOT_GIVEN,
        "seed": omit,
        "top_p": omit,
    }


def test_a_plain_body_is_sent_as_the_sdk_walk_would_send_it() -> None:
    for expected in (STREAMING, WHOLE, params.CompletionCreateParams):
        body = agno_like_body()
        walked = maybe_transform(copy.deepcopy(body), expected)

        skipped = openai_bodies.plain_body(body, expected)

        assert skipped is not None  # the walk is skipped for this body
        assert skipped == walked
        assert "audio" not in skipped  # unset arguments are dropped
        assert "seed" not in skipped
        assert skipped["user"] is None  # None is sent, as the walk sends it


@pytest.mark.asyncio
async def test_the_installed_create_skips_the_walk_only_for_plain_chat_bodies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    walks: list[object] = []

    async def counting(data: object, expected_type: object) -> object:
        walks.append(expected_type)
        return await async_maybe_transform(data, expected_type)

    def counting_sync(data: object, expected_type: object) -> object:
        walks.append(expected_type)
        return maybe_transform(data, expected_type)

    monkeypatch.setattr(completions_module, "async_maybe_transform", counting)
    monkeypatch.setattr(completions_module, "maybe_transform", counting_sync)
    openai_bodies.install()
    installed = completions_module.async_maybe_transform
    assert installed is not counting
    openai_bodies.install()  # once is enough: a second install wraps nothing again
    assert completions_module.async_maybe_transform is installed

    plain = await installed(agno_like_body(), STREAMING)
    assert walks == []
    assert plain == await async_maybe_transform(agno_like_body(), STREAMING)

    # the control: a body the walk may change (a tuple becomes a list) is walked
    odd = {**agno_like_body(), "stop": ("END", "STOP")}
    walked = await installed(odd, STREAMING)
    assert walks == [STREAMING]
    assert walked["stop"] == ["END", "STOP"]

    # another endpoint's parameters are walked
    completions_module.maybe_transform({"metadata": {"a": "b"}}, object)
    assert walks == [STREAMING, object]


class _Aliased(TypedDict, total=False):
    card_id: Required[Annotated[str, PropertyInfo(alias="cardID")]]


class _Dated(TypedDict, total=False):
    when: Annotated[str, PropertyInfo(format="iso8601")]


class _Outer(TypedDict, total=False):
    cards: list[_Aliased]
    note: str


class _Plain(TypedDict, total=False):
    items: list[dict[str, object]]
    choice: str | None


def test_types_with_an_alias_or_a_format_anywhere_keep_the_walk() -> None:
    assert openai_bodies.has_transforms(_Aliased)
    assert openai_bodies.has_transforms(_Dated)
    assert openai_bodies.has_transforms(_Outer)  # nested in a list of TypedDicts
    assert openai_bodies.has_transforms(_Aliased | None)  # in a union
    assert not openai_bodies.has_transforms(_Plain)
    # the installed SDK's chat parameters have neither: their plain bodies skip the walk
    assert not openai_bodies.has_transforms(STREAMING)
    assert not openai_bodies.has_transforms(WHOLE)


def test_bodies_that_are_not_plain_json_or_not_chat_bodies_are_walked() -> None:
    class Model:  # any object the walk would have to convert
        pass

    for odd in ({"messages": (1, 2)}, {"messages": [Model()]}, {1: "x"}, {"m": {2: "x"}}):
        assert openai_bodies.plain_body(odd, STREAMING) is None
    assert openai_bodies.plain_body([{"role": "user"}], STREAMING) is None  # not a dict
    assert openai_bodies.plain_body({"model": "m"}, _Plain) is None  # not a chat body
    assert openai_bodies.plain_body({"model": "m", "n": 1.5, "x": True}, STREAMING) == {
        "model": "m",
        "n": 1.5,
        "x": True,
    }
