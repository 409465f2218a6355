"""Scripted OpenAI-compatible chat-completions server for tests and benchmarks.

This is the *only* stand-in for a language model in the test suite: instead of mocking
Agno or the ``openai`` package, tests point the real clients at a tiny local HTTP server
that speaks the OpenAI chat-completions wire format (plain JSON and SSE streaming).
Everything else - Agno's ``OpenAIChat``, the ``openai`` SDK, ``httpx`` - runs for real.

The server uses only the standard library (``http.server.ThreadingHTTPServer`` in a
daemon thread), so it is independent of any asyncio event loop and can also serve a bot
running in a subprocess. It binds ``127.0.0.1`` on a free port and never touches the
network otherwise.

Usage::

    from tests.support.scripted_model import Reply, ScriptedModel, ToolCall, last_user_text

    with ScriptedModel() as server:
        server.push("Hello there!")                                   # any model
        server.push(Reply(tool_calls=[ToolCall("add", {"a": 1, "b": 2})]), model="m1")
        server.set_handler(lambda body: "seen: " + last_user_text(body))
        agent = Agent(model=OpenAIChat(id="m1", base_url=server.base_url, api_key="test"))
        ...
        assert "hi" in last_user_text(server.requests[-1])

Reply resolution for a request whose ``model`` field is ``M``:

1. the FIFO queue programmed for ``M`` (``push(..., model=M)``),
2. the FIFO queue for any model (``push(...)``),
3. the handler for ``M`` (``set_handler(fn, model=M)``),
4. the handler for any model (``set_handler(fn)``),
5. the default: ``"echo: " + <text of the last user message>``.

``POST /v1/embeddings`` answers every input with :func:`scripted_embedding` (deterministic: texts
that share words get similar vectors; ``dimensions`` in the request sets the size, default
:data:`EMBEDDING_DIMENSIONS`); requests are in :attr:`ScriptedModel.embedding_requests`, and
:attr:`ScriptedModel.embeddings_status` set to an error status makes the endpoint fail.

mem0's memory extraction (the ``mem0`` backend's one model call per ``add(infer=True)``, a
system prompt starting "You are a Memory Extractor" and a user prompt with a "## New Messages"
section) is answered without mocking mem0 by :func:`mem0_extraction`::

    server.set_handler(mem0_extraction(lambda new: ["Alice likes tea"] if "tea" in new else []))

``facts`` gets the new messages as mem0 renders them (``user: ...`` / ``assistant: ...`` lines)
and returns the memory texts to store (``[]``: nothing). The pieces are there for handlers that
do more: :func:`is_mem0_extraction`, :func:`mem0_new_messages`, :func:`mem0_reply`.

A reply is either a plain ``str`` (assistant text) or a :class:`Reply` which can also carry
tool calls, an HTTP error status, delays and streaming chunking.

Note that the ``openai`` SDK retries 408/409/429/5xx responses (``max_retries=2`` by
default, with back-off) and each retry consumes another scripted reply. Use
``Reply(status=500, retryable=False)`` (sends ``x-should-retry: false``) or configure the
client with ``max_retries=0`` to avoid that.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import math
import random
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "Handler",
    "Reply",
    "ReplyLike",
    "ScriptedModel",
    "ToolCall",
    "all_text",
    "is_mem0_extraction",
    "last_user_text",
    "mem0_extraction",
    "mem0_new_messages",
    "mem0_reply",
    "message_text",
    "scripted_embedding",
    "system_text",
]

DEFAULT_MODEL_ID = "scripted"
EMBEDDING_DIMENSIONS = 64
_EMBED_WORD_RE = re.compile(r"\w+")


def scripted_embedding(text: str, dimensions: int = EMBEDDING_DIMENSIONS) -> list[float]:
    """A deterministic unit vector for ``text``: the sum of a fixed random vector per word."""
    total = [0.0] * dimensions
    for word in _EMBED_WORD_RE.findall(text.lower()) or [""]:
        rng = random.Random(hashlib.sha256(word.encode()).digest())
        for i in range(dimensions):
            total[i] += rng.gauss(0.0, 1.0)
    norm = math.sqrt(sum(x * x for x in total)) or 1.0
    return [x / norm for x in total]


# --------------------------------------------------------------------------------------
# Reply description
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    """A tool (function) call the scripted model asks the client to perform.

    ``id`` is auto-generated (``"call_<n>"``) when the reply is sent if left ``None``.
    """

    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class Reply:
    """A fully specified scripted reply.

    Attributes:
        text: Assistant text. May be empty when ``tool_calls`` are given (content is null).
        tool_calls: Tool calls to return; ``finish_reason`` becomes ``"tool_calls"``.
        status: HTTP status. Anything but 200 returns an OpenAI-shaped error body.
        error_message: ``error.message`` of the error body for non-200 statuses.
        error_type: ``error.type`` of the error body (default derived from the status).
        error_code: ``error.code`` of the error body (e.g. ``"context_length_exceeded"``).
        retryable: If not ``None``, sent as the ``x-should-retry`` header, which the openai
            SDK honours instead of its status-based retry decision.
        delay: Seconds to sleep before the response starts.
        chunk_delay: Seconds to sleep between streamed chunks.
        chunks: Number of content chunks when streaming; default ~3 words per chunk.
        usage: Usage dict to report; default is a rough word count.
        finish_reason: Override the finish reason (default ``"stop"``/``"tool_calls"``).
    """

    text: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    status: int = 200
    error_message: str = "scripted error"
    error_type: str | None = None
    error_code: str | int | None = None
    retryable: bool | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    chunks: int | None = None
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None


ReplyLike = str | Reply
Handler = Callable[[dict[str, Any]], ReplyLike]


# --------------------------------------------------------------------------------------
# Helpers for asserting on what the model was sent
# --------------------------------------------------------------------------------------


def message_text(message: dict[str, Any]) -> str:
    """Return the text of one chat message (string content or joined text parts)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return str(content)


def _messages(request_body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = request_body.get("messages") or []
    return [m for m in messages if isinstance(m, dict)]


def last_user_text(request_body: dict[str, Any]) -> str:
    """Return the text of the last ``user`` message of a chat request ("" if none)."""
    for message in reversed(_messages(request_body)):
        if message.get("role") == "user":
            return message_text(message)
    return ""


def system_text(request_body: dict[str, Any]) -> str:
    """Return all ``system``/``developer`` message texts of a chat request, newline-joined."""
    return "\n".join(
        message_text(m) for m in _messages(request_body) if m.get("role") in ("system", "developer")
    )


def all_text(request_body: dict[str, Any]) -> str:
    """Return every message's text of a chat request joined by newlines."""
    return "\n".join(message_text(m) for m in _messages(request_body))


def tool_pairing_refusal(body: dict[str, Any]) -> str | None:
    """Why OpenAI would refuse a request with these messages (a call without results, a
    result without a call), or None. A handler can refuse like OpenAI with it."""
    messages = body["messages"]
    for index, message in enumerate(messages):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            answered = set()
            for following in messages[index + 1 :]:
                if following.get("role") != "tool":
                    break
                answered.add(following.get("tool_call_id"))
            missing = sorted({call["id"] for call in message["tool_calls"]} - answered)
            if missing:
                return (
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    f"responding to each 'tool_call_id'. Missing: {missing}"
                )
        if message.get("role") == "tool":
            before = [m for m in messages[:index] if m.get("role") != "tool"]
            calls = (before[-1].get("tool_calls") or []) if before else []
            if message.get("tool_call_id") not in {call["id"] for call in calls}:
                return "messages with role 'tool' must be a response to a preceding 'tool_calls'"
    return None


def is_mem0_extraction(request_body: dict[str, Any]) -> bool:
    """Whether a chat request is mem0's memory extraction call."""
    return "You are a Memory Extractor" in system_text(request_body)


def mem0_new_messages(request_body: dict[str, Any]) -> str:
    """The "## New Messages" section of mem0's extraction prompt: ``role: text`` lines."""
    prompt = last_user_text(request_body)
    section = prompt.split("## New Messages\n", 1)[-1]
    return section.split("\n\n## ", 1)[0].strip()


def mem0_reply(texts: list[str]) -> str:
    """mem0's expected extraction answer storing ``texts`` (``[]``: store nothing)."""
    memory = [
        {"id": str(i), "text": text, "attributed_to": "user", "linked_memory_ids": []}
        for i, text in enumerate(texts)
    ]
    return json.dumps({"memory": memory})


def mem0_extraction(facts: Callable[[str], list[str]], other: Handler | None = None) -> Handler:
    """A handler answering mem0's extraction with ``facts(new messages)``; any other request
    goes to ``other`` (default: the echo reply)."""

    def handle(body: dict[str, Any]) -> ReplyLike:
        if is_mem0_extraction(body):
            return mem0_reply(facts(mem0_new_messages(body)))
        return other(body) if other is not None else "echo: " + last_user_text(body)

    return handle


# --------------------------------------------------------------------------------------
# Response construction
# --------------------------------------------------------------------------------------

_WORDS_RE = re.compile(r"\s*\S+\s*")

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


class _BadRequestError(Exception):
    """Raised while parsing a request that must be answered with HTTP 400."""


def _split_text(text: str, chunks: int | None) -> list[str]:
    """Split ``text`` into streaming pieces that concatenate back to ``text``."""
    if not text:
        return []
    if chunks is None:
        words = _WORDS_RE.findall(text)
        if not words:  # whitespace only
            return [text]
        pieces = ["".join(words[i : i + 3]) for i in range(0, len(words), 3)]
        consumed = sum(len(p) for p in pieces)
        if consumed < len(text):  # cannot normally happen, but never lose characters
            pieces[-1] += text[consumed:]
        return pieces
    n = max(1, min(chunks, len(text)))
    size, rest = divmod(len(text), n)
    pieces, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < rest else 0)
        pieces.append(text[start:end])
        start = end
    return pieces


def _count_words(text: str) -> int:
    return len(text.split())


class ScriptedModel:
    """A scripted OpenAI-compatible chat-completions server on ``127.0.0.1``.

    Use as a context manager or call :meth:`start` / :meth:`stop`. Program replies with
    :meth:`push` and :meth:`set_handler`; inspect what clients sent with :attr:`requests`.
    """

    def __init__(self) -> None:
        """Create a (not yet started) server."""
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._queues: dict[str | None, deque[ReplyLike]] = {}
        self._handlers: dict[str | None, Handler] = {}
        self._requests: list[dict[str, Any]] = []
        self._errors: list[str] = []
        self._models_seen: set[str] = set()
        self._embedding_requests: list[dict[str, Any]] = []
        self.embeddings_status = 200
        # POST /v1/audio/transcriptions answers {"text": transcript}; the raw multipart bodies
        # it was sent are kept in transcription_requests
        self.transcript = "scripted transcript"
        self.transcription_requests: list[bytes] = []
        self._call_ids = itertools.count(1)
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle -------------------------------------------------------------------

    def start(self) -> ScriptedModel:
        """Start serving on a free port in a daemon thread (idempotent). Returns self."""
        if self._httpd is not None:
            return self
        httpd = _Server(("127.0.0.1", 0), _RequestHandler)
        httpd.scripted = self
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"ScriptedModel:{httpd.server_address[1]}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the server and release the port (idempotent)."""
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is None:
            return
        httpd.shutdown()
        httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> ScriptedModel:
        """Start the server."""
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        """Stop the server."""
        self.stop()

    # ---- addresses -------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The TCP port the server listens on (server must be started)."""
        if self._httpd is None:
            raise RuntimeError("ScriptedModel is not started")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """OpenAI ``base_url`` for clients, e.g. ``http://127.0.0.1:12345/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # ---- programming -----------------------------------------------------------------

    def push(self, reply: ReplyLike, model: str | None = None) -> None:
        """Queue one reply (FIFO) for ``model`` or, if ``model`` is None, for any model."""
        if not isinstance(reply, str | Reply):
            raise TypeError(f"reply must be str or Reply, not {type(reply).__name__}")
        with self._lock:
            self._queues.setdefault(model, deque()).append(reply)
            if model is not None:
                self._models_seen.add(model)

    def set_handler(self, fn: Handler | None, model: str | None = None) -> None:
        """Set (or with ``fn=None`` remove) the fallback reply function for ``model``.

        ``fn(request_body)`` is called when no queued reply is available and must return a
        ``str`` or a :class:`Reply`. It runs on a server thread.
        """
        with self._lock:
            if fn is None:
                self._handlers.pop(model, None)
            else:
                self._handlers[model] = fn
            if model is not None:
                self._models_seen.add(model)

    def clear(self) -> None:
        """Forget all queued replies, handlers, recorded requests and errors."""
        with self._lock:
            self._queues.clear()
            self._handlers.clear()
            self._requests.clear()
            self._errors.clear()
            self._embedding_requests.clear()
            self.embeddings_status = 200

    def pending(self, model: str | None = None) -> int:
        """Number of replies still queued for ``model`` (None: the any-model queue)."""
        with self._lock:
            return len(self._queues.get(model, ()))

    # ---- inspection ------------------------------------------------------------------

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Copy of all chat-completion request bodies received so far (parsed JSON)."""
        with self._lock:
            return list(self._requests)

    @property
    def embedding_requests(self) -> list[dict[str, Any]]:
        """Copy of all embedding request bodies received so far (parsed JSON)."""
        with self._lock:
            return list(self._embedding_requests)

    @property
    def errors(self) -> list[str]:
        """Copy of errors raised by handlers (answered with HTTP 500)."""
        with self._lock:
            return list(self._errors)

    def wait_for_requests(self, n: int, timeout: float = 10.0) -> list[dict[str, Any]]:
        """Block until at least ``n`` chat requests arrived; return them.

        Raises:
            TimeoutError: if fewer than ``n`` requests arrived within ``timeout`` seconds.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= n, timeout=timeout):
                raise TimeoutError(
                    f"expected {n} chat requests within {timeout}s, got {len(self._requests)}"
                )
            return list(self._requests)

    # ---- internals used by the request handler --------------------------------------

    def _record(self, body: dict[str, Any]) -> None:
        with self._cond:
            self._requests.append(body)
            model = body.get("model")
            if isinstance(model, str):
                self._models_seen.add(model)
            self._cond.notify_all()

    def _record_error(self, message: str) -> None:
        with self._lock:
            self._errors.append(message)

    def _model_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._models_seen | {DEFAULT_MODEL_ID})

    def _resolve(self, body: dict[str, Any]) -> Reply:
        model = body.get("model") if isinstance(body.get("model"), str) else None
        handler: Handler | None = None
        reply: ReplyLike | None = None
        with self._lock:
            for key in (model, None) if model is not None else (None,):
                queue = self._queues.get(key)
                if queue:
                    reply = queue.popleft()
                    break
            if reply is None:
                handler = self._handlers.get(model) if model is not None else None
                if handler is None:
                    handler = self._handlers.get(None)
        if reply is None:
            # Call handlers outside the lock so they may use the public API.
            reply = handler(body) if handler is not None else "echo: " + last_user_text(body)
        if isinstance(reply, str):
            return Reply(text=reply)
        if isinstance(reply, Reply):
            return reply
        raise TypeError(f"handler returned {type(reply).__name__}, expected str or Reply")

    def _tool_call_dicts(self, reply: Reply) -> list[dict[str, Any]]:
        calls = []
        for index, call in enumerate(reply.tool_calls):
            call_id = call.id or f"call_{next(self._call_ids)}"
            calls.append(
                {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": json.dumps(call.arguments),
                    },
                }
            )
        return calls


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    scripted: ScriptedModel

    def handle_error(self, request: Any, client_address: Any) -> None:  # noqa: ARG002
        """Stay quiet: client disconnects are expected (e.g. cancelled streams)."""


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ScriptedModel/1.0"
    # Headers and body go out in separate writes; without TCP_NODELAY, Nagle plus delayed
    # ACKs add ~40 ms to every keep-alive request.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        """Do not log each request to stderr."""

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Answer protocol-level errors (malformed request line, ...) with JSON, not HTML."""
        self.close_connection = True
        if self.request_version == "HTTP/0.9":  # unparsable request line: still send headers
            self.request_version = "HTTP/1.0"
        with contextlib.suppress(OSError, ValueError):
            self._send_error_json(code, message or explain or HTTPStatus(code).phrase)

    # ---- low-level writers -----------------------------------------------------------

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error_json(
        self,
        status: int,
        message: str,
        error_type: str | None = None,
        code: str | int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if error_type is None:
            error_type = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "api_error")
        payload = {"error": {"message": message, "type": error_type, "param": None, "code": code}}
        self._send_json(status, payload, headers)

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            raise _BadRequestError("chunked request bodies are not supported")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError as exc:
            self.close_connection = True
            raise _BadRequestError("invalid Content-Length") from exc
        return self.rfile.read(length) if length > 0 else b""

    # ---- routing ---------------------------------------------------------------------

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/") or "/"

    def do_GET(self) -> None:  # noqa: N802
        """Serve ``/v1/models``; everything else is 404."""
        try:
            if self._path() in ("/v1/models", "/models"):
                created = int(time.time())
                data = [
                    {"id": mid, "object": "model", "created": created, "owned_by": "scripted"}
                    for mid in self.server.scripted._model_ids()
                ]
                self._send_json(200, {"object": "list", "data": data})
            else:
                self._send_error_json(404, f"unknown path {self.path}")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_POST(self) -> None:  # noqa: N802
        """Serve chat completions; everything else is 404."""
        try:
            self._do_post()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    def _do_post(self) -> None:
        try:
            raw = self._read_body()
        except _BadRequestError as exc:
            self._send_error_json(400, str(exc))
            return
        path = self._path()
        if path in ("/v1/embeddings", "/embeddings"):
            self._embeddings(raw)
        elif path in ("/v1/audio/transcriptions", "/audio/transcriptions"):
            self._transcription(raw)
        elif path in ("/v1/chat/completions", "/chat/completions"):
            self._chat_completion(raw)
        else:
            self._send_error_json(404, f"unknown path {self.path}")

    def _transcription(self, raw: bytes) -> None:
        scripted = self.server.scripted
        with scripted._lock:
            scripted.transcription_requests.append(raw)
            text = scripted.transcript
        self._send_json(200, {"text": text})

    def _chat_completion(self, raw: bytes) -> None:
        try:
            body = _chat_body(raw)
        except (ValueError, _BadRequestError) as exc:
            self._send_error_json(400, f"bad request: {exc}")
            return

        scripted = self.server.scripted
        scripted._record(body)
        try:
            reply = scripted._resolve(body)
        except Exception as exc:  # a broken handler must not kill the server
            message = f"scripted handler failed: {type(exc).__name__}: {exc}"
            scripted._record_error(message)
            self._send_error_json(500, message, headers={"x-should-retry": "false"})
            return

        if reply.delay > 0:
            time.sleep(reply.delay)

        if reply.status != 200:
            headers = {}
            if reply.retryable is not None:
                headers["x-should-retry"] = "true" if reply.retryable else "false"
            self._send_error_json(
                reply.status, reply.error_message, reply.error_type, reply.error_code, headers
            )
            return

        model = body.get("model") if isinstance(body.get("model"), str) else DEFAULT_MODEL_ID
        tool_calls = scripted._tool_call_dicts(reply)
        finish_reason = reply.finish_reason or ("tool_calls" if tool_calls else "stop")
        usage = reply.usage if reply.usage is not None else _usage(body, reply, tool_calls)
        completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        created = int(time.time())

        if body.get("stream"):
            stream_options = body.get("stream_options")
            include_usage = isinstance(stream_options, dict) and bool(
                stream_options.get("include_usage")
            )
            self._stream(
                reply,
                completion_id,
                created,
                model,
                tool_calls,
                finish_reason,
                usage,
                include_usage,
            )
            return

        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text if (reply.text or not tool_calls) else None,
            "refusal": None,
        }
        if tool_calls:
            message["tool_calls"] = [
                {k: v for k, v in call.items() if k != "index"} for call in tool_calls
            ]
        self._send_json(
            200,
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_scripted",
                "choices": [
                    {
                        "index": 0,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": finish_reason,
                    }
                ],
                "usage": usage,
            },
        )

    def _embeddings(self, raw: bytes) -> None:
        scripted = self.server.scripted
        try:
            body = json.loads(raw.decode("utf-8"))
            inputs = body["input"]
            inputs = [inputs] if isinstance(inputs, str) else inputs
            if not isinstance(inputs, list) or not all(isinstance(i, str) for i in inputs):
                raise _BadRequestError("'input' must be a string or a list of strings")
            dimensions = int(body.get("dimensions") or EMBEDDING_DIMENSIONS)
        except (ValueError, KeyError, TypeError, _BadRequestError) as exc:
            self._send_error_json(400, f"bad request: {exc}")
            return
        with scripted._lock:
            scripted._embedding_requests.append(body)
            status = scripted.embeddings_status
        if status != 200:
            self._send_error_json(
                status, "scripted embedding error", headers={"x-should-retry": "false"}
            )
            return
        data = [
            {"object": "embedding", "index": i, "embedding": scripted_embedding(text, dimensions)}
            for i, text in enumerate(inputs)
        ]
        tokens = sum(_count_words(text) for text in inputs)
        self._send_json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or DEFAULT_MODEL_ID,
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    def _stream(
        self,
        reply: Reply,
        completion_id: str,
        created: int,
        model: str,
        tool_calls: list[dict[str, Any]],
        finish_reason: str,
        usage: dict[str, Any],
        include_usage: bool,
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        first = True

        def event(choices: list[dict[str, Any]], extra: dict[str, Any] | None = None) -> None:
            nonlocal first
            if not first and reply.chunk_delay > 0:
                time.sleep(reply.chunk_delay)
            first = False
            payload: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": "fp_scripted",
                "choices": choices,
            }
            if extra:
                payload.update(extra)
            self._write_chunk(b"data: " + json.dumps(payload).encode() + b"\n\n")

        def choice(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}

        event([choice({"role": "assistant", "content": "" if not tool_calls else None})])
        for piece in _split_text(reply.text, reply.chunks):
            event([choice({"content": piece})])
        for call in tool_calls:
            event([choice({"tool_calls": [call]})])
        event([choice({}, finish_reason)])
        if include_usage:
            event([], {"usage": usage})
        self._write_chunk(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def tool_results(server: ScriptedModel) -> list[str]:
    """The tool results the model was sent back, in order (every request's ``tool`` messages,
    each counted once: a later request repeats the earlier ones in its history)."""
    seen: list[str] = []
    for request in server.requests:
        results = [
            str(m.get("content")) for m in request.get("messages", []) if m.get("role") == "tool"
        ]
        if len(results) > len(seen) and results[: len(seen)] == seen:
            seen = results
        elif results and results != seen[: len(results)]:
            seen += results
    return seen


def _chat_body(raw: bytes) -> dict[str, Any]:
    """A chat completion request's JSON body; ValueError or _BadRequestError when malformed."""
    body = json.loads(raw.decode("utf-8"))
    if not isinstance(body, dict):
        raise _BadRequestError("request body must be a JSON object")
    if not isinstance(body.get("messages"), list):
        raise _BadRequestError("'messages' must be a list")
    return body


def _usage(body: dict[str, Any], reply: Reply, tool_calls: list[dict[str, Any]]) -> dict[str, int]:
    """Token counts for a reply that scripts none: words, as a stand-in for tokens."""
    prompt_tokens = _count_words(all_text(body))
    completion_tokens = _count_words(reply.text) + sum(
        _count_words(c["function"]["arguments"]) + 1 for c in tool_calls
    )
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
