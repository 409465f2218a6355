"""``mindroom doctor``: check the config, the homeserver, every model, memory search (and, for
agents on the mem0 backend, mem0's extra, model and embedder) and the storage, and list the
end-to-end encrypted rooms the agents are in (which mindroom cannot read yet).

Each check says what it found and, when something is wrong, what to do about it. Checks make
small real requests (the homeserver's versions endpoint, one tiny completion per model) with
short timeouts; nothing is changed anywhere (the rooms are read with the agents' saved logins; an
agent without one is not logged in) and nothing is installed: a missing package is reported with
the command that installs it, or as what the first use will install (``memory.auto_install``).
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from mindroom.adapters.agno.probe import check_model
from mindroom.adapters.embeddings.probe import embedder_checks
from mindroom.adapters.matrix.accounts import agent_credentials
from mindroom.adapters.matrix.encrypted_rooms import (
    check_encrypted_rooms,
    check_key_backup,
    encryption_not_checked,
)
from mindroom.adapters.matrix.local import local_user_store
from mindroom.adapters.matrix.login_checks import check_logins
from mindroom.adapters.matrix.probe import check_homeserver
from mindroom.adapters.matrix.synapse_config import CONFIG_FILE
from mindroom.app.runlock import running
from mindroom.checks import Check
from mindroom.config.environment import environment_differences, read_running_environment
from mindroom.config.load import load_config
from mindroom.config.schema import Config
from mindroom.errors import ConfigError
from mindroom.memory.mem0.setup import check_mem0


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


def check_running_environment(data_dir: Path) -> Check | None:
    """Whether the running bot uses the values config.yaml and its ``.env`` give now (None: no
    bot runs for this storage, or it published nothing). The bot writes what it uses at start
    and at every reload; this process's environment is the shell's plus the ``.env`` it read."""
    holder = running(data_dir)
    published = read_running_environment(data_dir)
    if holder is None or published is None or published.get("pid") != holder.pid:
        return None
    differences = environment_differences(published)
    if not differences:
        return Check(
            "running bot",
            True,
            f"mindroom (pid {holder.pid}) uses the values config.yaml and .env give",
        )
    listed = "; ".join(d.describe() for d in differences)
    fix = (
        "it takes the files' values at its next reload (when config.yaml or .env is saved; "
        "a config that does not validate keeps the old ones), or restart it"
    )
    if any(d.origin == "shell" for d in differences):
        fix = (
            "a value from the shell that started it wins over .env and never changes while it "
            "runs: restart it without that variable, or with the new value"
        )
    return Check(
        "running bot",
        True,
        f"the running mindroom (pid {holder.pid}) uses {listed}",
        fix,
        warning=True,
    )


def _local_url(storage: Path, local: bool) -> str | None:
    """Where ``run --local`` last served this storage's homeserver (its port may be --port's)."""
    if not local:
        return None
    saved = local_user_store(storage / "mindroom_data").accounts()
    return saved[0][0] if saved else None


async def _model_and_memory_checks(config: Config, config_dir: Path) -> list[Check]:
    """Every model (one tiny completion each) and memory search, asked in parallel; then
    mem0, which reuses the embedders' findings."""
    models, embedders = await asyncio.gather(
        asyncio.gather(*(check_model(n, m) for n, m in config.models.items())),
        embedder_checks(config, config_dir),
    )
    return [*models, *embedders.values(), *check_mem0(config, config_dir, embedders)]


async def run_doctor(config_path: Path, storage: Path, homeserver: str | None) -> list[Check]:
    """Every check, in order."""
    try:
        config: Config | None = load_config(config_path)
        checks = [Check("config", True, f"{config_path} is valid")]
    except ConfigError as exc:
        config, checks = None, [Check("config", False, str(exc), "fix the key it names")]
    # The embedded homeserver has open registration off; `run --local` uses its secret.
    local_secret = (storage / "mindroom_data" / "homeserver" / CONFIG_FILE).exists()
    url = homeserver or _local_url(storage, local_secret)
    url = url or (config.matrix.homeserver if config else "http://localhost:8008")
    # The homeserver, the models and the embedders are asked at once: the doctor waits for
    # the slowest of them, not for their sum.
    probes = [check_homeserver(url.rstrip("/"), local_secret)]
    if config is not None:
        probes.append(_model_and_memory_checks(config, config_path.parent))
    server_checks, *found = await asyncio.gather(*probes)
    checks += server_checks
    for more in found:
        checks += more
    checks.append(check_storage(storage))
    if (in_use := check_running_environment(storage / "mindroom_data")) is not None:
        checks.append(in_use)
    if config is not None:
        data_dir = storage / "mindroom_data"
        checks += check_key_backup(data_dir, config.account_names, config.matrix.key_backup)
    if config is None or not all(c.ok for c in server_checks if c.name == "homeserver"):
        why = "the config is invalid" if config is None else "the homeserver does not answer"
        checks.append(encryption_not_checked(why))
    else:
        credentials = agent_credentials(storage / "mindroom_data")
        given = {n: (t.access_token, t.device_id) for n, t in config.matrix.logins.items()}
        checks += await check_logins(url, config.account_names, given, credentials)
        checks += await check_encrypted_rooms(url, credentials, config.account_names)
    return checks


def render(checks: list[Check]) -> str:
    """The readable table."""
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"{c.status:<4} {c.name:<{width}}  {c.detail}")
        if c.fix:
            lines.append(f"     {'':<{width}}  fix: {c.fix}")
    return "\n".join(lines)
