"""Hot reload of config.yaml, and ``!config`` in chat.

The config file and the ``.env`` beside it are watched (watchfiles, debounced); a reload reads
both (:mod:`mindroom.config.environment`: a variable set in the shell that started mindroom
still wins over the file, one that came from the file takes its new value or goes away with
it). A change is validated first: an invalid
file leaves the running config in place, and the error (file, key path, message) is logged and
shown by ``!config status``. A valid change is applied as a diff:

* added agents and teams get their accounts and join their rooms; invites sent to an account
  while it was not running (a person opening a DM) are answered as at start-up;
* removed ones leave their rooms and stop;
* changed ones take effect at their next turn (a new display name at once, and they leave
  rooms no longer listed for them) (turns in progress finish as they started,
  because agents are built per turn); models whose settings changed are rebuilt;
* new rooms are created and joined; memory and flush settings apply at once.

A reload is a transaction, in this order: validate; log in and sync the accounts of added
agents and teams; switch the config; leave and stop removed ones; prepare rooms. Until the
switch nothing the running bot uses has changed, so a failure there (an account that cannot
log in, or not within a minute) closes what was started, keeps the previous config and
records why; ``!config status`` says so. After the switch, each remaining step runs even when
an earlier one failed, and a failure is reported as a problem of the applied config (rooms are
prepared again at the next reload).

The reloader sees the bot through :class:`ReloadTarget`, the few things a reload changes.

``!config get KEY`` and ``!config set KEY VALUE`` (admins only, ``authorization.admins``) go
through the same validated round-trip edit as the CLI, under the same lock, and the watcher
applies the result. A set that finds the file changed since it read it (a person saved meanwhile)
is refused and writes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Protocol

from watchfiles import awatch

from mindroom.adapters.matrix.accounts import set_display_name
from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.config.environment import (
    EnvironmentChange,
    apply_environment,
    reread_dotenv,
    write_running_environment,
)
from mindroom.config.load import load_config
from mindroom.config.schema import Config
from mindroom.config.store import ConfigDocument, edit_config, parse_value
from mindroom.errors import ConfigError, MindroomError
from mindroom.redact import redact_config_value

logger = logging.getLogger(__name__)

DEBOUNCE_MS = 200
ARM_CHECK_MS = 1000  # how often the watcher wakes when nothing changed (its first wake-up checks)
MEMBER_START_TIMEOUT_S = 60.0
"""How long the accounts a reload adds may take to log in and sync before it is given up."""


class ReloadTarget(Protocol):
    """What a reload needs from the running bot."""

    @property
    def config(self) -> Config:
        """The config in use."""
        ...

    @property
    def agents(self) -> Mapping[str, MatrixAccount]:
        """The running account of each agent and team, by name."""
        ...

    @property
    def room_ids(self) -> Mapping[str, str]:
        """Room IDs by configured room name."""
        ...

    @property
    def leased(self) -> bool:
        """True when leases decide which accounts run here (:mod:`mindroom.cluster.share`): their
        rounds start added members and stop removed ones, in whichever process holds them."""
        ...

    def check_paths(self, config: Config) -> None:
        """Refuse (ConfigError) a path of ``config`` that leads out of its folder on disk."""

    def set_config(self, config: Config) -> None:
        """Use ``config`` from now on."""

    def environment_changed(self) -> None:
        """The environment changed (the ``.env`` file): rebuild what read it (model clients)."""

    async def start_member(self, name: str, display_name: str) -> MatrixAccount:
        """Log in an added member's account, not listening yet; leaves nothing open on failure."""
        ...

    async def add_member(self, account: MatrixAccount) -> None:
        """Make a started account a member (after the switch to the config naming it)."""

    async def remove_member(self, name: str) -> None:
        """Leave the rooms of a removed member and stop its account."""

    async def prepare_rooms(self) -> None:
        """Make every configured room exist with its members in it (idempotent)."""


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
    """Watches the config file of a running bot and applies valid changes as one transaction.

    State for ``!config status``: ``error`` is why the last change was not applied (the file is
    invalid, ``invalid`` True, or starting it failed), ``problems`` what went wrong after an
    applied switch; ``applied`` counts applied reloads.
    """

    def __init__(self, bot: ReloadTarget, path: Path, data_dir: Path | None = None) -> None:
        self.bot = bot
        self.path = path
        self.data_dir = data_dir  # where the environment in use is published for the doctor
        self.error: str | None = None
        self.invalid = False
        self.problems: list[str] = []
        self.applied = 0
        self._lock = asyncio.Lock()

    async def reload(self) -> ConfigDiff | None:
        """Read ``.env`` and the config file again, validate and apply them now; None when
        they were not applied (error kept)."""
        async with self._lock:
            try:
                change = await asyncio.to_thread(reread_dotenv, self.path)
                new = await asyncio.to_thread(load_config, self.path, change.environment)
                self.bot.check_paths(new)  # a symlink out of the storage root, say
            except ConfigError as exc:
                self.error, self.invalid = str(exc), True
                logger.error("config not reloaded, the running config stays: %s", exc)
                return None
            old = self.bot.config
            diff = diff_configs(old, new)
            was_invalid = self.invalid
            if diff.empty and not self.problems:
                await self._apply_environment(change)
                if was_invalid:
                    logger.info("config is valid again; applied (no change to the running config)")
                # cleared last: whoever sees the error gone sees the reload done and logged
                self.error, self.invalid = None, False
                return diff
            try:
                added = () if self.bot.leased else diff.added
                started = await self._start_members(added, new)
            except Exception as exc:  # the whole change is refused; the old config runs on
                self.error, self.invalid = str(exc), False
                logger.error("config not reloaded, the running config stays: %s", exc)
                return None
            self.error, self.invalid = None, False
            for key in start_only_changes(old, new):
                logger.warning("%s changed: it takes effect at the next start", key)
            await self._apply_environment(change)
            self.bot.set_config(new)
            self.problems = await self._finish(started, diff, old, new)
            self.applied += 1
            logger.info(
                "%s: added %s, removed %s, changed %s, new rooms %s",
                "config is valid again; applied" if was_invalid else "config reloaded",
                ", ".join(diff.added) or "-",
                ", ".join(diff.removed) or "-",
                ", ".join(diff.changed) or "-",
                ", ".join(diff.rooms_added) or "-",
            )
            return diff

    async def _apply_environment(self, change: EnvironmentChange) -> None:
        """Make the ``.env`` just read the process's environment (the shell's variables are
        never touched) and publish what is in use."""
        if change.changed:
            apply_environment(self.path, change)
            self.bot.environment_changed()
            logger.info(".env changed (%s): applied", ", ".join(change.changed))
        await self.publish_environment()

    async def publish_environment(self) -> None:
        """Write the environment in use for ``mindroom doctor`` (secrets only as hashes)."""
        if self.data_dir is None:
            return
        try:
            await asyncio.to_thread(write_running_environment, self.path, self.data_dir)
        except OSError:  # the doctor then compares nothing; the bot runs on
            logger.exception("writing the environment in use to %s failed", self.data_dir)

    async def _start_members(self, names: tuple[str, ...], new: Config) -> list[MatrixAccount]:
        """Log in every added member, or none: on a failure the started ones are closed."""
        started: list[MatrixAccount] = []
        name = ""
        try:
            async with asyncio.timeout(MEMBER_START_TIMEOUT_S):
                for name in names:
                    member = new.agents.get(name) or new.teams[name]
                    display = member.display_name or name.replace("_", " ").title()
                    started.append(await self.bot.start_member(name, display))
        except BaseException as exc:
            for account in started:
                try:
                    await account.close()
                except Exception:
                    logger.exception("closing the account of %s failed", account.name)
            if isinstance(exc, TimeoutError):
                raise MindroomError(
                    f"the account of {name} did not log in within {MEMBER_START_TIMEOUT_S:.0f} s"
                ) from exc
            if isinstance(exc, Exception):
                raise MindroomError(f"the account of {name} could not start: {exc}") from exc
            raise
        return started

    async def _finish(
        self, started: list[MatrixAccount], diff: ConfigDiff, old: Config, new: Config
    ) -> list[str]:
        """The steps after the switch; each failure is returned, the rest go on."""
        steps: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            *((f"adding {a.name}", partial(self.bot.add_member, a)) for a in started),
            *((f"updating {n}", partial(self._update_member, n, old, new)) for n in diff.changed),
            *(
                (f"removing {n}", partial(self.bot.remove_member, n))
                for n in diff.removed
                if not self.bot.leased
            ),
            ("preparing rooms", self.bot.prepare_rooms),
        ]
        problems = []
        for what, step in steps:
            try:
                await step()
            except Exception as exc:  # applied already: report, retry at the next reload
                logger.exception("config reload: %s failed", what)
                problems.append(f"{what} failed: {exc}")
        return problems

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
        """Reload on every change of the file, or of the ``.env`` beside it, until ``stop`` is
        set."""
        names = {self.path.name, ".env"}
        armed = False
        async for changes in awatch(
            self.path.parent,
            watch_filter=lambda _change, changed: Path(changed).name in names,
            debounce=DEBOUNCE_MS,
            stop_event=stop,
            recursive=False,
            rust_timeout=ARM_CHECK_MS,
            yield_on_timeout=True,
        ):
            if not changes and armed:
                continue
            # The first quiet wake-up comes once the watcher is armed: an edit saved between
            # reading the config at start and arming the watcher is applied then (a reload of
            # an unchanged file changes nothing).
            armed = True
            try:
                await self.reload()
            except Exception:  # the watcher's edge: log, keep watching
                logger.exception("applying the new config failed")

    def status_text(self) -> str:
        """``!config status``: the real state of the running config."""
        if self.error and self.invalid:
            return f"⚠️ The config file has an error; the running config stays:\n\n{self.error}"
        if self.error:
            return (
                f"⚠️ Reloading {self.path.name} failed; the change was not applied and the "
                f"previous config is still running ({self.applied} reloads applied):\n\n"
                f"{self.error}"
            )
        if self.problems:
            listed = "\n".join(f"- {problem}" for problem in self.problems)
            return (
                f"⚠️ Config {self.path.name} is applied ({self.applied} reloads), but some steps "
                f"failed:\n\n{listed}"
            )
        return f"Config {self.path.name} is valid and applied ({self.applied} reloads)."

    async def chat(self, argument: str, is_admin: bool) -> str:
        """Answer ``!config ...``."""
        action, _, rest = argument.strip().partition(" ")
        if action in ("", "status"):
            return self.status_text()
        if not is_admin:
            return "Only admins (authorization.admins) may read or change the config."
        try:
            if action == "get" and rest.strip():
                doc = await asyncio.to_thread(ConfigDocument, self.path)
                value = redact_config_value(rest.strip(), doc.get(rest.strip()))
                return f"`{rest.strip()}` = `{value}`"
            key, _, raw = rest.strip().partition(" ")
            if action == "set" and key and raw:
                written = await asyncio.to_thread(set_in_file, self.path, key, parse_value(raw))
                if not written:
                    return f"`{key}` already had that value."
                if await self.reload() is None:
                    return f"Set `{key}` in {self.path.name}, but:\n\n{self.status_text()}"
                return f"Set `{key}`; applied."
        except ConfigError as exc:  # invalid, or the file changed meanwhile: nothing was written
            return f"Refused: {exc}"
        return "Usage: `!config status`, `!config get KEY`, `!config set KEY VALUE`"


def start_only_changes(old: Config, new: Config) -> list[str]:
    """The settings that changed and apply only when mindroom starts (where its state lives,
    how it reaches the homeserver)."""
    pairs = {
        "storage.database": (old.storage.database, new.storage.database),
        "matrix.mode": (old.matrix.mode, new.matrix.mode),
        "matrix.appservice": (old.matrix.appservice, new.matrix.appservice),
    }
    return [key for key, (before, after) in pairs.items() if before != after]


def set_in_file(path: Path, key: str, value: object) -> bool:
    """Set ``key`` in the config file as ``mindroom config set`` does: load, edit and save
    under the config lock; refused (ConfigError) if someone else changed the file meanwhile."""
    with edit_config(path) as doc:
        doc.set(key, value)
        return doc.save()
