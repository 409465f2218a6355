"""The HTTP client of a configured model: its requests go through :class:`RecordingTransport`,
which notes each failing outcome in the turn's :class:`~mindroom.adapters.agno.failures.ModelCalls`
(a failed turn is then classified by the HTTP status its last request got). Imported when a
model is built, never by the doctor: httpx is the model SDK's HTTP client."""

from __future__ import annotations

import httpx

from mindroom.adapters.agno.failures import current_model_calls
from mindroom.adapters.http_clients import async_transport


class RecordingTransport(httpx.AsyncBaseTransport):
    """An httpx transport that notes each response's status (or the exception) of configured
    model ``model`` in the current :class:`ModelCalls`, then hands it on unchanged."""

    def __init__(self, model: str, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.model = model
        self._inner = inner or async_transport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        calls = current_model_calls()
        try:
            response = await self._inner.handle_async_request(request)
        except Exception as exc:
            if calls is not None:
                calls.note(self.model, exc)
            raise
        if calls is not None:
            calls.note(self.model, response.status_code if response.status_code >= 400 else None)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def recording_http_client(model: str) -> httpx.AsyncClient:
    """The HTTP client of configured model ``model``, through :class:`RecordingTransport`, with
    the connection limits and redirects of the ``openai`` SDK's own client (the timeouts are
    set per request)."""
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
    transport = RecordingTransport(model, async_transport(limits))
    return httpx.AsyncClient(transport=transport, follow_redirects=True)
