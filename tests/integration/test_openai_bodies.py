"""A real Agno turn sends the same request body with the openai SDK's walk skipped as with it.

Agno drives the openai SDK through the model mindroom builds (``build_model``) against the
scripted model server; the turn runs twice, once as installed (the walk skipped) and once with
the skip turned off, and the server must have received the same bodies.
"""

from __future__ import annotations

from typing import Any

import pytest
from agno.agent import Agent
from agno.db.in_memory import InMemoryDb
from openai._utils import _transform

from mindroom.adapters import openai_bodies
from mindroom.adapters.agno.models import build_model
from mindroom.config.models_schema import OpenAIModel
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall

pytestmark = pytest.mark.asyncio


def remember(topic: str, limit: int = 3) -> str:
    """Look up what is remembered about a topic.

    Args:
        topic: what to look up
        limit: how many notes at most
    """
    return f"{limit} notes on {topic}: likes tea"


async def two_turns(model: ScriptedModel) -> list[dict[str, Any]]:
    """A turn that calls a tool, then one with that turn as history; the bodies sent."""
    model.clear()
    model.push(Reply(tool_calls=[ToolCall("remember", {"topic": "drinks"}, id="call_a")]))
    model.push("You like tea.")
    model.push("Still tea.")
    served = OpenAIModel(provider="openai", id="scripted", base_url=model.base_url, api_key="k")
    agent = Agent(
        model=build_model("default", served),
        tools=[remember],
        instructions=["Answer briefly."],
        db=InMemoryDb(),  # fresh: each run starts the same session from nothing
        add_history_to_context=True,
        telemetry=False,
    )
    for text in ("What do I like to drink?", "And now?"):
        async for _ in agent.arun(text, session_id="s", stream=True):
            pass
    return model.requests


async def test_a_turn_sends_the_same_bodies_with_and_without_the_walk(
    model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    walked: list[object] = []
    walk = _transform._async_transform_recursive

    async def counting(data: object, **kwargs: Any) -> object:  # noqa: ANN401
        if not walked or walked[-1] is not data:
            walked.append(data)
        return await walk(data, **kwargs)

    monkeypatch.setattr(_transform, "_async_transform_recursive", counting)

    skipped = await two_turns(model)
    assert len(skipped) == 3  # the tool call, its answer, the second turn with history
    assert walked == []  # the SDK walked none of them

    # the control: with the skip off, the SDK walks each body, and sends the same
    monkeypatch.setattr(openai_bodies, "plain_body", lambda data, expected: None)
    walked_bodies = await two_turns(model)
    assert len(walked) >= 3
    assert walked_bodies == skipped
    assert [m["role"] for m in skipped[-1]["messages"]] == [  # the first turn as history
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert skipped[0]["tools"][0]["function"]["name"] == "remember"
