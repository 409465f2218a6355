"""Tests for the scripted OpenAI-compatible server, driven by the real openai and Agno clients."""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

os.environ["AGNO_TELEMETRY"] = "false"

import openai
import pytest
from agno.agent import Agent, RunEvent
from agno.models.openai import OpenAIChat
from agno.run.base import RunStatus

try:
    from tests.support.scripted_model import (
        Reply,
        ScriptedModel,
        ToolCall,
        all_text,
        last_user_text,
        system_text,
    )
except ImportError:  # tests/ is on sys.path instead of the project root
    from scripted_model import (  # type: ignore[no-redef]
        Reply,
        ScriptedModel,
        ToolCall,
        all_text,
        last_user_text,
        system_text,
    )

pytestmark = pytest.mark.timeout(10)


@pytest.fixture(scope="module")
def _module_server() -> Iterator[ScriptedModel]:
    with ScriptedModel() as server:
        yield server


@pytest.fixture
def server(_module_server: ScriptedModel) -> ScriptedModel:
    _module_server.clear()
    return _module_server


@pytest.fixture
def client(server: ScriptedModel) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0) as c:
        yield c


def _http(
    server: ScriptedModel, method: str, path: str, data: bytes | None = None
) -> tuple[int, Any]:
    url = f"http://127.0.0.1:{server.port}{path}"
    req = urllib.request.Request(url, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _agent(server: ScriptedModel, **kwargs: Any) -> Agent:
    model = OpenAIChat(id="scripted", base_url=server.base_url, api_key="test", max_retries=0)
    return Agent(model=model, telemetry=False, **kwargs)


# --------------------------------------------------------------------------------------
# openai SDK
# --------------------------------------------------------------------------------------


def test_openai_plain_text(server: ScriptedModel, client: openai.OpenAI) -> None:
    server.push("Hello there!")
    resp = client.chat.completions.create(
        model="m1",
        messages=[
            {"role": "system", "content": "be nice"},
            {"role": "user", "content": "hi"},
        ],
    )
    assert resp.object == "chat.completion"
    assert resp.model == "m1"
    assert resp.choices[0].message.role == "assistant"
    assert resp.choices[0].message.content == "Hello there!"
    assert resp.choices[0].message.tool_calls is None
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens

    (body,) = server.requests
    assert body["model"] == "m1"
    assert last_user_text(body) == "hi"
    assert system_text(body) == "be nice"
    assert all_text(body) == "be nice\nhi"


def test_openai_default_echo_with_content_parts(
    server: ScriptedModel, client: openai.OpenAI
) -> None:
    resp = client.chat.completions.create(
        model="m1",
        messages=[
            {"role": "developer", "content": [{"type": "text", "text": "dev rules"}]},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ok"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "foo "}, {"type": "text", "text": "bar"}],
            },
        ],
    )
    assert resp.choices[0].message.content == "echo: foo bar"
    body = server.requests[0]
    assert system_text(body) == "dev rules"
    assert all_text(body) == "dev rules\nfirst\nok\nfoo bar"


def test_openai_streaming_text_with_chunk_delay(
    server: ScriptedModel, client: openai.OpenAI
) -> None:
    text = "one two three four five six seven"
    server.push(Reply(text=text, chunk_delay=0.05))
    stream = client.chat.completions.create(
        model="m1",
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces: list[str] = []
    arrival: list[float] = []
    roles: list[str] = []
    finish: list[str] = []
    usage = None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
            assert chunk.choices == []
            continue
        delta = chunk.choices[0].delta
        if delta.role:
            roles.append(delta.role)
        if delta.content:
            pieces.append(delta.content)
            arrival.append(time.monotonic())
        if chunk.choices[0].finish_reason:
            finish.append(chunk.choices[0].finish_reason)
    assert "".join(pieces) == text
    assert pieces == ["one two three ", "four five six ", "seven"]
    assert roles == ["assistant"]
    assert finish == ["stop"]
    assert usage is not None
    assert usage.completion_tokens == 7
    # The client really receives chunks one by one (flushed), spaced by chunk_delay.
    assert arrival[-1] - arrival[0] >= 0.08


def test_openai_streaming_explicit_chunks_without_usage(
    server: ScriptedModel, client: openai.OpenAI
) -> None:
    server.push(Reply(text="abcdefghij", chunks=4))
    stream = client.chat.completions.create(
        model="m1", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    chunks = list(stream)
    pieces = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert pieces == ["abc", "def", "gh", "ij"]
    assert all(c.usage is None and c.choices for c in chunks)


def test_openai_tool_calls(server: ScriptedModel, client: openai.OpenAI) -> None:
    server.push(Reply(tool_calls=[ToolCall("add", {"a": 1, "b": 2}), ToolCall("x", {}, "id9")]))
    resp = client.chat.completions.create(model="m1", messages=[{"role": "user", "content": "hi"}])
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert calls is not None
    assert len(calls) == 2
    assert calls[0].type == "function"
    assert calls[0].function.name == "add"
    assert json.loads(calls[0].function.arguments) == {"a": 1, "b": 2}
    assert calls[0].id.startswith("call_")
    assert calls[1].id == "id9"


def test_openai_streaming_tool_calls(server: ScriptedModel, client: openai.OpenAI) -> None:
    server.push(Reply(text="let me add", tool_calls=[ToolCall("add", {"a": 1, "b": 2})]))
    stream = client.chat.completions.create(
        model="m1", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    text, calls, finish = "", [], None
    for chunk in stream:
        delta = chunk.choices[0].delta
        text += delta.content or ""
        calls.extend(delta.tool_calls or [])
        finish = chunk.choices[0].finish_reason or finish
    assert text == "let me add"
    assert finish == "tool_calls"
    assert len(calls) == 1
    assert calls[0].index == 0
    assert calls[0].function.name == "add"
    assert json.loads(calls[0].function.arguments) == {"a": 1, "b": 2}


def test_openai_error_status(server: ScriptedModel, client: openai.OpenAI) -> None:
    server.push(Reply(status=503, error_message="model overloaded", error_code="overloaded"))
    with pytest.raises(openai.APIStatusError) as info:
        client.chat.completions.create(model="m1", messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 503
    assert "model overloaded" in str(info.value.message)
    assert info.value.body["code"] == "overloaded"  # type: ignore[index]

    server.push(Reply(status=400, error_message="nope"))
    with pytest.raises(openai.BadRequestError, match="nope"):
        client.chat.completions.create(
            model="m1", messages=[{"role": "user", "content": "hi"}], stream=True
        )


def test_openai_retries_consume_replies_unless_disabled(server: ScriptedModel) -> None:
    # The SDK's default retry would consume one scripted reply per attempt;
    # retryable=False sends x-should-retry: false so it gives up immediately.
    with openai.OpenAI(base_url=server.base_url, api_key="test") as retrying:
        server.push(Reply(status=500, error_message="boom", retryable=False))
        server.push("after")
        with pytest.raises(openai.InternalServerError, match="boom"):
            retrying.chat.completions.create(
                model="m1", messages=[{"role": "user", "content": "hi"}]
            )
        assert len(server.requests) == 1
        assert server.pending() == 1


def test_resolution_order(server: ScriptedModel, client: openai.OpenAI) -> None:
    def ask(model: str, text: str = "q") -> str | None:
        resp = client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": text}]
        )
        return resp.choices[0].message.content

    server.set_handler(lambda body: "any-handler " + last_user_text(body))
    server.set_handler(lambda body: Reply(text="a-handler"), model="a")
    server.push("any-1")
    server.push("a-1", model="a")
    server.push("any-2")

    assert ask("a") == "a-1"  # model queue first
    assert ask("a") == "any-1"  # then the any-model queue (FIFO)
    assert ask("b") == "any-2"
    assert ask("a") == "a-handler"  # then the model handler
    assert ask("b", "zz") == "any-handler zz"  # then the any-model handler
    server.set_handler(None)
    assert ask("b", "yy") == "echo: yy"  # then the default echo
    assert [r["model"] for r in server.wait_for_requests(6)] == ["a", "a", "b", "a", "b", "b"]


def test_broken_handler_returns_500(server: ScriptedModel, client: openai.OpenAI) -> None:
    server.set_handler(lambda body: 1 / 0)
    with pytest.raises(openai.InternalServerError, match="ZeroDivisionError"):
        client.chat.completions.create(model="m1", messages=[{"role": "user", "content": "hi"}])
    assert len(server.errors) == 1
    server.set_handler(None)
    resp = client.chat.completions.create(model="m1", messages=[{"role": "user", "content": "x"}])
    assert resp.choices[0].message.content == "echo: x"


def test_delay_and_wait_for_requests(server: ScriptedModel, client: openai.OpenAI) -> None:
    server.push(Reply(text="slow", delay=0.15))
    start = time.monotonic()
    resp = client.chat.completions.create(model="m1", messages=[{"role": "user", "content": "x"}])
    assert resp.choices[0].message.content == "slow"
    assert time.monotonic() - start >= 0.15
    assert len(server.wait_for_requests(1, timeout=0.1)) == 1
    with pytest.raises(TimeoutError):
        server.wait_for_requests(2, timeout=0.05)


def test_raw_http_routes_and_bad_requests(server: ScriptedModel) -> None:
    server.push("x", model="programmed")
    status, body = _http(server, "GET", "/v1/models")
    assert status == 200
    ids = {m["id"] for m in body["data"]}
    assert {"scripted", "programmed"} <= ids

    assert _http(server, "GET", "/nope")[0] == 404
    assert _http(server, "POST", "/v1/completions", b"{}")[0] == 404
    assert _http(server, "POST", "/v1/embeddings", b"{}")[0] == 400  # no input

    status, body = _http(server, "POST", "/v1/chat/completions", b"{not json")
    assert status == 400
    assert "error" in body
    status, body = _http(server, "POST", "/v1/chat/completions", b"[1, 2]")
    assert status == 400
    status, body = _http(server, "POST", "/chat/completions", b'{"model": "m"}')
    assert status == 400
    assert server.requests == []

    payload = json.dumps({"model": "m", "messages": [{"role": "user", "content": "yo"}]})
    status, body = _http(server, "POST", "/chat/completions", payload.encode())
    assert status == 200
    assert body["choices"][0]["message"]["content"] == "echo: yo"


def test_malformed_http_gets_json_400(server: ScriptedModel) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as sock:
        sock.sendall(b"GARBAGE / HTTP/1.1 extra\r\n\r\n")
        data = b""
        while chunk := sock.recv(4096):
            data += chunk
    head, _, payload = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    assert "error" in json.loads(payload)
    # The server is still alive afterwards.
    assert _http(server, "GET", "/v1/models")[0] == 200


def test_standalone_lifecycle() -> None:
    model = ScriptedModel()
    model.start()
    url = model.base_url
    assert url.startswith("http://127.0.0.1:")
    assert url.endswith("/v1")
    with openai.OpenAI(base_url=url, api_key="k", max_retries=0) as c:
        resp = c.chat.completions.create(model="z", messages=[{"role": "user", "content": "a"}])
        assert resp.choices[0].message.content == "echo: a"
    model.stop()
    model.stop()
    with pytest.raises(RuntimeError):
        _ = model.base_url


# --------------------------------------------------------------------------------------
# Agno
# --------------------------------------------------------------------------------------


def test_agno_run(server: ScriptedModel) -> None:
    server.push("pushed reply")
    agent = _agent(server, instructions="You are a test agent.")
    out = agent.run("hi")
    assert out.content == "pushed reply"
    assert out.status == RunStatus.completed
    body = server.requests[0]
    assert body["model"] == "scripted"
    assert last_user_text(body) == "hi"
    assert "You are a test agent." in system_text(body)


@pytest.mark.asyncio
async def test_agno_arun_stream(server: ScriptedModel) -> None:
    text = "the quick brown fox jumps over the lazy dog"
    server.push(Reply(text=text, chunk_delay=0.01))
    agent = _agent(server)
    pieces: list[str] = []
    async for ev in agent.arun("hi", stream=True):
        if ev.event == RunEvent.run_content and ev.content:
            pieces.append(ev.content)
    assert "".join(pieces) == text
    assert len(pieces) == 3
    (body,) = server.requests
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


@pytest.mark.asyncio
async def test_agno_tool_call_round_trip(server: ScriptedModel) -> None:
    calls: list[tuple[int, int]] = []

    def add(a: int, b: int) -> int:
        """Add two integers."""
        calls.append((a, b))
        return a + b

    server.push(Reply(tool_calls=[ToolCall("add", {"a": 1, "b": 2})]))
    server.push("done")
    agent = _agent(server, tools=[add])
    out = await agent.arun("please add")
    assert out.content == "done"
    assert calls == [(1, 2)]

    first, second = server.wait_for_requests(2)
    assert [t["function"]["name"] for t in first["tools"]] == ["add"]
    tool_messages = [m for m in second["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 1
    assert "3" in tool_messages[0]["content"]
    assistant = [m for m in second["messages"] if m.get("tool_calls")]
    assert assistant[0]["tool_calls"][0]["id"] == tool_messages[0]["tool_call_id"]


def test_agno_streaming_tool_call_round_trip(server: ScriptedModel) -> None:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    server.push(Reply(tool_calls=[ToolCall("add", {"a": 20, "b": 22})]))
    server.push("the answer is 42")
    agent = _agent(server, tools=[add])
    pieces = [
        ev.content
        for ev in agent.run("add", stream=True)
        if ev.event == RunEvent.run_content and isinstance(ev.content, str)
    ]
    assert "".join(pieces) == "the answer is 42"
    second = server.wait_for_requests(2)[1]
    assert any(m["role"] == "tool" and "42" in m["content"] for m in second["messages"])


def test_agno_model_error_sets_status(server: ScriptedModel) -> None:
    server.push(Reply(status=400, error_message="scripted failure"))
    agent = _agent(server)
    out = agent.run("hi")
    assert out.status == RunStatus.error
    assert "scripted failure" in str(out.content)
