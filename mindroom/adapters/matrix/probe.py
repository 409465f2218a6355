"""Probing a homeserver: does it answer (waited for at start), can accounts be registered
(``mindroom doctor``)."""

from __future__ import annotations

import asyncio
import logging
import os

import aiohttp

from mindroom.checks import Check
from mindroom.invocation import invoked_as

logger = logging.getLogger(__name__)

TIMEOUT = aiohttp.ClientTimeout(total=10)
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 30.0


async def _versions_error(session: aiohttp.ClientSession, url: str) -> str | None:
    """Why ``url`` does not answer as a homeserver, or None when it does."""
    try:
        async with session.get(f"{url}/_matrix/client/versions") as response:
            if response.status == 200:
                return None
            return f"HTTP {response.status} from {url}/_matrix/client/versions"
    except (aiohttp.ClientError, TimeoutError) as exc:
        return str(exc) or type(exc).__name__


async def wait_for_homeserver(url: str) -> None:
    """Return once ``url`` answers as a Matrix homeserver; log each failed attempt and retry.

    The wait between attempts doubles from 1 s up to 30 s. It never gives up by itself (a
    homeserver that starts later is found): cancelling the caller is how to stop waiting.
    """
    url = url.rstrip("/")
    logger.info("connecting to the homeserver at %s", url)
    delay = RETRY_FIRST_S
    attempt = 1
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        while (error := await _versions_error(session, url)) is not None:
            logger.warning(
                "cannot reach the homeserver at %s (attempt %d): %s; retrying in %.0f s "
                "(is it running? set MATRIX_HOMESERVER or matrix.homeserver, or use --local)",
                url,
                attempt,
                error,
                delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX_S)
            attempt += 1
    if attempt > 1:
        logger.info("the homeserver at %s answers (attempt %d)", url, attempt)


async def check_homeserver(url: str, local_secret: bool = False) -> list[Check]:
    """The versions endpoint answers, and how accounts can be registered.

    ``local_secret``: the embedded homeserver's config (with its shared secret) is in the
    storage root, so ``mindroom run --local`` registers with the secret, not openly.
    """
    checks = []
    try:
        async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
            async with session.get(f"{url}/_matrix/client/versions") as response:
                versions = (await response.json()).get("versions", [])
                checks.append(
                    Check(
                        "homeserver",
                        response.status == 200,
                        f"{url} answers (spec {versions[-1] if versions else '?'})",
                    )
                )
            if local_secret or os.environ.get("MATRIX_REGISTRATION_SHARED_SECRET"):
                async with session.get(f"{url}/_synapse/admin/v1/register") as response:
                    ok = response.status == 200
                    checks.append(
                        Check(
                            "registration",
                            ok,
                            "shared-secret registration available"
                            if ok
                            else f"shared-secret registration refused (HTTP {response.status})",
                            "" if ok else "check registration_shared_secret in the server config",
                        )
                    )
            else:
                async with session.post(f"{url}/_matrix/client/v3/register", json={}) as response:
                    ok = response.status == 401  # open registration asks for auth flows
                    checks.append(
                        Check(
                            "registration",
                            ok,
                            "open registration available"
                            if ok
                            else f"open registration is off (HTTP {response.status})",
                            ""
                            if ok
                            else "set MATRIX_REGISTRATION_SHARED_SECRET, or enable "
                            "registration on the homeserver, or use mindroom run --local",
                        )
                    )
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        checks.append(
            Check(
                "homeserver",
                False,
                f"{url}: {exc or type(exc).__name__}",
                f"the local homeserver runs only while '{invoked_as()} run --local' runs: start it"
                if local_secret
                else f"start it, set MATRIX_HOMESERVER, or use '{invoked_as()} run --local'",
            )
        )
    return checks
