"""HTTP clients for the model and embedding endpoints, all on one TLS context per process.

Each ``httpx`` transport and each ``openai`` client builds its own TLS context unless it is
given one, and building one reads the whole CA bundle: 25-50 ms of CPU. The bot built one for
every model it set up, the start-up probe one more, and each memory scope's extraction model
one more. The context is shared instead: a TLS context is meant to be shared by many
connections.

It verifies as httpx does by default: ``SSL_CERT_FILE`` or ``SSL_CERT_DIR`` when set, else
certifi's bundle. The context is kept per value of those two variables, so a reload whose
``.env`` changes them gets a context built from the new ones.

Imports of httpx and openai happen in the functions: the CLI imports this module's callers
without loading either.
"""

from __future__ import annotations

import functools
import os
import ssl
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import httpx
    import openai

__all__ = ["async_transport", "openai_async_http_client", "openai_http_client", "tls_context"]


def tls_context() -> ssl.SSLContext:
    """The process's TLS context for verified HTTPS, for the certificate settings now in
    the environment."""
    return _context(os.environ.get("SSL_CERT_FILE") or "", os.environ.get("SSL_CERT_DIR") or "")


@functools.cache
def _context(cert_file: str, cert_dir: str) -> ssl.SSLContext:
    if cert_file:
        return ssl.create_default_context(cafile=cert_file)
    if cert_dir:
        return ssl.create_default_context(capath=cert_dir)
    import certifi  # httpx's own default

    return ssl.create_default_context(cafile=certifi.where())


def async_transport(limits: httpx.Limits | None = None) -> httpx.AsyncHTTPTransport:
    """An ``httpx`` connection pool on the shared context (httpx's default limits unless
    ``limits``)."""
    import httpx

    if limits is None:
        return httpx.AsyncHTTPTransport(verify=tls_context())
    return httpx.AsyncHTTPTransport(verify=tls_context(), limits=limits)


def openai_async_http_client() -> openai.DefaultAsyncHttpxClient:
    """The HTTP client the ``openai`` SDK would make for an ``AsyncOpenAI`` (its timeout,
    limits and redirects), on the shared context."""
    import openai

    return openai.DefaultAsyncHttpxClient(verify=tls_context())


def openai_http_client() -> openai.DefaultHttpxClient:
    """:func:`openai_async_http_client` for the blocking ``OpenAI`` client."""
    import openai

    return openai.DefaultHttpxClient(verify=tls_context())
