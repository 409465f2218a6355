"""Probing a homeserver for ``mindroom doctor``: does it answer, can accounts be registered."""

from __future__ import annotations

import os

import aiohttp

from mindroom.checks import Check

TIMEOUT = aiohttp.ClientTimeout(total=10)


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
                "start it, set MATRIX_HOMESERVER, or use mindroom run --local",
            )
        )
    return checks
