"""Questions put to one person, answered by a reaction: ✅ for yes, ❌ for no.

A *prompt* is a message mindroom posts to ask one person something (whether to store a
personal detail, whether to delete what they asked to forget). :meth:`PromptDesk.offer`
posts it and records it in the ledger (:mod:`mindroom.store.prompts`): its event, room and
account, the person who may answer, its ``kind`` and ``ref`` (what it is about). A reaction to
it arrives at :meth:`PromptDesk.on_reaction`; it answers the prompt when it is a yes or a no
(:func:`reaction_answer`) from that person or an admin (``authorization.admins``), and the
prompt was not answered before: then the handler of its kind (:data:`PROMPT_HANDLERS`) acts,
and the account replies to the prompt with what it did. Any other reaction, or anyone else's,
does nothing. A prompt is answered once, whatever reacts after.

A prompt is recorded once its message is sent (its event ID is known only then), so a quick
person's reaction can arrive before the record does. While a prompt is being posted in a room
(:meth:`PromptDesk.posting`), a reaction there to an event not known as a prompt waits for the
posting to finish (at most :data:`POSTING_WAIT_S`) and looks again. One heard in the posting's
own task (the account catching up before it sends the prompt) cannot be to it: it does not wait.

A new kind of question is one entry in :data:`PROMPT_HANDLERS`: a coroutine taking the bot
(:class:`PromptHost`), the prompt, the answer (True for yes) and who answered, and returning
the sentence to reply with. Its ``ref`` is whatever that handler needs to find what it asks
about again (after a restart too: the prompt is in the ledger).

It does not decide where a question is asked (:mod:`mindroom.pipeline.consent_offers` offers
consent proposals in a person's direct chat only), nor what a command answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.events import IncomingReaction
from mindroom.adapters.matrix.send import notice_content
from mindroom.authorization import is_authorized
from mindroom.config.schema import Config
from mindroom.errors import MatrixError
from mindroom.memory.jobs.consolidate.offers import answer_conflict
from mindroom.memory.policy.consent_chat import answer_offer
from mindroom.memory.registry import MemoryRegistry
from mindroom.people import memory_chat
from mindroom.people.erasure import ErasureGate
from mindroom.store.ledger import Ledger
from mindroom.store.prompts import Prompt
from mindroom.tasks import within

logger = logging.getLogger(__name__)

POSTING_WAIT_S = 10.0  # how long a reaction waits for a prompt still being posted in its room

YES = frozenset({"✅", "✔", "☑", "👍"})
NO = frozenset({"❌", "✖", "❎", "👎"})
# emoji presentation selectors and skin tones: "👍🏽" and "✔️" are the same answer as "👍", "✔"
_VARIANTS = re.compile("[\ufe0e\ufe0f\U0001f3fb-\U0001f3ff]")


def reaction_answer(key: str) -> bool | None:
    """True for a yes reaction, False for a no, None for any other (pure)."""
    bare = _VARIANTS.sub("", key).strip()
    if bare in YES:
        return True
    if bare in NO:
        return False
    return None


def may_answer(prompt: Prompt, sender: str, admins: Sequence[str]) -> bool:
    """Whether ``sender`` may answer ``prompt``: its person, or an admin (pure)."""
    return sender == prompt.person or is_authorized(sender, admins)


class PromptHost(Protocol):
    """What answering a prompt needs from the bot."""

    @property
    def config(self) -> Config:
        """The config in use."""
        ...

    @property
    def memories(self) -> MemoryRegistry:
        """The memories."""
        ...

    @property
    def ledger(self) -> Ledger:
        """The ledger (a handler's own control state may live there)."""
        ...

    def local_accounts(self) -> list[MatrixAccount]:
        """Every account this process runs."""
        ...


PromptHandler = Callable[[PromptHost, Prompt, bool, str], Awaitable[str]]
"""Answers one kind of prompt: ``(bot, prompt, yes, answered_by)`` -> what it did."""


async def answer_consent(host: PromptHost, prompt: Prompt, yes: bool, actor: str) -> str:
    """A consent proposal (``ref``: its ID, in the memory of the account that asked)
    confirmed or rejected, as ``!memory confirm`` / ``!memory reject`` would."""
    config, memories, account, person, ref = _asked(host, prompt)
    return await asyncio.to_thread(
        answer_offer, config, memories, account, person, ref, confirm=yes, actor=actor
    )


async def answer_conflict_prompt(host: PromptHost, prompt: Prompt, yes: bool, actor: str) -> str:
    """An open conflict (``ref``: its ID, in the memory of the account that asked) settled:
    yes keeps the newer entry, no keeps both."""
    config, memories, account, person, ref = _asked(host, prompt)
    return await asyncio.to_thread(
        answer_conflict, config, memories, account, person, ref, keep_newer=yes, actor=actor
    )


def _asked(host: PromptHost, prompt: Prompt) -> tuple[Config, MemoryRegistry, str, str, str]:
    """What a question about a memory names: the config, the memories, the account that
    asked, the person asked and the thing asked about (its ID)."""
    return host.config, host.memories, prompt.account, prompt.person, prompt.ref


async def answer_forget(host: PromptHost, prompt: Prompt, yes: bool, actor: str) -> str:
    """A ``!memory forget`` listing (the prompt's own message): yes deletes what it listed, as
    ``!memory forget confirm`` does; no drops the request (:mod:`mindroom.people.memory_chat`).
    The answer names no text: it is posted where the listing was."""
    forgets = host.ledger.forgets
    if not yes:
        return await memory_chat.cancel_forget(host.config, forgets, actor, prompt.event_id)
    return await memory_chat.confirm_forget(
        host.config, host.memories, forgets, actor, prompt.event_id, in_dm=False
    )


PROMPT_HANDLERS: dict[str, PromptHandler] = {
    "consent": answer_consent,
    "conflict": answer_conflict_prompt,
    "forget": answer_forget,
}
"""Every kind of prompt, and what answers it."""


def _txn(*parts: str) -> str:
    """A transaction ID for a send made once per ``parts`` (a retry is deduplicated)."""
    return "mindroom-prompt-" + hashlib.sha256("\0".join(parts).encode()).hexdigest()[:24]


class PromptDesk:
    """Posts prompts and answers reactions to them (see the module docstring)."""

    def __init__(
        self,
        host: PromptHost,
        ledger: Ledger,
        handlers: Mapping[str, PromptHandler] = PROMPT_HANDLERS,
        gate: ErasureGate | None = None,
    ) -> None:
        self._host = host
        self._ledger = ledger
        self._handlers = handlers
        # the bot's: an answer writes memory (a consent given), so it never runs beside a
        # forget-me (mindroom.people.erasure)
        self._gate = gate or ErasureGate()
        self._posting: Counter[str] = Counter()  # prompts being posted, by room
        self._posters: Counter[asyncio.Task[Any]] = Counter()  # the tasks posting them
        self._posted = asyncio.Event()  # set (and replaced) whenever a posting ends
        self.waiting = 0  # reactions waiting for a posting to end (tests read it)

    @contextlib.contextmanager
    def posting(self, room_id: str) -> Iterator[None]:
        """A prompt is being posted in ``room_id`` (sent, then recorded) in this block."""
        task = asyncio.current_task()
        self._posting[room_id] += 1
        if task is not None:
            self._posters[task] += 1
        try:
            yield
        finally:
            self._posting[room_id] -= 1
            if not self._posting[room_id]:
                del self._posting[room_id]
            if task is not None:
                self._posters[task] -= 1
                if not self._posters[task]:
                    del self._posters[task]
            self._posted.set()
            self._posted = asyncio.Event()

    async def _after_postings(self, room_id: str) -> None:
        """Return once no prompt is being posted in ``room_id``."""
        while self._posting.get(room_id):
            await self._posted.wait()

    async def offer(
        self, account: MatrixAccount, room_id: str, person: str, kind: str, ref: str, text: str
    ) -> str | None:
        """Ask ``person`` ``text`` in ``room_id`` from ``account``, about ``kind`` ``ref``,
        unless they were asked it before; the prompt's event ID, or None when not posted now.

        The caller chooses the room (a question about a person belongs in their direct chat).
        """
        if kind not in self._handlers:
            raise ValueError(f"no handler answers prompts of kind {kind!r}")
        if await self._ledger.prompts.offered(kind, ref, person) is not None:
            return None
        content = notice_content(text)
        with self.posting(room_id):
            event_id = await account.send(room_id, content, _txn(kind, ref, person))
            await self._ledger.prompts.add(event_id, room_id, account.name, person, kind, ref)
        logger.info("asked %s about %s %s in %s (%s)", person, kind, ref, room_id, event_id)
        return event_id

    async def on_reaction(self, account: MatrixAccount, reaction: IncomingReaction) -> None:
        """A reaction ``account`` heard: the answer to a prompt it posted, when it is one."""
        yes = reaction_answer(reaction.key)
        if yes is None:
            return  # it answers nothing (and never waits for the gate)
        async with self._gate.working():
            await self._answer(account, reaction, yes)

    async def _answer(self, account: MatrixAccount, reaction: IncomingReaction, yes: bool) -> None:
        """The yes or no ``reaction`` ``account`` heard: the answer to a prompt an account of
        this process posted, when it is one (answered from that account)."""
        prompt = await self._ledger.prompts.get(reaction.reacts_to)
        if (
            prompt is None
            and self._posting.get(reaction.room_id)
            and asyncio.current_task() not in self._posters
        ):
            # A quick reaction to a prompt sent but not recorded yet: look again after it.
            # Not in a posting's own task: there the posting account is catching up before
            # it sends (MatrixAccount._current), the prompt is not sent yet, and the wait
            # would be for itself.
            self.waiting += 1
            try:
                with contextlib.suppress(TimeoutError):
                    await within(self._after_postings(reaction.room_id), POSTING_WAIT_S)
            finally:
                self.waiting -= 1
            prompt = await self._ledger.prompts.get(reaction.reacts_to)
        if prompt is None or prompt.answer is not None:
            return  # not a question, or answered
        if prompt.account != account.name:
            # Another account's question: answered from that account when this process runs
            # it (a resting router hears the reaction only at its next poll); otherwise the
            # process that runs it hears the reaction too. Answered once either way.
            owner = [a for a in self._host.local_accounts() if a.name == prompt.account]
            if not owner:
                return
            account = owner[0]
        if not may_answer(prompt, reaction.sender, self._host.config.authorization.admins):
            logger.info("%s reacted to %s, which is not theirs to answer", reaction.sender, prompt)
            return
        handler = self._handlers.get(prompt.kind)
        if handler is None:
            logger.warning("no handler answers the %s prompt %s", prompt.kind, prompt.event_id)
            return
        if not await self._ledger.prompts.answer(prompt.event_id, yes, reaction.sender):
            return  # answered meanwhile (a second reaction, another process)
        try:
            said = await handler(self._host, prompt, yes, reaction.sender)
        except Exception as exc:
            logger.exception("answering the %s prompt %s failed", prompt.kind, prompt.event_id)
            said = f"That could not be done ({type(exc).__name__}); nothing was changed by it."
        content = notice_content(said, reply_to=prompt.event_id)
        try:
            await account.send(prompt.room_id, content, _txn("answer", prompt.event_id))
        except MatrixError as exc:
            logger.warning("the answer to prompt %s was not posted: %s", prompt.event_id, exc)
