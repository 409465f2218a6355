"""Consent proposals and open conflicts offered to their person, in their direct chat,
answered by a reaction.

A fact about a person that needs their consent waits as a proposal
(:mod:`mindroom.memory.policy.consent`). :class:`ConsentOffers` finds, for each agent this
process runs, the direct chats it has with one person (a closed room of that person and
mindroom's accounts alone: :meth:`MatrixAccount.only_with`, the one check for what is meant
for one person), and offers there every pending proposal of that agent's memory about that
person, one message each (:func:`~mindroom.memory.policy.consent_chat.offer_text`), once
(:class:`~mindroom.pipeline.prompts.PromptDesk` records it). A ✅ confirms and a ❌ rejects
it, as ``!memory confirm ID`` / ``!memory reject ID`` do. The open conflicts consolidation
recorded about that person are offered the same way
(:mod:`mindroom.memory.jobs.consolidate.offers`): ✅ keeps the newer entry, ❌ keeps both.

Never in a group room: a proposal names a personal detail. A person with no direct chat with
the agent is not offered it (mindroom opens no room by itself); ``!memory pending`` in any
direct chat with mindroom lists it, and the commands answer it anywhere.

It looks after every handled message (a turn may have filed a proposal: :meth:`wake`) and
every :data:`OFFER_EVERY_S` seconds (the memory flush, the CLI and the dashboard file them
too, and a direct chat may have been opened since); each time only in the memories whose
proposals or consolidation records changed since they were last offered (:class:`Looks`), so
a turn in Alice's direct chat opens none of the other people's private memories.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.config.schema import Config
from mindroom.errors import MatrixError
from mindroom.memory.jobs.consolidate.offers import conflicts_to_offer
from mindroom.memory.jobs.consolidate.records import db_path as records_db
from mindroom.memory.policy.consent import Person
from mindroom.memory.policy.consent import db_path as proposals_db
from mindroom.memory.policy.consent_chat import offer_text, proposals_to_offer
from mindroom.memory.registry import MemoryRegistry
from mindroom.people.erasure import ErasureGate
from mindroom.pipeline.prompts import PromptDesk
from mindroom.tasks import within

logger = logging.getLogger(__name__)

OFFER_EVERY_S = 60.0
CONSENT = "consent"  # the prompts' kinds (mindroom.pipeline.prompts.PROMPT_HANDLERS)
CONFLICT = "conflict"
RACY_NS = 2_000_000_000  # a file written this recently may change again within its time's grain

Stamp = tuple[tuple[int, int, int] | None, ...]


def records_stamp(state_dir: Path) -> Stamp:
    """The files a scope keeps its proposals and consolidation records in (each with its
    write-ahead log) as ``(mtime, size, inode)``; None for one that is missing."""
    found: list[tuple[int, int, int] | None] = []
    for db in (proposals_db(state_dir), records_db(state_dir)):
        for path in (db, db.with_name(db.name + "-wal")):
            try:
                stat = path.stat()
            except FileNotFoundError:
                found.append(None)
                continue
            found.append((stat.st_mtime_ns, stat.st_size, stat.st_ino))
    return tuple(found)


@dataclass(frozen=True)
class Waiting:
    """What waits for ``who`` in ``agent``'s memory: ``(kind, ref, text)`` of each question."""

    agent: str
    who: Person
    questions: list[tuple[str, str, str]]
    seen: tuple[object, ...] | None  # remembered once all are offered (None: look again)


class Looks:
    """What waits for each person (proposals, open conflicts) in an agent's memory as they
    reach it, looked at again only when the files it is kept in changed since a look whose
    questions were all offered, or the person's display name did: a memory where nothing was
    filed since is not opened. A file written in the last :data:`RACY_NS` is looked at again
    next time (a write within its time's grain would not show)."""

    def __init__(self, racy_ns: int = RACY_NS) -> None:
        self._racy_ns = racy_ns
        self._seen: dict[tuple[str, str], tuple[object, ...]] = {}

    def waiting(
        self, config: Config, memories: MemoryRegistry, agent: str, who: Person
    ) -> Waiting | None:
        """The questions for ``who`` in ``agent``'s memory; None when nothing changed since
        they were offered, or nothing was ever filed there (blocking)."""
        if agent not in config.agents:  # a team keeps no memory of its own
            return None
        state = memories.state_dir_of(agent, who.user_id)
        if state is None:
            return None
        stamp = records_stamp(state)
        if all(part is None for part in stamp):  # nothing filed there, ever
            return None
        seen = (state, who.name, stamp)
        if self._seen.get((agent, who.user_id)) == seen:
            return None
        proposals = proposals_to_offer(config, memories, agent, who.user_id)
        questions = [(CONSENT, p.id, offer_text(p)) for p in proposals]
        conflicts = conflicts_to_offer(config, memories, agent, who)
        questions += [(CONFLICT, c.id, text) for c, text in conflicts]
        now = time.time_ns()
        racy = any(part is not None and now - part[0] < self._racy_ns for part in stamp)
        return Waiting(agent, who, questions, None if racy else seen)

    def offered(self, waiting: Waiting) -> None:
        """Every question of ``waiting`` was offered (now or before): not looked at again
        until its files change."""
        if waiting.seen is not None:
            self._seen[(waiting.agent, waiting.who.user_id)] = waiting.seen


class OfferHost(Protocol):
    """What offering proposals needs from the bot."""

    @property
    def config(self) -> Config:
        """The config in use."""
        ...

    @property
    def memories(self) -> MemoryRegistry:
        """The memories."""
        ...

    @property
    def agents(self) -> Mapping[str, MatrixAccount]:
        """The running account of each agent and team, by name."""
        ...

    def own_user_ids(self) -> set[str]:
        """Every account mindroom runs, in any process."""
        ...

    def room_humans(self, room_id: str) -> frozenset[str]:
        """The people joined to ``room_id``."""
        ...

    def display_name(self, room_id: str, user_id: str) -> str | None:
        """``user_id``'s display name in ``room_id``."""
        ...


class ConsentOffers:
    """Offers each pending proposal about a person in their direct chat with its agent."""

    def __init__(self, host: OfferHost, desk: PromptDesk, gate: ErasureGate | None = None) -> None:
        self._host = host
        self._desk = desk
        # the bot's: an offer reads a person's proposals and files a prompt naming them
        self._gate = gate or ErasureGate()
        self._wake = asyncio.Event()
        self.looks = Looks()

    def wake(self) -> None:
        """Look soon (a turn just ended: it may have filed a proposal)."""
        self._wake.set()

    async def run(self) -> None:
        """Offer what waits, now and after each :meth:`wake` or :data:`OFFER_EVERY_S`."""
        while True:
            try:
                async with self._gate.working():
                    await self.offer_all()
            except Exception:  # the loop's edge: the next round tries again
                logger.exception("offering consent proposals failed")
            with contextlib.suppress(TimeoutError):
                await within(self._wake.wait(), OFFER_EVERY_S)
            self._wake.clear()

    def direct_chats(self) -> list[tuple[str, MatrixAccount, str, str]]:
        """``(agent, account, room, person)`` for each direct chat of an agent this process
        runs with one person."""
        host = self._host
        own = host.own_user_ids()
        found = []
        for name, account in list(host.agents.items()):
            if name not in host.config.agents:  # a team keeps no memory of its own
                continue
            for room_id in sorted(account.joined_rooms()):
                people = host.room_humans(room_id)
                if len(people) != 1:
                    continue
                [person] = people
                if account.only_with(room_id, person, own):
                    found.append((name, account, room_id, person))
        return found

    async def offer_all(self) -> int:
        """Offer every pending proposal and open conflict not offered yet; how many were
        posted."""
        host, posted = self._host, 0
        for agent, account, room_id, person in self.direct_chats():
            who = Person(person, host.display_name(room_id, person))
            waiting = await asyncio.to_thread(
                self.looks.waiting, host.config, host.memories, agent, who
            )
            if waiting is None:
                continue
            failed = False
            for kind, ref, text in waiting.questions:
                try:
                    sent = await self._desk.offer(account, room_id, person, kind, ref, text)
                except MatrixError as exc:
                    logger.warning("cannot offer %s %s in %s: %s", kind, ref, room_id, exc)
                    failed = True
                    continue
                posted += sent is not None
            if not failed:
                self.looks.offered(waiting)
        return posted
