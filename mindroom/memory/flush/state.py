"""Control state of the memory flush: which sessions are dirty, what was flushed, who flushes.

The state lives in the ``flush_sessions`` table of the ledger (``mindroom_data/ledger.db``), so
the bot, compaction and ``mindroom memory flush`` share it and claim a session atomically
before extracting it. It is control state, not memory: losing it only means sessions get looked
at again (extraction never duplicates a line that is already in the daily file).

This module holds the values and the pure decisions over them (:class:`FlushEntry`,
:func:`eligible`, :func:`choose_batch`, :func:`backoff`, :func:`claim_is_dead`...) and reads the
``memory_flush_state.json`` of earlier versions once, to move it into the table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from mindroom.config.schema import AutoFlushConfig, Config

LEGACY_STATE_FILE = "memory_flush_state.json"


@dataclass(frozen=True)
class FlushEntry:
    """One session (of an agent or team, and a requester for private agents)."""

    agent: str  # an agent name, or a configured team name
    session_id: str
    requester: str | None = None
    team: tuple[str, ...] = ()  # members, for a team session
    dirty: bool = False
    dirty_revision: int = 0
    first_dirty_at: float = 0.0
    last_seen_at: float = 0.0
    flushed_updated_at: float = 0.0  # the session's updated_at when last flushed
    cursor: int = 0  # chat messages already extracted
    in_flight: bool = False
    failures: int = 0
    next_attempt_at: float = 0.0
    boosted: bool = False
    told: str | None = None  # who could read its conversation (mindroom.memory.flush.told)

    @property
    def key(self) -> str:
        """Unique per (agent, session, requester)."""
        return f"{self.agent}|{self.session_id}|{self.requester or ''}"


def flush_model(config: Config, entry: FlushEntry) -> str:
    """The model key the flush of ``entry`` extracts with: its team's, its agent's, else the
    first member's or the default."""
    if entry.agent in config.teams:
        return config.teams[entry.agent].model or config.defaults.model
    if entry.agent in config.agents:
        return config.agent_model(entry.agent)
    return config.agent_model(entry.team[0]) if entry.team else config.defaults.model


def extracted_by_mem0(config: Config, entry: FlushEntry) -> bool:
    """Whether ``entry``'s scope is on the mem0 backend, which extracts after every turn
    (a team follows ``memory.backend``, as :class:`~mindroom.memory.registry.MemoryRegistry`
    does)."""
    if entry.team:
        return config.memory.backend == "mem0"
    return entry.agent in config.agents and config.agent_memory_backend(entry.agent) == "mem0"


def uses_mem0(config: Config) -> bool:
    """Whether any scope of ``config`` may be on the mem0 backend."""
    return config.memory.backend == "mem0" or any(
        agent.memory_backend == "mem0" for agent in config.agents.values()
    )


def mark_dirty(entry: FlushEntry, now: float) -> FlushEntry:
    """A finished turn: the session has something new to flush."""
    return replace(
        entry,
        dirty=True,
        dirty_revision=entry.dirty_revision + 1,
        first_dirty_at=entry.first_dirty_at if entry.dirty else now,
        last_seen_at=now,
    )


def eligible(entry: FlushEntry, now: float, config: AutoFlushConfig) -> bool:
    """Dirty, not in flight, past its cooldown, and idle long enough (or dirty too long)."""
    if not entry.dirty or entry.in_flight or now < entry.next_attempt_at:
        return False
    idle = now - entry.last_seen_at >= config.idle_seconds
    overdue = now - entry.first_dirty_at >= config.max_dirty_age_seconds
    return idle or overdue or entry.boosted


def choose_batch(
    entries: Iterable[FlushEntry], now: float, config: AutoFlushConfig
) -> list[FlushEntry]:
    """The sessions to flush this cycle: boosted first, then oldest dirty, within the caps."""
    ready = sorted(
        (e for e in entries if eligible(e, now, config)),
        key=lambda e: (not e.boosted, e.first_dirty_at, e.key),
    )
    chosen: list[FlushEntry] = []
    per_agent: dict[str, int] = {}
    for entry in ready:
        if len(chosen) >= config.batch.max_sessions_per_cycle:
            break
        if per_agent.get(entry.agent, 0) >= config.batch.max_sessions_per_agent_per_cycle:
            continue
        per_agent[entry.agent] = per_agent.get(entry.agent, 0) + 1
        chosen.append(entry)
    return chosen


def boost_others(
    entries: Iterable[FlushEntry], agent: str, session_id: str, limit: int
) -> list[FlushEntry]:
    """A new prompt for ``agent`` in ``session_id``: its other dirty sessions, to flush soon."""
    others = sorted(
        (
            e
            for e in entries
            if e.agent == agent and e.session_id != session_id and e.dirty and not e.boosted
        ),
        key=lambda e: e.last_seen_at,
        reverse=True,
    )
    return [replace(e, boosted=True) for e in others[:limit]]


def backoff(entry: FlushEntry, now: float, config: AutoFlushConfig) -> FlushEntry:
    """A failed or timed-out flush: retry later, waiting twice as long each time (capped)."""
    failures = entry.failures + 1
    wait = min(
        config.retry_cooldown_seconds * 2 ** (failures - 1), config.max_retry_cooldown_seconds
    )
    return replace(entry, in_flight=False, failures=failures, next_attempt_at=now + wait)


def is_stale(entry: FlushEntry, now: float, config: AutoFlushConfig) -> bool:
    """Clean and not seen for ``stale_ttl_seconds``: dropped from the state.

    A dirty entry is never stale: its facts are not in memory yet.
    """
    if entry.dirty or entry.in_flight:
        return False
    return now - max(entry.last_seen_at, entry.first_dirty_at) > config.stale_ttl_seconds


@dataclass(frozen=True)
class FlushClaim:
    """Who is extracting a session now: a process (pid, boot) since ``claimed_at``."""

    claim_id: str
    pid: int
    boot: str
    claimed_at: float


def boot_id() -> str:
    """This machine's boot id (Linux), so a claim from before a reboot is known to be dead."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def pid_alive(pid: int) -> bool:
    """True when a process ``pid`` exists (it may belong to someone else)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def claim_is_dead(
    claim: FlushClaim,
    now: float,
    *,
    boot: str,
    max_age: float,
    alive: Callable[[int], bool] = pid_alive,
    shared: bool = False,
) -> bool:
    """A claim nobody will finish: from another boot, of a gone process, or older than ``max_age``.

    The age bound covers a recycled pid; a live claimer that outlives it finds its claim gone
    and drops its result (the facts it stored stay; a retry adds no duplicates). On a
    ``shared`` database (PostgreSQL) a claim dies of age only: another boot id may be another
    machine, and the same one another container of this host (its own pid namespace), each
    with a live claimer that no pid seen from here tells about.
    """
    if now - claim.claimed_at > max_age:
        return True
    if shared:
        return False
    if claim.boot and boot and claim.boot != boot:
        return True
    return not alive(claim.pid)


def load_legacy_state(path: Path) -> tuple[list[FlushEntry], dict[str, int]]:
    """Entries and curation passes of an old ``memory_flush_state.json`` (empty if unreadable)."""
    entries: list[FlushEntry] = []
    passes: dict[str, int] = {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        items = raw.get("entries", []) if isinstance(raw, dict) else []
        found = raw.get("curation_passes", {}) if isinstance(raw, dict) else {}
        if isinstance(found, dict):
            passes = {str(k): int(v) for k, v in found.items()}
        for item in items if isinstance(items, list) else []:
            item["team"] = tuple(item.get("team") or ())
            entries.append(FlushEntry(**item))
    except (FileNotFoundError, ValueError, TypeError, AttributeError):
        return [], {}
    return entries, passes
