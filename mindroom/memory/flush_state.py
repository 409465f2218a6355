"""Control state of the memory flush: which sessions are dirty, what was flushed, what failed.

Kept in ``mindroom_data/memory_flush_state.json`` (written atomically). It is control state,
not memory: losing it only means sessions get looked at again (extraction never duplicates a
line that is already in the daily file). The decisions are pure functions over
:class:`FlushEntry` values; :class:`FlushState` only loads, saves and holds them.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from mindroom.config.schema import AutoFlushConfig
from mindroom.memory.files import atomic_write


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

    @property
    def key(self) -> str:
        """Unique per (agent, session, requester)."""
        return f"{self.agent}|{self.session_id}|{self.requester or ''}"


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
    """Not seen for ``stale_ttl_seconds``: dropped from the state."""
    return now - max(entry.last_seen_at, entry.first_dirty_at) > config.stale_ttl_seconds


@dataclass
class FlushState:
    """The state file and its entries. Thread-safe; every change is saved atomically."""

    path: Path
    entries: dict[str, FlushEntry] = field(default_factory=dict)
    curation_passes: dict[str, int] = field(default_factory=dict)  # "scope|day" -> passes
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def load(cls, path: Path) -> FlushState:
        """Read the state; a missing or unreadable file starts empty (it is control state)."""
        state = cls(path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            items = raw.get("entries", []) if isinstance(raw, dict) else []
            passes = raw.get("curation_passes", {}) if isinstance(raw, dict) else {}
            if isinstance(passes, dict):
                state.curation_passes = {str(k): int(v) for k, v in passes.items()}
            for item in items if isinstance(items, list) else []:
                item["team"] = tuple(item.get("team") or ())
                entry = FlushEntry(**item)
                state.entries[entry.key] = entry
        except (FileNotFoundError, ValueError, TypeError, AttributeError):
            pass
        return state

    def save(self) -> None:
        """Write the state atomically."""
        with self._lock:
            data = {
                "entries": [asdict(e) for e in self.entries.values()],
                "curation_passes": self.curation_passes,
            }
            atomic_write(self.path, json.dumps(data, indent=1, ensure_ascii=False))

    def get(self, key: str) -> FlushEntry | None:
        with self._lock:
            return self.entries.get(key)

    def put(self, *entries: FlushEntry) -> None:
        """Store entries (in memory; call :meth:`save` to persist)."""
        with self._lock:
            for entry in entries:
                self.entries[entry.key] = entry

    def snapshot(self) -> list[FlushEntry]:
        with self._lock:
            return list(self.entries.values())

    def reset_in_flight(self) -> int:
        """After a crash no flush is really running: clear every in-flight mark."""
        with self._lock:
            stuck = [e for e in self.entries.values() if e.in_flight]
            for entry in stuck:
                self.entries[entry.key] = replace(entry, in_flight=False)
        return len(stuck)

    def drop_stale(self, now: float, config: AutoFlushConfig) -> int:
        with self._lock:
            stale = [k for k, e in self.entries.items() if is_stale(e, now, config)]
            for key in stale:
                del self.entries[key]
        return len(stale)
