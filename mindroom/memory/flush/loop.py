"""The background memory flush: finished conversations become durable memory, silently.

:class:`FlushWorker` is owned by the bot (and made for one run by ``mindroom memory flush``).
A finished turn marks its session dirty (and wakes the worker); a new prompt boosts the agent's
other dirty sessions. Every ``flush_interval_seconds``, or when woken, the worker picks eligible
sessions (:mod:`mindroom.memory.flush.state`), reads what they said since the last flush, runs
the silent extraction turn on the agent's own model (both through the :class:`ExtractionTurns`
it is handed: memory does not import the model adapters) and appends each new fact to
today's daily file of the right scope (agent, private requester or team), with actor ``flush``
in the history. For a session with a requester (a private companion, a team) only that
person's turns are read, so one person's words never land in another's memory.

The control state is a table of the ledger (``mindroom_data/ledger.db``). Before extracting a
session the worker claims it with one atomic ``UPDATE ... WHERE in_flight = 0``: the bot's
worker, compaction and the CLI (another process) never extract the same chunk twice, and none
of them can undo another's progress. A claim records its process (pid, boot id) and time; one
left by a dead process is cleared when a worker opens the ledger and once it is older than a
bound. The cursor advances only past facts that were stored: a failure, a timeout or an answer
with no readable fact backs off and retries the same chunk (extraction skips facts already in
the file, so a retry adds nothing twice). A message that states a fact deleted from the scope
(:mod:`mindroom.memory.files.tombstones`) is left out of the extraction and the insight pass: a
fact deleted before the flush reached its conversation is not learned again.

A scope on the mem0 backend is extracted by mem0 itself (its own prompt and model call,
:meth:`~mindroom.memory.mem0.Mem0Memory.extract_sync`), after every turn and at once: its
sessions are marked boosted, and regardless of ``auto_flush.enabled`` (the file backend's
switch); the claim, cursor, requester filter and back-off are the same. Curation is file-only.

It never touches Matrix and a reply never waits for it: the loop is its own task, and before
each session it lets running replies go first for at most :data:`YIELD_TO_REPLIES_SECONDS`, so a
bot that is always busy still flushes. Compaction does not extract either: :meth:`flush_now`
only marks the session to be flushed first (see :mod:`mindroom.sessions.compaction`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from mindroom.config.schema import Config
from mindroom.errors import MemoryAccessError
from mindroom.memory.backend import MemoryBackend, in_engine, keeps_files
from mindroom.memory.bounded import Threads
from mindroom.memory.extraction import ChatLine, next_chunk
from mindroom.memory.files.facts import (
    chunk_people,
    known_snippets,
    store_facts,
    the_person,
    writable_categories,
)
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.store import FileMemory, today
from mindroom.memory.files.tombstones import deleted_from, states_deleted_fact
from mindroom.memory.flush.state import (
    LEGACY_STATE_FILE,
    FlushClaim,
    FlushEntry,
    backoff,
    boost_others,
    boot_id,
    choose_batch,
    claim_is_dead,
    extracted_by_mem0,
    flush_model,
    is_stale,
    load_legacy_state,
    uses_mem0,
)
from mindroom.memory.flush.told import heard_by
from mindroom.memory.jobs.insights import after_flush
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.audience import AudienceBook, narrower
from mindroom.memory.policy.consent import KEPT, ConsentPending, WriteConsent
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.policy.view import AgentView
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.search.relations import RelationSettings
from mindroom.people.erasure import ErasureGate
from mindroom.store.ledger import Ledger, ledger_target
from mindroom.tasks import within

logger = logging.getLogger(__name__)

YIELD_TO_REPLIES_SECONDS = 2.0  # the longest a flush waits for running replies to finish
# the longest closing waits for a mem0 extraction's thread (its model call is bounded by the
# client's timeout_seconds, default 60): mem0's store must not be closed under it
DRAIN_SECONDS = 60.0


async def migrate_legacy_state(ledger: Ledger, data_dir: Path) -> None:
    """Move ``memory_flush_state.json`` of earlier versions into the ledger once (it is then
    renamed ``.migrated``), so an upgrade loses no cursor, failure count or dirty mark."""
    legacy = data_dir / LEGACY_STATE_FILE
    if not await asyncio.to_thread(legacy.exists):
        return
    entries, passes = await asyncio.to_thread(load_legacy_state, legacy)
    added = await ledger.flush.import_state(entries, passes)
    with contextlib.suppress(FileNotFoundError):  # another process moved it first
        await asyncio.to_thread(legacy.replace, legacy.with_name(legacy.name + ".migrated"))
    logger.info("moved %d flush entries from %s into the ledger", added, legacy.name)


async def read_flush_state(data_dir: Path, database: str | None = None) -> list[FlushEntry]:
    """Every flush entry of the ledger (``storage.database``, else ``data_dir``'s file)."""
    ledger = await Ledger.open(ledger_target(database, data_dir))
    try:
        await migrate_legacy_state(ledger, data_dir)
        return await ledger.flush.entries()
    finally:
        await ledger.close()


class ExtractionTurns(Protocol):
    """The model side of the flush, handed in by whoever builds the worker (the bot, the CLI):
    :class:`mindroom.adapters.agno.runner.AgentRuntime` provides it. Memory does not import the
    model adapters."""

    async def wait_idle(self) -> None:
        """Return once no conversational turn is running: replies go first."""

    async def session_chat(
        self, owner: str, session_id: str, requester: str | None, team: bool
    ) -> tuple[list[Any], float]:
        """The chat lines (:class:`~mindroom.memory.extraction.ChatLine`) of a session of
        agent (or team) ``owner``, and its ``updated_at``."""
        ...

    async def extract(
        self,
        model_key: str,
        lines: list[Any],
        known: list[str],
        *,
        token: str,
        max_chars: int,
        categories: Sequence[str] = ("general",),
    ) -> list[str]:
        """The durable facts in ``lines`` (from :meth:`session_chat`), by model ``model_key``."""
        ...

    async def curate(
        self, model_key: str, daily: list[str], long_term: list[str], *, limit: int, token: str
    ) -> list[str]:
        """Facts from daily notes to promote into MEMORY.md."""
        ...


@dataclass(frozen=True)
class FlushResult:
    """What one session's flush did."""

    entry: FlushEntry
    written: tuple[str, ...]
    messages: int
    error: str | None = None


class FlushWorker:
    """Claims dirty sessions in the ledger, extracts them, and runs the loop."""

    def __init__(
        self,
        config: Config,
        runtime: ExtractionTurns,
        memories: MemoryRegistry,
        data_dir: Path,
        gate: ErasureGate | None = None,
    ) -> None:
        self.config = config
        self.runtime = runtime
        # the bot's: a forget-me waits for a flush in progress, and a flush for a forget-me
        self.gate = gate or ErasureGate()
        self.memories = memories
        self.data_dir = data_dir
        self._ledger: Ledger | None = None
        self._opening = asyncio.Lock()
        self._closed = False
        self._users = 0  # statements running on the shared connection
        self._unused = asyncio.Event()
        self._unused.set()
        self._boot = boot_id()
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        # mem0 extractions: they outlive a timeout or a cancel (and a forget-me waits for them)
        self._threads = Threads(on_start=self.gate.track)
        self.on_cycle: Callable[[], object] | None = None  # after each loop cycle (maintenance)
        self.owns: Callable[[FlushEntry], bool] = lambda entry: True  # this process's accounts
        # who can read a session's room now (session id, requester; None: not known here,
        # e.g. the CLI): the audience of what its flush writes and of what the extraction sees
        self.audience: Callable[[str, str | None], RoomAudience | None] = lambda s, r: None

    @property
    def settings(self):  # noqa: ANN201 - AutoFlushConfig, looked up live (hot reload)
        return self.config.memory.auto_flush

    # -- the ledger ---------------------------------------------------------------------------

    def _ledger_target(self) -> Path | str:
        return ledger_target(self.config.storage.database, self.data_dir)

    async def _open(self) -> Ledger:
        async with self._opening:
            if self._ledger is None:
                ledger = await Ledger.open(self._ledger_target())
                await migrate_legacy_state(ledger, self.data_dir)
                await self._recover(ledger)
                self._ledger = ledger
            return self._ledger

    @contextlib.asynccontextmanager
    async def _state(self) -> AsyncIterator[Ledger]:
        """The ledger; after :meth:`aclose` (a reply finishing during shutdown) a short-lived
        connection, so a late mark is still saved and no connection is left open."""
        if not self._closed:
            ledger = await self._open()
            self._users += 1
            self._unused.clear()
            try:
                yield ledger
            finally:
                self._users -= 1
                if not self._users:
                    self._unused.set()
            return
        ledger = await Ledger.open(self._ledger_target())
        try:
            yield ledger
        finally:
            await ledger.close()

    async def aclose(self) -> None:
        """Wait for a running mem0 extraction (bounded), then close the ledger connection
        (later calls use short-lived ones)."""
        self._closed = True
        if self._threads.busy():
            logger.info("waiting for a running memory extraction to finish before closing")
            if not await self._threads.drain(DRAIN_SECONDS):
                logger.warning("a memory extraction still runs after %.0f s", DRAIN_SECONDS)
        await self._unused.wait()  # a mark being written (one statement) finishes first
        async with self._opening:
            if self._ledger is not None:
                await self._ledger.close()
                self._ledger = None

    def _claim_ttl(self) -> float:
        """How long a claim may live: well past the extraction timeout plus the writes."""
        return 2 * self.settings.extractor.max_extraction_seconds + 120

    async def _recover(self, ledger: Ledger) -> None:
        """Clear claims whose process is gone (a crash) or that outlived their bound."""
        now = time.time()
        for key, claim in await ledger.flush.claims():
            dead = claim_is_dead(
                claim,
                now,
                boot=self._boot,
                max_age=self._claim_ttl(),
                shared=self.config.storage.database is not None,
            )
            if dead and await ledger.flush.clear_claim(key, claim.claim_id):
                logger.info("cleared a flush claim of %s left by process %d", key, claim.pid)

    async def entries(self, agent: str | None = None) -> list[FlushEntry]:
        """The flush state: every session (of one agent or team) the ledger tracks."""
        async with self._state() as ledger:
            return await ledger.flush.entries(agent)

    async def entry(self, key: str) -> FlushEntry | None:
        """One session's flush state, by :attr:`FlushEntry.key`."""
        async with self._state() as ledger:
            return await ledger.flush.entry(key)

    # -- marks from the reply path (one small ledger write, never an extraction) ---------------

    async def turn_finished(
        self,
        owner: str,
        session_id: str,
        requester: str | None,
        team: tuple[str, ...] = (),
        room: RoomAudience | None = None,
    ) -> None:
        """A turn of ``owner`` in ``session_id`` finished, in ``room`` (who could read it):
        the session is dirty (on mem0: and boosted, so mem0 extracts it at once, whether or
        not ``auto_flush`` is enabled), and its record of who could read it narrowed."""
        entry = FlushEntry(owner, session_id, requester, tuple(team))
        mem0 = extracted_by_mem0(self.config, entry)
        if not self.settings.enabled and not mem0:
            return
        async with self._state() as ledger:
            await ledger.flush.mark_dirty(entry, time.time(), boost=mem0, room=room)
        self._wake.set()

    async def prompted(self, owner: str, session_id: str) -> None:
        """A new prompt for ``owner``: flush its other dirty sessions soon."""
        if not self.settings.enabled:
            return
        async with self._state() as ledger:
            boosted = boost_others(
                await ledger.flush.entries(owner),
                owner,
                session_id,
                self.settings.max_cross_session_reprioritize,
            )
            if boosted and await ledger.flush.boost([e.key for e in boosted]):
                self._wake.set()

    async def flush_now(self, owner: str, session_id: str, requester: str | None) -> int:
        """Have everything not yet flushed of one session extracted next, in the background.

        Used before a compaction: the compacted session stays in Agno's store, unchanged, and
        its entry is dirty and boosted until the worker has extracted all of it, so no fact is
        lost, and the reply that compacts does not wait. Returns the facts written before
        returning: always 0 (kept for callers that log it).
        """
        async with self._state() as ledger:
            entry = FlushEntry(owner, session_id, requester)
            await ledger.flush.mark_dirty(entry, time.time(), boost=True)
        self._wake.set()
        return 0

    # -- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Flush every interval or when woken, until :meth:`stop`."""
        self._closed = False
        self._wake.set()  # a first cycle at once: sessions left dirty by the previous run
        try:
            while not self._stop.is_set():
                with contextlib.suppress(TimeoutError):
                    await within(self._wake.wait(), self.settings.flush_interval_seconds)
                self._wake.clear()
                if self._stop.is_set() or not (self.settings.enabled or uses_mem0(self.config)):
                    continue
                try:
                    await self.cycle()
                    # sessions waiting only for their idle time: look again when the first is due
                    await self._schedule_next()
                    if self.on_cycle is not None:
                        self.on_cycle()
                except Exception:  # the loop's edge: log and go on
                    logger.exception("memory flush cycle failed")
        finally:
            await self.aclose()

    async def _schedule_next(self) -> None:
        now = time.time()
        due = [
            e.next_attempt_at
            if e.boosted
            else max(e.last_seen_at + self.settings.idle_seconds, e.next_attempt_at)
            for e in self._handled(await self.entries())
            if e.dirty and not e.in_flight
        ]
        if due:
            delay = max(0.05, min(due) - now)
            asyncio.get_running_loop().call_later(delay, self._wake.set)

    def _handled(self, entries: list[FlushEntry]) -> list[FlushEntry]:
        """The entries the loop flushes: this process's, with ``auto_flush`` off mem0's."""
        mine = [e for e in entries if self.owns(e)]
        if self.settings.enabled:
            return mine
        return [e for e in mine if extracted_by_mem0(self.config, e)]

    def stop(self) -> None:
        """End :meth:`run` at its next wake-up."""
        self._stop.set()
        self._wake.set()

    async def _yield_to_replies(self) -> None:
        """Let running replies go first, for a bounded time: a busy bot must still flush."""
        with contextlib.suppress(TimeoutError):
            await within(self.runtime.wait_idle(), YIELD_TO_REPLIES_SECONDS)

    async def cycle(
        self, *, force: bool = False, agent: str | None = None, leave_mem0: bool = False
    ) -> list[FlushResult]:
        """One flush cycle; ``force`` ignores idle times and cooldowns (the CLI's flush).

        Sessions another process is extracting right now are left to it; ``leave_mem0``
        leaves every mem0 session too (the CLI beside a running bot: mem0's local store takes
        writes from one process only, and the bot extracts them itself).
        """
        now = time.time()
        async with self._state() as ledger:
            await self._recover(ledger)
            entries = await ledger.flush.entries(agent)
            stale = [e for e in entries if is_stale(e, now, self.settings)]
            if stale:
                await ledger.flush.forget(stale)
        if leave_mem0:
            entries = [e for e in entries if not extracted_by_mem0(self.config, e)]
        if force:
            batch = [e for e in entries if e.dirty and not e.in_flight]
        else:
            batch = choose_batch(self._handled(entries), now, self.settings)
        results = []
        for entry in batch:
            await self._yield_to_replies()
            async with self.gate.working():
                result = await self.flush_session(entry)
            if result is not None:
                results.append(result)
        if self.settings.curation.enabled:
            for entry in {r.entry.key: r.entry for r in results if r.written}.values():
                await self._yield_to_replies()
                async with self.gate.working():
                    await self.curate(entry)
        return results

    async def curate(self, entry: FlushEntry) -> list[str]:
        """Promote durable facts from the daily files into MEMORY.md (append-only, capped)."""
        memory = await asyncio.to_thread(self._memory, entry)
        curation = self.settings.curation
        if not keeps_files(memory):  # mem0 keeps its own memories: no curation
            return []
        async with self._state() as ledger:
            allowed = await ledger.curation.take_pass(
                memory.scope_id, today(), curation.max_passes_per_day
            )
        if not allowed:
            return []
        view = AgentView(
            memory, CategoryAccess.for_owner(self.config, entry.agent, entry.team or None)
        )  # curation sees what the agent may
        entries = await view.list(500)
        dailies = [e for e in entries if e.path.startswith("memory/")][:200]
        daily = [e.text for e in dailies]
        long_term = [e.text for e in entries if e.path == "MEMORY.md"]
        # a promoted copy keeps its source's audience; the model's own words, shown every
        # daily fact, are kept only where all of them could be shown
        book = AudienceBook(memory.scope.state_dir)
        sources = {" ".join(e.text.split()).casefold(): e.fields.audience for e in dailies}
        together = await asyncio.to_thread(narrower, list(sources.values()), book)
        if not daily:
            return []
        try:
            facts = await within(
                self.runtime.curate(
                    flush_model(self.config, entry),
                    daily,
                    long_term,
                    limit=curation.max_lines_per_pass,
                    token=self.settings.extractor.no_reply_token,
                ),
                self.settings.extractor.max_extraction_seconds,
            )
        except Exception as exc:  # curation is best effort; the next day tries again
            logger.warning("curating %s failed: %s", memory.scope_id, exc)
            return []
        promoted = []
        stored = {" ".join(text.split()).casefold() for text in daily}
        for fact in facts:
            # a copy of a daily fact adds nothing new; other words are the model's own
            normal = " ".join(fact.split()).casefold()
            copied = normal in stored
            consent = KEPT if copied else WriteConsent.model()
            audience = sources[normal] if copied else together
            try:
                added = await asyncio.to_thread(
                    partial(
                        view.append_unique_sync,
                        consent=consent,
                        fields=EntryFields(audience=audience),
                    ),
                    fact,
                    actor="curation",
                    path="MEMORY.md",
                )
            except ConsentPending as held:
                logger.info("curating %s: %s", memory.scope_id, held)
                continue
            except MemoryAccessError as exc:  # its allowlist lacks the default category
                logger.warning("curating %s: %s", memory.scope_id, exc)
                break
            if added is not None:
                promoted.append(added.text)
        if promoted:
            logger.info("curation promoted %d facts into %s", len(promoted), memory.scope_id)
        return promoted

    def _room(self, claimed: FlushEntry, chunk: Sequence[ChatLine]) -> RoomAudience:
        """Who could read the conversation being flushed: its room as the bot sees it now,
        narrowed to the readers it had at every turn (:mod:`mindroom.memory.flush.told`: a
        room someone joined since never widens it); else (the CLI's flush, a room left) a
        closed room of the people who spoke in the chunk, the narrowest it can have been (what
        is learned from it is recalled only where all of them, and nobody else, read)."""
        room = self.audience(claimed.session_id, claimed.requester)
        if room is not None:
            return heard_by(claimed.told, room)
        speakers = frozenset(line.user_id for line in chunk if line.role == "user" and line.user_id)
        if len(speakers) == 1:
            return RoomAudience.private_to(next(iter(speakers)))
        return RoomAudience.shared(speakers, closed=True)

    def _memory(self, entry: FlushEntry) -> MemoryBackend | None:
        if entry.team:
            return self.memories.for_team(list(entry.team), entry.requester)
        if entry.agent in self.config.agents:
            return self.memories.for_agent(entry.agent, entry.requester)
        return None

    async def flush_session(self, entry: FlushEntry) -> FlushResult | None:
        """Claim one session and extract its next chunk into memory.

        None when the session is clean or another worker or process holds it.
        """
        claim = FlushClaim(uuid.uuid4().hex, os.getpid(), self._boot, time.time())
        async with self._state() as ledger:
            claimed = await ledger.flush.claim(entry.key, claim)
        if claimed is None:
            return None
        try:
            return await self._extract(claimed, claim.claim_id)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):  # free it for the next run at once
                async with self._state() as ledger:
                    await ledger.flush.clear_claim(claimed.key, claim.claim_id)
            raise
        except Exception as exc:  # timeouts, model failures, unreadable answers back off
            failed = backoff(claimed, time.time(), self.settings)
            async with self._state() as ledger:
                await ledger.flush.back_off(failed, claim.claim_id)
            reason = (
                "timed out" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
            )
            logger.warning(
                "flushing a %s session failed (%s); retrying later", claimed.agent, reason
            )
            return FlushResult(failed, (), 0, reason)

    async def _extract(self, claimed: FlushEntry, claim_id: str) -> FlushResult:
        settings = self.settings.extractor
        memory = await asyncio.to_thread(self._memory, claimed)  # may open or scaffold files
        lines, updated_at = await self.runtime.session_chat(
            claimed.agent, claimed.session_id, claimed.requester, bool(claimed.team)
        )
        chunk, cursor = next_chunk(
            lines,
            claimed.cursor,
            claimed.requester,
            max_messages=settings.max_messages_per_flush,
            max_chars=settings.max_chars_per_flush,
        )
        written: list[str] = []
        if memory is None:
            cursor = claimed.cursor  # nowhere to write: keep the place for a later memory
        elif chunk:
            written = await self._write_facts(memory, claimed, chunk)
        more = memory is not None and cursor < len(lines)
        async with self._state() as ledger:
            done = await ledger.flush.finish(claimed, claim_id, cursor, more, updated_at)
        if done is None:  # the claim outlived its bound and was cleared; the next run redoes it
            logger.warning("a flush of a %s session outlived its claim", claimed.agent)
            return FlushResult(claimed, tuple(written), len(chunk), "claim expired")
        if chunk:
            logger.info(
                "flushed %d messages of a %s session: %d new facts%s",
                len(chunk),
                claimed.agent,
                len(written),
                " (more to go)" if done.dirty else "",
            )
        if done.dirty:
            self._wake.set()
        return FlushResult(done, tuple(written), len(chunk))

    async def _write_facts(
        self, memory: MemoryBackend, claimed: FlushEntry, chunk: list[ChatLine]
    ) -> list[str]:
        """Extract ``chunk`` into ``memory``: the texts of the facts stored (raises on a
        failure or a timeout, and nothing then counts as stored)."""
        settings = self.settings.extractor
        if in_engine(memory):  # mem0's own extraction, blocking: in a thread
            # a model's words are nobody's consent: a sensitive fact waits for its subject
            consent = WriteConsent.model(the_person(chunk, claimed.requester), chunk_people(chunk))
            return await self._threads.run(
                settings.max_extraction_seconds,
                partial(memory.extract_sync, consent=consent),
                chunk,
            )
        if not keeps_files(memory):  # neither its own extraction nor files: nothing to write
            return []
        turns = sum(line.role == "user" for line in chunk)
        chunk = await asyncio.to_thread(_without_deleted_facts, memory, chunk)
        if not chunk:
            return []
        access = CategoryAccess.for_owner(self.config, claimed.agent, claimed.team or None)
        relations = RelationSettings.of(self.config.memory.relations)
        view = AgentView(
            memory,
            access,
            relations=relations,
            room=self._room(claimed, chunk),
            policy=self.config.memory.audience,
        )
        access.writable(None)  # an allowlist without the default category: nothing fits
        known = await asyncio.to_thread(
            known_snippets, view, chunk, settings.include_memory_context
        )
        model = flush_model(self.config, claimed)
        facts = await within(
            self.runtime.extract(
                model,
                chunk,
                known,
                token=settings.no_reply_token,
                max_chars=settings.max_chars_per_flush,
                categories=writable_categories(access),
            ),
            settings.max_extraction_seconds,
        )
        person = the_person(chunk, claimed.requester)
        written, _ = await asyncio.to_thread(
            partial(
                store_facts,
                view,
                facts,
                run=claimed.session_id,
                user_id=person,
                people=chunk_people(chunk),
            ),
            turns=turns,
            daily_cap=settings.max_facts_per_day,
            path=memory.scope.daily_path(today()),
        )
        await after_flush(self.config, view, person, [line.line for line in chunk], model)
        return written


def _without_deleted_facts(memory: FileMemory, chunk: list[ChatLine]) -> list[ChatLine]:
    """The messages of ``chunk`` that state no fact deleted from ``memory`` (blocking): the
    extraction and the insight pass would otherwise learn again what a person deleted before
    the flush reached the message it came from (:mod:`mindroom.memory.files.tombstones`)."""
    deleted = deleted_from(memory.history)
    kept = [line for line in chunk if not states_deleted_fact(line.line, deleted)]
    if len(kept) < len(chunk):
        logger.info(
            "flush of %s: %d message(s) left out: they state a deleted fact",
            memory.scope_id,
            len(chunk) - len(kept),
        )
    return kept
