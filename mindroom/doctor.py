"""``mindroom doctor``: check the config, the homeserver, every model and the storage.

Each check says what it found and, when something is wrong, what to do about it. Checks make
small real requests (the homeserver's versions endpoint, one tiny completion per model) with
short timeouts; nothing is changed anywhere.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from mindroom.config.load import load_config
from mindroom.config.schema import Config, ModelConfig
from mindroom.errors import ConfigError

TIMEOUT = aiohttp.ClientTimeout(total=10)


@dataclass(frozen=True)
class Check:
    """One line of the doctor's table."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


async def check_homeserver(url: str) -> list[Check]:
    """The versions endpoint answers, and how accounts can be registered."""
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
            if os.environ.get("MATRIX_REGISTRATION_SHARED_SECRET"):
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


async def check_model(name: str, model: ModelConfig) -> Check:
    """One tiny completion request."""
    if model.provider == "anthropic":
        return Check(f"model {name}", True, "anthropic: not checked (needs a paid request)")
    from openai import AsyncOpenAI

    base = model.base_url or ("http://localhost:11434/v1" if model.provider == "ollama" else None)
    client = AsyncOpenAI(base_url=base, api_key=model.api_key or "none", timeout=15, max_retries=0)
    try:
        await client.chat.completions.create(
            model=model.id, messages=[{"role": "user", "content": "ping"}], max_tokens=1
        )
        return Check(f"model {name}", True, f"{model.id} at {base or 'api.openai.com'} answers")
    except Exception as exc:  # every failure is a finding
        return Check(
            f"model {name}",
            False,
            f"{model.id} at {base}: {exc}",
            "check base_url, api_key and id (OPENAI_BASE_URL, OPENAI_API_KEY, MINDROOM_MODEL)",
        )
    finally:
        await client.close()


def check_storage(storage: Path) -> Check:
    """The storage root can be written."""
    folder = storage / "mindroom_data"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder):
            pass
        return Check("storage", True, f"{folder} is writable")
    except OSError as exc:
        return Check("storage", False, f"{folder}: {exc.strerror}", "fix permissions or --storage")


async def run_doctor(config_path: Path, storage: Path, homeserver: str | None) -> list[Check]:
    """Every check, in order."""
    try:
        config: Config | None = load_config(config_path)
        checks = [Check("config", True, f"{config_path} is valid")]
    except ConfigError as exc:
        config, checks = None, [Check("config", False, str(exc), "fix the key it names")]
    url = homeserver or (config.matrix.homeserver if config else "http://localhost:8008")
    checks += await check_homeserver(url.rstrip("/"))
    if config is not None:
        checks += await asyncio.gather(*(check_model(n, m) for n, m in config.models.items()))
    checks.append(check_storage(storage))
    return checks


def render(checks: list[Check]) -> str:
    """The readable table."""
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"{'ok  ' if c.ok else 'FAIL'} {c.name:<{width}}  {c.detail}")
        if c.fix:
            lines.append(f"     {'':<{width}}  fix: {c.fix}")
    return "\n".join(lines)
