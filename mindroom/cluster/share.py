"""This process's share of the accounts when several ``mindroom run`` share one database.

:class:`Cluster` decides which accounts this process runs (the leases of
:mod:`mindroom.cluster.leases`) and moves work with them; the bot starts and stops the accounts
(:class:`Members`). It runs only with ``storage.database``; alone on SQLite (or ``--local``),
a process runs every account and no lease is written. In appservice mode the processes share
the homeserver's transactions through the inbox (:mod:`mindroom.cluster.inbox`).

Which accounts a process wants:

* those it is pinned to (``mindroom run --agents a,b``), and the router;
* the accounts nobody is pinned to are shared by the live processes started without
  ``--agents``: each account's home is the one the hash of its name and theirs picks
  (rendezvous hashing, so a process coming or going moves only its share);
* as a stand-by, every other account whose home is not another live process (so the agents
  of a process that died move somewhere even when every process is pinned).

An account whose home is another live process is handed to it once this process has no
answer of it running. Every round (a third of ``storage.failover_seconds``) the process says it
is alive, renews its leases, stops the accounts whose lease it lost (its answers are left
claimed, for the new holder to resume), hands back and takes leases, and starts what it took.
Between rounds it takes the work queued for its accounts (:meth:`Leases.orphans`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any, Protocol

from mindroom.cluster.leases import Leases, Orphan
from mindroom.config.schema import ROUTER, Config
from mindroom.dashboard.metrics import METRICS
from mindroom.memory.flush.state import FlushEntry
from mindroom.store.ledger import Ledger

logger = logging.getLogger(__name__)

_POLL_S = 0.5  # how often queued work is looked for between rounds


class Members(Protocol):
    """What the cluster asks of the bot."""

    async def start_account(self, name: str) -> None:
        """Log in, sync and listen as ``name`` (its lease was just taken)."""

    async def stop_account(self, name: str) -> None:
        """Stop ``name`` here (its lease is gone): the messages it leads stay claimed, its
        other answers are handed over. Safe for an account not running."""

    async def remove_member(self, name: str) -> None:
        """``name`` left the config: end its answers, leave its rooms, stop its account."""

    def running(self) -> set[str]:
        """The accounts running here."""

    async def find_rooms(self) -> None:
        """Learn the IDs of configured rooms another process's router made since."""

    def busy(self, name: str) -> bool:
        """True while ``name`` answers, or leads a message being handled, here."""

    def take_over(
        self,
        key: str,
        lead: str | None,
        room_id: str,
        responders: tuple[str, ...],
        source: dict[str, Any],
    ) -> None:
        """Answer a row this process just took (a hand-over, or another owner's claim)."""


def new_owner_id() -> str:
    """A process's id in the leases: unique per run, readable in ``mindroom_data`` tables."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def home(name: str, owners: set[str]) -> str:
    """The process of ``owners`` that account ``name`` belongs to: the highest hash of the
    two names, the same in every process (a process leaving moves only its own accounts)."""
    return max(owners, key=lambda owner: hashlib.sha256(f"{owner}\n{name}".encode()).digest())


def flushed_by(entry: FlushEntry, config: Config) -> str:
    """The account whose process flushes a session: its agent or team, and for an ad hoc
    team the member that answered for it (the first in config order)."""
    if entry.agent in config.agents or entry.agent in config.teams:
        return entry.agent
    return next((m for m in config.agents if m in entry.team), ROUTER)


async def join_cluster(
    ledger: Ledger, config: Callable[[], Config], pins: tuple[str, ...], *, shared: bool = True
) -> tuple[Cluster | None, set[str]]:
    """The cluster of this process (None: alone) and the accounts it runs from the start:
    every account alone; with a shared database, those whose leases it took. Alone: on
    SQLite, or not ``shared`` (``--local``)."""
    current = config()
    if not (shared and ledger.shared):
        return None, {ROUTER, *current.agents, *current.teams}
    cluster = Cluster(ledger.leases(new_owner_id()), config, pins)
    ledger.owner = cluster.owner  # every claim of this process says it is this one's
    return cluster, await cluster.join()


class Cluster:
    """This process's leases, its rounds and its queue (see the module docstring)."""

    def __init__(self, leases: Leases, config: Callable[[], Config], pins: tuple[str, ...]) -> None:
        self.leases = leases
        self._config = config
        self.pins = pins
        self.held: set[str] = set()
        self.users: dict[str, str] = {}  # account -> Matrix user, as its processes noted
        self._members: Members | None = None  # set by serve(), once the bot is up
        self._keeper: asyncio.Task[None] | None = None
        self._renewed = time.monotonic()  # the last renewal that reached the database

    @property
    def owner(self) -> str:
        return self.leases.owner

    @property
    def ttl(self) -> float:
        """How long a lease lasts unrenewed: two rounds, so one late round loses nothing and
        a dead process's accounts move within ``failover_seconds``."""
        return self._config().storage.failover_seconds * 2 / 3

    @property
    def round_s(self) -> float:
        return self._config().storage.failover_seconds / 3

    @property
    def serving(self) -> bool:
        """True once the bot is up (a process holding no account is then a stand-by)."""
        return self._members is not None

    def runs(self, name: str) -> bool:
        """True when this process runs account ``name``."""
        return name in self.held

    def everyone(self) -> list[str]:
        """Every account of the current config, the router first."""
        config = self._config()
        return [ROUTER, *config.agents, *config.teams]

    async def join(self) -> set[str]:
        """Say this process is here, take the leases it wants and keep them from now on (a
        task of its own, which nothing else delays); returns what it took (the bot logs those
        in before listening)."""
        await self._heartbeat()
        for name in await self._wanted():
            if await self.leases.acquire(name, self.ttl):
                self.held.add(name)
        self._renewed = time.monotonic()
        self.users = await self.leases.accounts()
        self._keeper = asyncio.create_task(self._keep_forever(), name="leases-keep")
        self._gauge()
        logger.info(
            "this process (%s) runs %s",
            self.owner,
            ", ".join(sorted(self.held)) or "nothing yet: every account runs elsewhere (stand-by)",
        )
        return set(self.held)

    def serve(self, members: Members) -> None:
        """The bot is up: from now on rounds also take, give back and move work."""
        self._members = members

    async def _keep_forever(self) -> None:
        """Renew every third of ``failover_seconds``. A holder that could not renew for most
        of a lease's life stops its accounts before another process may take them: two
        processes never answer as one account for longer than a clock's error."""
        while True:
            await asyncio.sleep(self.round_s)
            await self.keep_once()

    async def keep_once(self) -> None:
        """One renewal; when the database stayed out of reach for three quarters of a
        lease, every account here is stopped (the leases are about to lapse)."""
        try:
            await self._keep()
        except Exception as exc:
            silent = time.monotonic() - self._renewed
            logger.warning("cannot renew the leases (%s), %.0f s since the last", exc, silent)
            if silent > self.ttl * 0.75 and self.held:
                logger.error("leases about to lapse: stopping %s here", ", ".join(self.held))
                await self._drop(set(self.held))

    async def _keep(self) -> None:
        await self._heartbeat()
        kept = await self.leases.renew(self.held, self.ttl)
        self._renewed = time.monotonic()
        lost = self.held - kept
        for name in sorted(lost):
            logger.warning("lost the lease of %s to another process: stopping it here", name)
            METRICS.lease_moved("lost")
        await self._drop(lost)

    async def _drop(self, names: set[str]) -> None:
        self.held -= names
        self._gauge()
        if self._members is not None:
            for name in sorted(names):
                await self._stop(name)

    async def _stop(self, name: str) -> None:
        assert self._members is not None
        try:
            await self._members.stop_account(name)
        except Exception:
            logger.exception("stopping %s failed", name)

    async def run(self) -> None:
        """Rounds and queue polls until cancelled (the leases are kept apart, see
        :meth:`join`); nothing is started or taken before :meth:`serve`."""
        next_round = time.monotonic() + self.round_s
        while True:
            try:
                if self._members is not None:
                    if time.monotonic() >= next_round:
                        next_round = time.monotonic() + self.round_s
                        await self.round()
                    await self.take_work()
            except asyncio.CancelledError:
                raise
            except Exception:  # the database went away for a moment: the next round retries
                logger.exception("lease round failed")
            await asyncio.sleep(_POLL_S)

    async def round(self) -> None:
        """Match what runs here to the leases: stop what is not held, drop what left the
        config, give back, take and start."""
        assert self._members is not None
        self.users = await self.leases.accounts()
        for name in sorted(self._members.running() - self.held):  # lost, or a start half-done
            await self._stop(name)
        for name in sorted(self.held - set(self.everyone())):
            logger.info("%s is no longer in the config: stopping it", name)
            self.held.discard(name)
            try:
                await self._members.remove_member(name)
            finally:
                await self.leases.release({name})
        elsewhere = await self._homes_elsewhere()
        for name in sorted(self.held & elsewhere):
            if name != ROUTER and not self._members.busy(name):
                logger.info("handing %s to its home process", name)
                self.held.discard(name)
                await self._stop(name)
                await self.leases.release({name})
        for name in await self._wanted(elsewhere):
            if name in self.held or not await self.leases.acquire(name, self.ttl):
                continue
            logger.info("took the lease of %s: starting it here", name)
            self.held.add(name)
            METRICS.lease_moved("taken")
            try:
                await self._members.start_account(name)
            except Exception:
                logger.exception("cannot start %s here; giving its lease back", name)
                self.held.discard(name)
                await self._stop(name)
                await self.leases.release({name})
        await self._members.find_rooms()
        self._gauge()

    async def take_work(self) -> int:
        """Take and answer the rows queued for (or left by another owner of) this process's
        accounts; returns how many."""
        assert self._members is not None
        newer_than = time.time() - self._config().matrix.catch_up_seconds
        taken = 0
        for orphan in await self.leases.orphans(set(self.held), newer_than):
            row = await self.leases.take(orphan)
            if row is None:
                continue
            taken += 1
            self._log_take(orphan)
            self._members.take_over(orphan.key, orphan.agent, *row)
        return taken

    async def stop_keeping(self) -> None:
        """Stop renewing (the bot is stopping: :meth:`leave` follows)."""
        if self._keeper is not None:
            self._keeper.cancel()
            await asyncio.gather(self._keeper, return_exceptions=True)
            self._keeper = None

    async def leave(self) -> None:
        """Give every lease up at a clean stop: the others take over at once."""
        await self.stop_keeping()
        with contextlib.suppress(Exception):
            await self.leases.leave(forget_before=time.time() - 10 * self.ttl)
        self.held.clear()
        self._gauge()

    async def _heartbeat(self) -> None:
        await self.leases.heartbeat(self.pins, socket.gethostname(), os.getpid())

    async def _homes_elsewhere(self) -> set[str]:
        """Accounts whose home is another live process: one pinned to them (this one is not),
        or, for an account nobody is pinned to, the process without pins its hash picks."""
        alive = await self.leases.processes(seen_after=time.time() - self.ttl)
        elsewhere = {n for p in alive if p.owner != self.owner for n in p.pins} - set(self.pins)
        sharers = {p.owner for p in alive if not p.pins} | (set() if self.pins else {self.owner})
        pinned = elsewhere | set(self.pins)
        shared = [n for n in self.everyone() if n != ROUTER and n not in pinned] if sharers else []
        return elsewhere | {n for n in shared if home(n, sharers) != self.owner}

    async def _wanted(self, elsewhere: set[str] | None = None) -> list[str]:
        if elsewhere is None:
            elsewhere = await self._homes_elsewhere()
        mine = [n for n in self.everyone() if n in self.pins or n == ROUTER]
        standby = [n for n in self.everyone() if n not in mine and n not in elsewhere]
        return mine + standby

    def _gauge(self) -> None:
        METRICS.set_leases(len(self.held))

    def _log_take(self, orphan: Orphan) -> None:
        if orphan.status == "queued":
            logger.info("answering %s, handed over to this process", orphan.key)
        else:
            logger.info(
                "resuming %s, left unfinished by %s", orphan.key, orphan.owner or "an earlier run"
            )
