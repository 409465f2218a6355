"""The background memory flush: finished conversations become durable memory, silently.

:class:`FlushWorker` is owned by the bot. A finished turn marks its session dirty (and wakes the
worker); a new prompt boosts the agent's other dirty sessions. Every
``flush_interval_seconds``, or when woken, the worker picks eligible sessions
(:mod:`mindroom.memory.flush_state`), reads what they said since the last flush through Agno,
runs the silent extraction turn on the agent's own model and appends each new fact to today's
daily file of the right scope (agent, private requester or team), with actor ``flush`` in the
history. It never touches Matrix, and it never delays a reply: before each session it waits until no
turn is running, so it works in the gaps between replies.

A long backlog is taken in bounded chunks across cycles (the message cursor advances only past
what was extracted). Failures and timeouts back off; a crash mid-flush leaves an in-flight mark
that the next start clears, and extraction skips facts already in the file, so a retried chunk
adds nothing twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

from mindroom.agents.extraction import ChatLine, bounded_chunk
from mindroom.agents.runner import AgentRuntime
from mindroom.config.schema import Config
from mindroom.memory.flush_state import (
    FlushEntry,
    FlushState,
    backoff,
    boost_others,
    choose_batch,
    mark_dirty,
)
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.store import FileMemory, today

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class FlushResult:
    """What one session's flush did."""

    entry: FlushEntry
    written: tuple[str, ...]
    messages: int
    error: str | None = None


class FlushWorker:
    """Owns the flush state and the loop."""

    def __init__(
        self, config: Config, runtime: AgentRuntime, memories: MemoryRegistry, data_dir: Path
    ) -> None:
        self.config = config
        self.runtime = runtime
        self.memories = memories
        self.state = FlushState.load(data_dir / "memory_flush_state.json")
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        reset = self.state.reset_in_flight()
        if reset:
            logger.info("cleared %d flushes left in flight by the previous run", reset)
            self.state.save()

    @property
    def settings(self):  # noqa: ANN201 - AutoFlushConfig, looked up live (hot reload)
        return self.config.memory.auto_flush

    # -- marks from the reply path (cheap, never blocking) --------------------------------------

    def _entry(
        self, owner: str, session_id: str, requester: str | None, team: tuple[str, ...]
    ) -> FlushEntry:
        fresh = FlushEntry(owner, session_id, requester, team)
        return self.state.get(fresh.key) or fresh

    async def turn_finished(
        self, owner: str, session_id: str, requester: str | None, team: tuple[str, ...] = ()
    ) -> None:
        """A turn of ``owner`` in ``session_id`` finished: the session is dirty."""
        if not self.settings.enabled:
            return
        entry = mark_dirty(self._entry(owner, session_id, requester, team), time.time())
        self.state.put(replace(entry, boosted=False) if not entry.boosted else entry)
        await asyncio.to_thread(self.state.save)
        self._wake.set()

    async def prompted(self, owner: str, session_id: str) -> None:
        """A new prompt for ``owner``: flush its other dirty sessions soon."""
        if not self.settings.enabled:
            return
        boosted = boost_others(
            self.state.snapshot(), owner, session_id, self.settings.max_cross_session_reprioritize
        )
        if boosted:
            self.state.put(*boosted)
            await asyncio.to_thread(self.state.save)
            self._wake.set()

    async def flush_now(self, owner: str, session_id: str, requester: str | None) -> int:
        """Flush everything not yet flushed of one session, now (before a compaction)."""
        entry = mark_dirty(self._entry(owner, session_id, requester, ()), time.time())
        self.state.put(entry)
        written = 0
        for _ in range(100):  # a bounded number of chunks
            result = await self.flush_session(entry)
            written += len(result.written)
            if result.error or not result.entry.dirty:
                break
            entry = result.entry
        return written

    # -- the loop -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Flush every interval or when woken, until :meth:`stop`."""
        self._schedule_next()  # sessions left dirty by the previous run
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.settings.flush_interval_seconds)
            self._wake.clear()
            if self._stop.is_set() or not self.settings.enabled:
                continue
            try:
                await self.cycle()
            except Exception:  # the loop's edge: log and go on
                logger.exception("memory flush cycle failed")
            # sessions waiting only for their idle time: look again when the first is due
            self._schedule_next()

    def _schedule_next(self) -> None:
        now = time.time()
        due = [
            max(e.last_seen_at + self.settings.idle_seconds, e.next_attempt_at)
            for e in self.state.snapshot()
            if e.dirty and not e.in_flight
        ]
        if due:
            delay = max(0.05, min(due) - now)
            asyncio.get_running_loop().call_later(delay, self._wake.set)

    def stop(self) -> None:
        """End :meth:`run` at its next wake-up."""
        self._stop.set()
        self._wake.set()

    async def cycle(self, *, force: bool = False, agent: str | None = None) -> list[FlushResult]:
        """One flush cycle; ``force`` ignores idle times and cooldowns (the CLI's flush)."""
        now = time.time()
        self.state.drop_stale(now, self.settings)
        entries = [e for e in self.state.snapshot() if agent is None or e.agent == agent]
        if force:
            batch = [e for e in entries if e.dirty and not e.in_flight]
        else:
            batch = choose_batch(entries, now, self.settings)
        results = []
        for entry in batch:
            await self.runtime.wait_idle()  # replies go first; a flush waits for a gap
            results.append(await self.flush_session(entry))
        if self.settings.curation.enabled:
            for entry in {r.entry.key: r.entry for r in results if r.written}.values():
                await self.runtime.wait_idle()
                await self.curate(entry)
        return results

    async def curate(self, entry: FlushEntry) -> list[str]:
        """Promote durable facts from the daily files into MEMORY.md (append-only, capped)."""
        memory = await asyncio.to_thread(self._memory, entry)
        curation = self.settings.curation
        if memory is None:
            return []
        day = today()
        key = f"{memory.scope_id}|{day}"
        passes = self.state.curation_passes.get(key, 0)
        if passes >= curation.max_passes_per_day:
            return []
        self.state.curation_passes = {
            k: v for k, v in self.state.curation_passes.items() if k.endswith(day)
        } | {key: passes + 1}
        await asyncio.to_thread(self.state.save)
        entries = await memory.list(500)
        daily = [e.text for e in entries if e.path.startswith("memory/")][:200]
        long_term = [e.text for e in entries if e.path == "MEMORY.md"]
        if not daily:
            return []
        try:
            facts = await asyncio.wait_for(
                self.runtime.curate(
                    self._model_key(entry),
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
        for fact in facts:
            added = await asyncio.to_thread(
                memory.append_unique_sync, fact, actor="curation", path="MEMORY.md"
            )
            if added is not None:
                promoted.append(added.text)
        if promoted:
            logger.info("curation promoted %d facts into %s", len(promoted), memory.scope_id)
        return promoted

    def _memory(self, entry: FlushEntry) -> FileMemory | None:
        if entry.team:
            return self.memories.for_team(list(entry.team), entry.requester)
        if entry.agent in self.config.agents:
            return self.memories.for_agent(entry.agent, entry.requester)
        return None

    def _model_key(self, entry: FlushEntry) -> str:
        if entry.agent in self.config.teams:
            return self.config.teams[entry.agent].model or self.config.defaults.model
        if entry.agent in self.config.agents:
            return self.config.agent_model(entry.agent)
        return self.config.agent_model(entry.team[0]) if entry.team else self.config.defaults.model

    async def flush_session(self, entry: FlushEntry) -> FlushResult:
        """Extract the next chunk of one session into memory."""
        settings = self.settings.extractor
        entry = replace(entry, in_flight=True)
        self.state.put(entry)
        await asyncio.to_thread(self.state.save)
        try:
            memory = await asyncio.to_thread(self._memory, entry)  # may open or scaffold files
            lines, updated_at = await self.runtime.session_chat(
                entry.agent, entry.session_id, entry.requester, bool(entry.team)
            )
            fresh = lines[entry.cursor :]
            if memory is None or not fresh:
                done = replace(entry, in_flight=False, dirty=False, boosted=False, failures=0)
                self.state.put(done)
                await asyncio.to_thread(self.state.save)
                return FlushResult(done, (), 0)
            count = bounded_chunk(
                fresh, settings.max_messages_per_flush, settings.max_chars_per_flush
            )
            chunk = fresh[:count]
            known = await self._known(memory, chunk)
            facts = await asyncio.wait_for(
                self.runtime.extract(
                    self._model_key(entry),
                    chunk,
                    known,
                    token=settings.no_reply_token,
                    max_chars=settings.max_chars_per_flush,
                ),
                settings.max_extraction_seconds,
            )
            written = []
            for fact in facts:
                added = await asyncio.to_thread(
                    memory.append_unique_sync,
                    fact,
                    actor="flush",
                    path=memory.scope.daily_path(today()),
                )
                if added is not None:
                    written.append(added.text)
            cursor = entry.cursor + count
            current = self.state.get(entry.key) or entry
            # a turn that finished while this flush ran leaves the session dirty
            more = cursor < len(lines) or current.dirty_revision != entry.dirty_revision
            done = replace(
                current,
                in_flight=False,
                cursor=cursor,
                dirty=more,
                boosted=more and entry.boosted,
                flushed_updated_at=updated_at,
                failures=0,
                next_attempt_at=0.0,
            )
            self.state.put(done)
            await asyncio.to_thread(self.state.save)
            logger.info(
                "flushed %d messages of a %s session: %d new facts%s",
                count,
                entry.agent,
                len(written),
                " (more to go)" if more else "",
            )
            if more:
                self._wake.set()
            return FlushResult(done, tuple(written), count)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # timeouts and model failures back off
            failed = backoff(entry, time.time(), self.settings)
            self.state.put(failed)
            await asyncio.to_thread(self.state.save)
            reason = (
                "timed out" if isinstance(exc, TimeoutError) else str(exc) or type(exc).__name__
            )
            logger.warning("flushing a %s session failed (%s); retrying later", entry.agent, reason)
            return FlushResult(failed, (), 0, reason)

    async def _known(self, memory: FileMemory, chunk: list[ChatLine]) -> list[str]:
        snippets = self.settings.extractor.include_memory_context
        if not snippets.memory_snippets:
            return []
        query = " ".join(line.text for line in chunk)[:2000]
        hits = await memory.search(query, snippets.memory_snippets)
        return [hit.entry.text[: snippets.snippet_max_chars] for hit in hits]
