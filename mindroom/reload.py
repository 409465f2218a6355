"""Hot reload of config.yaml, and ``!config`` in chat.

The config file is watched (watchfiles, debounced). A change is validated first: an invalid
file leaves the running config in place, and the error (file, key path, message) is logged and
shown by ``!config status``. A valid change is applied as a diff:

* added agents and teams get their accounts and join their rooms;
* removed ones leave their rooms and stop;
* changed ones take effect at their next turn (a new display name at once, and they leave
  rooms no longer listed for them) (turns in progress finish as they started,
  because agents are built per turn); models whose settings changed are rebuilt;
* new rooms are created and joined; memory and flush settings apply at once.

``!config get KEY`` and ``!config set KEY VALUE`` (admins only, ``authorization.admins``) go
through the same validated round-trip edit as the CLI, and the watcher applies the result.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from watchfiles import awatch

from mindroom.config.load import load_config
from mindroom.config.schema import Config
from mindroom.config.store import ConfigDocument, parse_value
from mindroom.errors import ConfigError
from mindroom.matrix.accounts import set_display_name
from mindroom.redact import redact_config_value

if TYPE_CHECKING:
    from mindroom.bot import Bot

logger = logging.getLogger(__name__)

DEBOUNCE_MS = 200


@dataclass(frozen=True)
class ConfigDiff:
    """What a new config changes, by agent and team name."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[str, ...]
    rooms_added: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed or self.rooms_added)


def diff_configs(old: Config, new: Config) -> ConfigDiff:
    """Compare two configs (pure)."""
    before = {**old.agents, **old.teams}
    after = {**new.agents, **new.teams}
    shared_changed = old.model_dump(exclude={"agents", "teams"}) != new.model_dump(
        exclude={"agents", "teams"}
    )
    changed = [n for n in after if n in before and (after[n] != before[n] or shared_changed)]
    return ConfigDiff(
        added=tuple(n for n in after if n not in before),
        removed=tuple(n for n in before if n not in after),
        changed=tuple(changed),
        rooms_added=tuple(r for r in new.room_names if r not in old.room_names),
    )


class ConfigReloader:
    """Watches the config file of a running bot and applies valid changes."""

    def __init__(self, bot: Bot, path: Path) -> None:
        self.bot = bot
        self.path = path
        self.error: str | None = None
        self.applied = 0
        self._lock = asyncio.Lock()

    async def reload(self) -> ConfigDiff | None:
        """Read, validate and apply the file now; None when it is invalid (error kept)."""
        async with self._lock:
            try:
                new = await asyncio.to_thread(load_config, self.path)
            except ConfigError as exc:
                self.error = str(exc)
                logger.error("config not reloaded, the running config stays: %s", exc)
                return None
            self.error = None
            diff = diff_configs(self.bot.config, new)
            if diff.empty:
                return diff
            old = self.bot.config
            self.bot.set_config(new)
            for name in diff.changed:
                await self._update_member(name, old, new)
            for name in diff.removed:
                await self.bot.remove_member(name)
            for name in diff.added:
                await self.bot.add_member(name)
            await self.bot.prepare_rooms()
            self.applied += 1
            logger.info(
                "config reloaded: added %s, removed %s, changed %s, new rooms %s",
                ", ".join(diff.added) or "-",
                ", ".join(diff.removed) or "-",
                ", ".join(diff.changed) or "-",
                ", ".join(diff.rooms_added) or "-",
            )
            return diff

    async def _update_member(self, name: str, old: Config, new: Config) -> None:
        """A changed agent or team: its display name, and rooms it no longer belongs to."""
        before = old.agents.get(name) or old.teams[name]
        after = new.agents.get(name) or new.teams[name]
        account = self.bot.agents.get(name)
        if account is None:
            return
        if after.display_name and after.display_name != before.display_name:
            await set_display_name(account.client, after.display_name)
        for room in set(before.rooms) - set(after.rooms):
            room_id = self.bot.room_ids.get(room)
            if room_id and room_id in account.joined_rooms():
                await account.leave(room_id)

    async def watch(self, stop: asyncio.Event) -> None:
        """Reload on every change of the file until ``stop`` is set."""
        name = self.path.name
        async for _ in awatch(
            self.path.parent,
            watch_filter=lambda _change, changed: Path(changed).name == name,
            debounce=DEBOUNCE_MS,
            stop_event=stop,
            recursive=False,
        ):
            try:
                await self.reload()
            except Exception:  # the watcher's edge: log, keep watching
                logger.exception("applying the new config failed")

    def status_text(self) -> str:
        """``!config status``."""
        if self.error:
            return f"⚠️ The config file has an error; the running config stays:\n\n{self.error}"
        return f"Config {self.path.name} is valid and applied ({self.applied} reloads)."

    async def chat(self, argument: str, is_admin: bool) -> str:
        """Answer ``!config ...``."""
        action, _, rest = argument.strip().partition(" ")
        if action in ("", "status"):
            return self.status_text()
        if not is_admin:
            return "Only admins (authorization.admins) may read or change the config."
        try:
            doc = await asyncio.to_thread(ConfigDocument, self.path)
            if action == "get" and rest.strip():
                value = redact_config_value(rest.strip(), doc.get(rest.strip()))
                return f"`{rest.strip()}` = `{value}`"
            key, _, raw = rest.strip().partition(" ")
            if action == "set" and key and raw:
                doc.set(key, parse_value(raw))
                written = await asyncio.to_thread(doc.save)
                if written:
                    await self.reload()
                return f"Set `{key}`; applied." if written else f"`{key}` already had that value."
        except ConfigError as exc:
            return f"Refused: {exc}"
        return "Usage: `!config status`, `!config get KEY`, `!config set KEY VALUE`"
