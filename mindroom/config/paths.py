"""Where a configured path may point: inside the folder its key is relative to.

``memory.file.path`` is relative to the storage root; ``agents.<name>.private.template_dir``
to the config file's folder. The schema refuses a path that leaves its folder as written
(absolute, ``~``, ``..``: :func:`relative_inside`), so the loader, ``mindroom config set``,
``!config set`` and the dashboard's forms all refuse it with the key's name (and the file's).
Where the path is used, :func:`resolve_inside` resolves symlinks and refuses one that really
points outside. The embedder's ``config.model`` is not one of these: it names a model to load
(a hub name, or a folder documented as absolute or relative), never where data is written.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import TYPE_CHECKING

from mindroom.errors import ConfigError

if TYPE_CHECKING:
    from mindroom.config.schema import Config

STORAGE_ROOT = "the storage root"
CONFIG_FOLDER = "the config file's folder"


def relative_inside(value: str, folder: str) -> str:
    """``value`` when, as written, it names a path inside ``folder`` (a description such as
    :data:`STORAGE_ROOT`); else ValueError saying why (pure: the disk is not read)."""
    text = value.strip()
    if not text:
        raise ValueError(f"empty: name a folder inside {folder}, or leave the key out")
    if "\x00" in text:
        raise ValueError("contains a NUL character")
    posix = text.replace("\\", "/")
    if PurePosixPath(posix).is_absolute() or text.startswith("~") or PureWindowsPath(text).drive:
        raise ValueError(f"{value!r} is absolute, outside {folder}: give a path relative to it")
    if ".." in PurePosixPath(posix).parts:
        raise ValueError(
            f"{value!r} leaves {folder} ('..' is not allowed): give a folder inside it"
        )
    return value


def resolve_inside(base: Path, relative: str, key: str, folder: str) -> Path:
    """``base / relative``, once it is known to stay inside ``base`` with symlinks resolved;
    else :class:`ConfigError` naming ``key``."""
    try:
        relative_inside(relative, folder)
    except ValueError as exc:
        raise ConfigError(f"{key}: {exc}") from None
    candidate = base / relative
    real_base, real = base.resolve(), candidate.resolve()
    if real != real_base and real_base not in real.parents:
        raise ConfigError(
            f"{key}: {relative!r} points outside {folder} ({real_base}) through a symlink, "
            f"to {real}: give a folder inside it"
        )
    return candidate


def check_config_paths(config: Config, storage: Path, config_dir: Path) -> None:
    """Refuse (:class:`ConfigError` naming the key) a path of ``config`` that leads out of its
    folder on this disk, through a symlink: ``memory.file.path`` and every private template."""
    if config.memory.file.path:
        resolve_inside(storage, config.memory.file.path, "memory.file.path", STORAGE_ROOT)
    for name, agent in config.agents.items():
        if agent.private is not None and agent.private.template_dir:
            key = f"agents.{name}.private.template_dir"
            resolve_inside(config_dir, agent.private.template_dir, key, CONFIG_FOLDER)
