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
too, and a direct chat may have been opened since).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Protocol

from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.config.schema import Config
from mindroom.errors import MatrixError
from mindroom.memory.jobs.consolidate.offers import conflicts_to_offer
from mindroom.memory.policy.consent import Person
from mindroom.memory.policy.consent_chat import offer_text, proposals_to_offer
from mindroom.memory.registry import MemoryRegistry
from mindroom.pipeline.prompts import PromptDesk

logger = logging.getLogger(__name__)

OFFER_EVERY_S = 60.0
CONSENT = "consent"  # the prompts' kinds (mindroom.pipeline.prompts.PROMPT_HANDLERS)
CONFLICT = "conflict"


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

    def __init__(self, host: OfferHost, desk: PromptDesk) -> None:
        self._host = host
        self._desk = desk
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """Look soon (a turn just ended: it may have filed a proposal)."""
        self._wake.set()

    async def run(self) -> None:
        """Offer what waits, now and after each :meth:`wake` or :data:`OFFER_EVERY_S`."""
        while True:
            try:
                await self.offer_all()
            except Exception:  # the loop's edge: the next round tries again
                logger.exception("offering consent proposals failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), OFFER_EVERY_S)
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
            waiting = await asyncio.to_thread(
                proposals_to_offer, host.config, host.memories, agent, person
            )
            questions = [(CONSENT, p.id, offer_text(p)) for p in waiting]
            who = Person(person, host.display_name(room_id, person))
            conflicts = await asyncio.to_thread(
                conflicts_to_offer, host.config, host.memories, agent, who
            )
            questions += [(CONFLICT, c.id, text) for c, text in conflicts]
            for kind, ref, text in questions:
                try:
                    sent = await self._desk.offer(account, room_id, person, kind, ref, text)
                except MatrixError as exc:
                    logger.warning("cannot offer %s %s in %s: %s", kind, ref, room_id, exc)
                    continue
                posted += sent is not None
        return posted
