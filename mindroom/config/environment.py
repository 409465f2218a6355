"""The environment mindroom reads: the shell's variables, then the ``.env`` file beside
``config.yaml``; and what the running bot uses, for the doctor to compare.

At start (:func:`load_dotenv_beside`) the names already set in the environment are remembered
as the shell's: they always win, and the file only fills in the rest. A hot reload reads the
file again (:func:`reread_dotenv`): a variable that came from the file takes its new value, one
removed from the file goes away, a shell variable never changes. The new environment is only
computed there; :func:`apply_environment` makes it the process's, once the config that uses it
has been found valid.

The running bot writes what it uses to ``mindroom_data/environment.json``
(:func:`write_running_environment`, at start and at every reload): for each variable the config
refers to (``${VAR}``), the ``.env`` sets, or the model clients read, where it came from and its
value; a secret (by its name, as :mod:`mindroom.redact` decides) is written only as a short
hash. :func:`environment_differences` compares that with what the files say now.

It does not decide what to do about a difference; the doctor says it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from dotenv import dotenv_values

from mindroom.atomic import atomic_write
from mindroom.redact import is_secret_key

ENVIRONMENT_FILE = "environment.json"
# Read by the model clients and the start-up, even when config.yaml does not name them
WELL_KNOWN = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "MINDROOM_MODEL",
    "MATRIX_HOMESERVER",
)
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}")


@dataclass
class DotenvLayer:
    """Which variables came from where: ``shell`` names were set before the file was read
    (they win); ``loaded`` is what the file set."""

    shell: frozenset[str]
    loaded: dict[str, str] = field(default_factory=dict)

    def origin(self, name: str) -> str:
        """``shell``, ``.env`` or ``unset``, for the process's environment now."""
        if name in self.loaded:
            return ".env"
        return "shell" if name in os.environ else "unset"


_LAYERS: dict[Path, DotenvLayer] = {}


def dotenv_path(config_path: Path) -> Path:
    """The ``.env`` file beside ``config_path``."""
    return config_path.resolve().parent / ".env"


def _read(dotenv: Path) -> dict[str, str]:
    if not dotenv.is_file():
        return {}
    return {k: v for k, v in dotenv_values(dotenv).items() if v is not None}


def load_dotenv_beside(config_path: Path) -> bool:
    """Read the ``.env`` file next to ``config_path`` into the environment, if there is one.

    Variables already set in the environment win: the file only fills in what is missing, so
    ``OPENAI_API_KEY=... mindroom run`` still overrides it. Which variables came from the file
    is remembered for :func:`reread_dotenv`. Returns whether a file was read.
    """
    dotenv = dotenv_path(config_path)
    layer = DotenvLayer(frozenset(os.environ))
    layer.loaded = {k: v for k, v in _read(dotenv).items() if k not in layer.shell}
    os.environ.update(layer.loaded)
    _LAYERS[config_path.resolve()] = layer
    return dotenv.is_file()


def dotenv_layer(config_path: Path) -> DotenvLayer:
    """The layer recorded at start for ``config_path`` (without one, as when a bot is started
    in-process: everything in the environment now counts as the shell's)."""
    key = config_path.resolve()
    if key not in _LAYERS:
        _LAYERS[key] = DotenvLayer(frozenset(os.environ))
    return _LAYERS[key]


@dataclass(frozen=True)
class EnvironmentChange:
    """The environment a reload would use, and what it changes."""

    environment: dict[str, str]
    loaded: dict[str, str]  # what the file sets now (shell names left out)
    changed: tuple[str, ...]  # names added, changed or removed


def reread_dotenv(config_path: Path) -> EnvironmentChange:
    """Read the ``.env`` beside ``config_path`` again and compute the environment it gives,
    without changing the process's (see :func:`apply_environment`)."""
    layer = dotenv_layer(config_path)
    fresh = {k: v for k, v in _read(dotenv_path(config_path)).items() if k not in layer.shell}
    environment = {k: v for k, v in os.environ.items() if k not in layer.loaded}
    environment.update(fresh)
    changed = sorted(
        name for name in set(layer.loaded) | set(fresh) if layer.loaded.get(name) != fresh.get(name)
    )
    return EnvironmentChange(environment, fresh, tuple(changed))


def apply_environment(config_path: Path, change: EnvironmentChange) -> None:
    """Make ``change`` the process's environment (after the config using it was accepted)."""
    layer = dotenv_layer(config_path)
    for name in change.changed:
        if name in change.loaded:
            os.environ[name] = change.loaded[name]
        else:
            os.environ.pop(name, None)
    layer.loaded = dict(change.loaded)


# -- what the running bot uses -------------------------------------------------------------------


def _fingerprint(value: str) -> str:
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()[:12]


def shown(name: str, value: str | None) -> str | None:
    """A value as it may be written down: in clear, or a short hash for a secret's."""
    if value is None:
        return None
    return _fingerprint(value) if is_secret_key(name) else value


def watched_names(config_path: Path) -> list[str]:
    """The variables that matter to ``config_path``: those it refers to, those its ``.env``
    sets, and :data:`WELL_KNOWN`."""
    try:
        text = config_path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = ""
    names = set(WELL_KNOWN) | set(_REFERENCE.findall(text))
    names |= set(_read(dotenv_path(config_path)))
    return sorted(names)


def running_environment(config_path: Path, env: Mapping[str, str] | None = None) -> dict:
    """The document :func:`write_running_environment` writes, for the environment ``env``
    (the process's by default)."""
    env = os.environ if env is None else env
    layer = dotenv_layer(config_path)
    variables = {}
    for name in watched_names(config_path) + sorted(set(layer.loaded) - set(WELL_KNOWN)):
        value = env.get(name)
        origin = ".env" if name in layer.loaded else ("shell" if value is not None else "unset")
        variables[name] = {"origin": origin, "value": shown(name, value)}
    return {"pid": os.getpid(), "config": str(config_path.resolve()), "variables": variables}


def write_running_environment(config_path: Path, data_dir: Path) -> None:
    """Publish what this process uses, for ``mindroom doctor`` (secrets only as hashes)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    document = running_environment(config_path)
    atomic_write(data_dir / ENVIRONMENT_FILE, json.dumps(document, indent=2) + "\n", mode=0o600)


def read_running_environment(data_dir: Path) -> dict | None:
    """What a running bot published, or None (none written, or unreadable)."""
    try:
        document = json.loads((data_dir / ENVIRONMENT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


@dataclass(frozen=True)
class Difference:
    """A variable the running bot uses with another value than the files give now."""

    name: str
    running: str | None  # as written down: in clear, or a hash
    files: str | None
    origin: str  # where the running bot's value came from: shell, .env or unset

    def describe(self) -> str:
        """E.g. ``OPENAI_BASE_URL=http://a (config/.env now say http://b)``."""
        secret = is_secret_key(self.name)
        running = "unset" if self.running is None else self.running
        files = "unset" if self.files is None else self.files
        if secret:
            running = "unset" if self.running is None else "a value"
            files = "it unset" if self.files is None else "another value"
        where = " (from the shell that started it)" if self.origin == "shell" else ""
        return f"{self.name}={running}{where} (config/.env now say {files})"


def environment_differences(
    published: Mapping[str, object], env: Mapping[str, str] | None = None
) -> list[Difference]:
    """Where the running bot's ``published`` environment differs from ``env`` (the process's:
    the doctor's shell and the ``.env`` it read)."""
    env = os.environ if env is None else env
    variables = published.get("variables")
    if not isinstance(variables, Mapping):
        return []
    found = []
    for name, entry in sorted(variables.items()):
        if not isinstance(entry, Mapping):
            continue
        running = entry.get("value")
        now = shown(name, env.get(name))
        if running != now:
            found.append(Difference(name, running, now, str(entry.get("origin", "unset"))))
    return found
