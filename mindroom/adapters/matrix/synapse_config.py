"""Files the embedded Synapse needs: ``homeserver.yaml``, its log config and signing key.

What it does: names the files in a homeserver data directory; builds the config for a new data
directory (SQLite, loopback client listener, registration only through the shared secret, rate
limits effectively off, no federation); on later runs loads the existing config, checks its
server name and rewrites only the client listener's host and port, the default room version
(and a missing shared secret); renders the log config; writes a signing key in the format
``--generate-keys`` uses; writes all of these privately (mode 0600, atomically).

What it does not do: choose the port (the caller passes that policy in), start or stop
anything (that is :class:`mindroom.adapters.matrix.homeserver.EmbeddedHomeserver`), or validate or
upgrade keys it does not manage. It never imports Synapse, and PyYAML only inside
:func:`prepare_config`.
"""

from __future__ import annotations

import base64
import logging
import secrets
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mindroom.atomic import atomic_write
from mindroom.errors import HomeserverError

logger = logging.getLogger(__name__)

CONFIG_FILE = "homeserver.yaml"
LOG_CONFIG_FILE = "homeserver.log.config"
LOG_FILE = "homeserver.log"
STDOUT_FILE = "synapse.stdout.log"
PID_FILE = "homeserver.pid"
DATABASE_FILE = "homeserver.db"
SIGNING_KEY_FILE = "signing.key"
MEDIA_DIR = "media_store"

# Rate limits high enough never to be hit by tests or a single-user local install.
_UNLIMITED: dict[str, float] = {"per_second": 100_000.0, "burst_count": 1_000_000}
_FLAT_RATE_LIMITS = (
    "rc_message",
    "rc_registration",
    "rc_registration_token_validity",
    "rc_joins_per_room",
    "rc_key_requests",
    "rc_3pid_validation",
    "rc_third_party_invite",
    "rc_media_create",
    "rc_delayed_event_mgmt",
    "rc_room_creation",
    "rc_reports",
    "rc_user_directory",
    "rc_profile",
    "rc_admin_redaction",
)
_NESTED_RATE_LIMITS = {
    "rc_login": ("address", "account", "failed_attempts"),
    "rc_joins": ("local", "remote"),
    "rc_invites": ("per_room", "per_user", "per_issuer"),
    "rc_presence": ("per_user",),
}

CONFIG_HEADER = (
    "# Synapse config for mindroom's embedded homeserver. Written by\n"
    "# mindroom.adapters.matrix.homeserver on the first run; the listener's host and port are\n"
    "# rewritten when they change (which drops comments). Keep registration_shared_secret:\n"
    "# mindroom registers its users with it.\n"
)


def _put(config: dict[str, Any], key: str, value: object) -> bool:
    """Set ``config[key]`` to ``value``; whether that changed it."""
    if config.get(key) == value:
        return False
    config[key] = value
    return True


def _existing_config(
    config_path: Path,
    server_name: str,
    host: str,
    choose_port: Callable[[int | None], int],
    yaml: Any,  # noqa: ANN401 (PyYAML, imported lazily by the caller)
) -> tuple[dict[str, Any], int, bool]:
    """The config at ``config_path`` for ``server_name``, listening on ``host`` and the port
    ``choose_port`` picks: (the config, the port, whether anything in it changed)."""
    try:
        # libyaml's loader when PyYAML has it: read on every start, before Synapse is launched
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        loaded = yaml.load(config_path.read_text(encoding="utf-8"), Loader=loader)
    except (OSError, yaml.YAMLError) as exc:
        raise HomeserverError(f"Cannot read {config_path}: {exc}") from exc
    if not isinstance(loaded, dict):
        raise HomeserverError(f"{config_path} is not a YAML mapping.")
    config: dict[str, Any] = loaded
    existing_name = config.get("server_name")
    if existing_name != server_name:
        raise HomeserverError(
            f"{config_path} is for server_name {existing_name!r}, not "
            f"{server_name!r}. A homeserver's name cannot change once users "
            "exist; use another data directory or the old name."
        )
    listener = client_listener(config, config_path)
    existing_port = listener.get("port")
    if not isinstance(existing_port, int):
        raise HomeserverError(f"{config_path}: the client listener has no port.")
    port = choose_port(existing_port)
    changed = _put(listener, "port", port)
    changed |= _put(listener, "bind_addresses", [host])
    if not config.get("registration_shared_secret"):
        config["registration_shared_secret"] = secrets.token_urlsafe(32)
        changed = True
    return config, port, changed


def prepare_config(
    config_path: Path,
    data_dir: Path,
    server_name: str,
    host: str,
    choose_port: Callable[[int | None], int],
    room_version: str | None = None,
    app_services: tuple[Path, ...] = (),
) -> tuple[dict[str, Any], int]:
    """Load or create ``config_path`` and the files it names; return the config and its port.

    ``choose_port`` gets the existing config's port (``None`` for a new config) and returns the
    port to listen on. ``room_version`` becomes the server's default for new rooms (a DM a
    client creates gets it too). ``app_services``: the appservice registration files it
    loads (mindroom's, in appservice mode). The config file is rewritten only when something
    in it changed.
    """
    try:
        import yaml
    except ImportError as exc:  # pragma: no cover - PyYAML comes with Synapse
        raise HomeserverError("PyYAML is missing; it is installed with matrix-synapse.") from exc

    if config_path.exists():
        config, port, changed = _existing_config(config_path, server_name, host, choose_port, yaml)
    else:
        port = choose_port(None)
        config = new_config(data_dir, server_name, host, port)
        changed = True
    if room_version:
        changed |= _put(config, "default_room_version", room_version)
    services = [str(p) for p in app_services]
    if services:
        changed |= _put(config, "app_service_config_files", services)

    ensure_signing_key(Path(str(config.get("signing_key_path"))))
    log_config = Path(str(config.get("log_config") or data_dir / LOG_CONFIG_FILE))
    if not log_config.exists():
        write_private(log_config, log_config_text(data_dir / LOG_FILE))
    if changed:
        text = CONFIG_HEADER + yaml.safe_dump(config, sort_keys=False, width=100)
        write_private(config_path, text)
        logger.debug("Wrote %s", config_path)
    return config, port


def new_config(data_dir: Path, server_name: str, host: str, port: int) -> dict[str, Any]:
    """The config mapping for a fresh data directory, with new random secrets."""
    d = data_dir
    config: dict[str, Any] = {
        "server_name": server_name,
        "pid_file": str(d / PID_FILE),
        "listeners": [
            {
                "port": port,
                "bind_addresses": [host],
                "type": "http",
                "tls": False,
                "x_forwarded": False,
                "resources": [{"names": ["client"], "compress": False}],
            }
        ],
        "database": {"name": "sqlite3", "args": {"database": str(d / DATABASE_FILE)}},
        "log_config": str(d / LOG_CONFIG_FILE),
        "media_store_path": str(d / MEDIA_DIR),
        # new media only through the authenticated endpoints (the default since Synapse 1.120)
        "enable_authenticated_media": True,
        "signing_key_path": str(d / SIGNING_KEY_FILE),
        "registration_shared_secret": secrets.token_urlsafe(32),
        "macaroon_secret_key": secrets.token_urlsafe(32),
        "form_secret": secrets.token_urlsafe(32),
        # Accounts only through registration_shared_secret: an open local server would let
        # anyone who can reach the port create accounts.
        "enable_registration": False,
        "report_stats": False,
        "trusted_key_servers": [],
        "suppress_key_server_warning": True,
        "federation_domain_whitelist": [],
        "presence": {"enabled": False},
        "url_preview_enabled": False,
        "user_directory": {"enabled": True, "search_all_users": True},
        "update_user_directory_from_worker": None,
        "bcrypt_rounds": 4,
    }
    for key in _FLAT_RATE_LIMITS:
        config[key] = dict(_UNLIMITED)
    for key, subkeys in _NESTED_RATE_LIMITS.items():
        config[key] = {sub: dict(_UNLIMITED) for sub in subkeys}
    config["rc_federation"] = {
        "window_size": 1000,
        "sleep_limit": 100_000,
        "sleep_delay": 1,
        "reject_limit": 1_000_000,
        "concurrent": 1_000,
    }
    return config


def client_listener(config: dict[str, Any], config_path: Path) -> dict[str, Any]:
    """The http listener of ``config`` that serves the client API (a live reference)."""
    for listener in config.get("listeners") or []:
        if not isinstance(listener, dict) or listener.get("type") != "http":
            continue
        for resource in listener.get("resources") or []:
            if isinstance(resource, dict) and "client" in (resource.get("names") or []):
                return listener
    raise HomeserverError(f"{config_path} has no http listener serving the client API.")


def log_config_text(log_file: Path) -> str:
    """A Synapse log config sending WARNING and above to ``log_file``."""
    return f"""\
# Logging for mindroom's embedded Synapse: WARNING and above to {LOG_FILE}.
version: 1
disable_existing_loggers: false
formatters:
  precise:
    format: '%(asctime)s - %(name)s - %(lineno)d - %(levelname)s - %(request)s - %(message)s'
handlers:
  file:
    class: logging.handlers.RotatingFileHandler
    formatter: precise
    filename: '{log_file}'
    maxBytes: 10485760
    backupCount: 2
    encoding: utf8
root:
  level: WARNING
  handlers: [file]
"""


def ensure_signing_key(path: Path) -> None:
    """Write a new ed25519 signing key to ``path`` unless one exists."""
    if path.exists():
        return
    # Same format `--generate-keys` writes; saves a ~1.5 s Synapse run on first start.
    key_id = "a_" + "".join(secrets.choice(string.ascii_letters) for _ in range(4))
    seed = base64.b64encode(secrets.token_bytes(32)).decode("ascii").rstrip("=")
    write_private(path, f"ed25519 {key_id} {seed}\n")


def write_private(path: Path, text: str) -> None:
    """Write ``text`` atomically to ``path`` with mode 0600."""
    atomic_write(path, text, mode=0o600)
