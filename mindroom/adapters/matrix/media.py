"""Download the file of a media message: authenticated media first, decrypted when encrypted.

Homeservers serve new media only to authenticated requests since Matrix 1.11 (Synapse 1.120:
``/_matrix/client/v1/media/download/{server}/{id}`` with the account's token); older ones only
have the unauthenticated ``/_matrix/media/v3/download/...``, tried when the first answers that
it does not know the endpoint. A file bigger than ``max_bytes`` is refused before it is read
(by its Content-Length) or as soon as it passes the limit. An encrypted room's file is
decrypted with the key and IV its message carries, and its SHA-256 checked (nio's attachment
crypto).
"""

from __future__ import annotations

from urllib.parse import quote

import nio
from nio.crypto.attachments import decrypt_attachment

from mindroom.adapters.matrix.events import Attachment
from mindroom.errors import MatrixError

AUTHENTICATED = "/_matrix/client/v1/media/download/{server}/{media}"
LEGACY = "/_matrix/media/v3/download/{server}/{media}"
_CHUNK = 64 * 1024


class MediaError(MatrixError):
    """A file could not be fetched (too big, gone, refused, or not decryptable)."""


def _size_text(size: int) -> str:
    return f"{size / 1_000_000:.1f} MB" if size >= 100_000 else f"{size / 1000:.0f} kB"


async def _get(client: nio.AsyncClient, path: str, max_bytes: int) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {client.access_token}"}
    response = await client.send("GET", path, None, headers)
    try:
        if response.status != 200:
            return response.status, await response.read()
        length = response.content_length
        if length is not None and length > max_bytes:
            raise MediaError(f"it is {_size_text(length)}, over the {_size_text(max_bytes)} limit")
        data = bytearray()
        async for chunk in response.content.iter_chunked(_CHUNK):
            data += chunk
            if len(data) > max_bytes:
                raise MediaError(f"it is over the {_size_text(max_bytes)} limit")
        return 200, bytes(data)
    finally:
        response.release()


async def download(client: nio.AsyncClient, attachment: Attachment, max_bytes: int) -> bytes:
    """The plain bytes of ``attachment``'s file; MediaError with a reason a person can act on."""
    if attachment.size > max_bytes:
        raise MediaError(
            f"it is {_size_text(attachment.size)}, over the {_size_text(max_bytes)} limit"
        )
    try:
        server, media = (quote(part, safe="") for part in attachment.mxc)
    except ValueError as exc:
        raise MediaError(str(exc)) from None
    status, data = await _get(client, AUTHENTICATED.format(server=server, media=media), max_bytes)
    if status in (400, 404, 405) and b"M_UNRECOGNIZED" in data:  # an old homeserver
        status, data = await _get(client, LEGACY.format(server=server, media=media), max_bytes)
    if status != 200:
        raise MediaError(f"the homeserver answered HTTP {status} for {attachment.url}")
    if attachment.encryption is None:
        return data
    secret = attachment.encryption
    try:
        return decrypt_attachment(
            data, secret["key"]["k"], secret["hashes"]["sha256"], secret["iv"]
        )
    except (KeyError, TypeError, ValueError, nio.EncryptionError) as exc:
        raise MediaError(f"the encrypted file could not be decrypted ({exc})") from None
