"""The ledger's tables (:mod:`mindroom.store.ledger`), one small class each, owning its SQL.

Every class shares the ledger's one :class:`~mindroom.store.database.Database` connection and its
set of running writes (:func:`~mindroom.store.whole_writes.whole`), so closing the ledger waits
for the writes of all of them. Rows are read by column name.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from typing import Any

from mindroom.errors import ClaimError
from mindroom.memory.flush.state import FlushClaim, FlushEntry
from mindroom.memory.flush.told import narrowed
from mindroom.memory.policy.gate import RoomAudience
from mindroom.store.database import Database
from mindroom.store.whole_writes import whole


@dataclass(frozen=True)
class PendingEvent:
    """A claimed event whose reply was not confirmed sent."""

    event_id: str
    room_id: str
    responders: tuple[str, ...]
    source: dict[str, Any]


class Table:
    """One table of the ledger, on the ledger's connection and its set of running writes."""

    def __init__(self, db: Database, writes: set[asyncio.Future[Any]]) -> None:
        self._db = db
        self._writes = writes


class Handled(Table):
    """``handled``: the triggering events claimed before they are answered, marked done after."""

    @whole
    async def claim(
        self,
        event_id: str,
        room_id: str,
        responders: tuple[str, ...],
        source: dict[str, Any],
        *,
        lead: str | None = None,
        owner: str | None = None,
    ) -> bool:
        """Record that ``event_id`` will be answered; False when it already was claimed.
        :class:`ClaimError` when the database failed (the event must be heard again).

        ``lead`` is the account whose holder answers it and ``owner`` the claiming process
        (several processes on one database: :mod:`mindroom.cluster.leases`)."""
        try:
            cursor = await self._db.execute(
                "INSERT INTO handled (event_id, room_id, responders, source, status,"
                " claimed_at, agent, owner) VALUES (?, ?, ?, ?, 'claimed', ?, ?, ?)"
                " ON CONFLICT (event_id) DO NOTHING",
                (
                    event_id,
                    room_id,
                    json.dumps(responders),
                    json.dumps(source),
                    time.time(),
                    lead,
                    owner,
                ),
            )
            await self._db.commit()
        except Exception as exc:
            raise ClaimError(f"cannot claim {event_id}: {type(exc).__name__}") from exc
        return cursor.rowcount == 1

    async def is_handled(self, event_id: str) -> bool:
        """True when ``event_id`` was claimed (answered or being answered) before."""
        async with self._db.query(
            "SELECT 1 FROM handled WHERE event_id = ?", (event_id,)
        ) as cursor:
            return await cursor.fetchone() is not None

    @whole
    async def finish(
        self, event_id: str, status: str = "done", answered_by: tuple[str, ...] = ()
    ) -> None:
        """Mark ``event_id`` answered (or ``skipped``/``failed``), by ``answered_by`` (the
        agents and teams whose answers were posted)."""
        await self._db.execute(
            "UPDATE handled SET status = ?, done_at = ?, answered_by = ? WHERE event_id = ?",
            (status, time.time(), json.dumps(list(answered_by)), event_id),
        )
        await self._db.commit()

    async def pending(self, newer_than: float) -> list[PendingEvent]:
        """Claimed, unfinished events claimed after ``newer_than`` (a Unix time), oldest first."""
        async with self._db.query(
            "SELECT event_id, room_id, responders, source FROM handled"
            " WHERE status = 'claimed' AND claimed_at >= ? ORDER BY claimed_at",
            (newer_than,),
        ) as cursor:
            rows = await cursor.fetchall()
        return [
            PendingEvent(
                row.event_id, row.room_id, tuple(json.loads(row.responders)), json.loads(row.source)
            )
            for row in rows
        ]

    @whole
    async def expire(self, older_than: float) -> int:
        """Give up on claimed events from before ``older_than``; returns how many."""
        cursor = await self._db.execute(
            "UPDATE handled SET status = 'expired', done_at = ?"
            " WHERE status IN ('claimed', 'queued') AND claimed_at < ?",
            (time.time(), older_than),
        )
        await self._db.commit()
        return cursor.rowcount


class SyncTokens(Table):
    """``sync_tokens``: each account's last processed sync (or shared inbox) position."""

    async def get(self, account: str) -> str | None:
        """The saved sync position of ``account``."""
        async with self._db.query(
            "SELECT token FROM sync_tokens WHERE account = ?", (account,)
        ) as cursor:
            row = await cursor.fetchone()
        return row.token if row else None

    @whole
    async def save(self, account: str, token: str) -> None:
        """Remember ``account``'s sync position (after its events were handled)."""
        await self._db.execute(
            "INSERT INTO sync_tokens (account, token) VALUES (?, ?)"
            " ON CONFLICT(account) DO UPDATE SET token = excluded.token",
            (account, token),
        )
        await self._db.commit()


class SessionGenerations(Table):
    """``session_generations``: bumped by ``!new`` to start a fresh conversation."""

    async def get(self, room_id: str, thread_root: str | None) -> int:
        """How many times ``!new`` restarted the conversation here."""
        async with self._db.query(
            "SELECT generation FROM session_generations WHERE room_id = ? AND thread_root = ?",
            (room_id, thread_root or ""),
        ) as cursor:
            row = await cursor.fetchone()
        return int(row.generation) if row else 0

    @whole
    async def new(self, room_id: str, thread_root: str | None) -> int:
        """Start a fresh conversation here; returns the new generation."""
        async with self._db.execute(  # one statement: two processes never count the same one
            "INSERT INTO session_generations (room_id, thread_root, generation) VALUES (?, ?, 1)"
            " ON CONFLICT(room_id, thread_root) DO UPDATE"
            " SET generation = session_generations.generation + 1 RETURNING generation",
            (room_id, thread_root or ""),
        ) as rows:
            row = await rows.fetchone()
        await self._db.commit()
        return int(row.generation)


class Compactions(Table):
    """``compactions``: how often a session was compacted, and the summary it carries over."""

    async def get(self, base_session: str) -> tuple[int, str]:
        """How often a session was compacted, and what its summary carries over."""
        async with self._db.query(
            "SELECT generation, carried FROM compactions WHERE base_session = ?", (base_session,)
        ) as cursor:
            row = await cursor.fetchone()
        return (int(row.generation), str(row.carried)) if row else (0, "")

    @whole
    async def save(self, base_session: str, generation: int, carried: str) -> None:
        """Record a compaction of ``base_session``."""
        await self._db.execute(
            "INSERT INTO compactions (base_session, generation, carried) VALUES (?, ?, ?)"
            " ON CONFLICT(base_session) DO UPDATE SET generation = excluded.generation,"
            " carried = excluded.carried",
            (base_session, generation, carried),
        )
        await self._db.commit()


class ReplyParts(Table):
    """``reply_parts``: what a reply posted, so a resumed reply edits instead of posting again."""

    async def parts(self, trigger_id: str, agent: str) -> dict[int, str | None]:
        """Parts of ``agent``'s reply to ``trigger_id`` an earlier send began: index -> event ID
        (None when the send began but its event ID was never recorded)."""
        async with self._db.query(
            "SELECT part, event_id FROM reply_parts WHERE trigger_id = ? AND agent = ?",
            (trigger_id, agent),
        ) as cursor:
            rows = await cursor.fetchall()
        return {int(row.part): row.event_id for row in rows}

    @whole
    async def begin(self, trigger_id: str, agent: str, part: int) -> None:
        """Record, before it is sent, that part ``part`` of the reply is about to be posted."""
        await self._db.execute(
            "INSERT INTO reply_parts (trigger_id, agent, part) VALUES (?, ?, ?)"
            " ON CONFLICT (trigger_id, agent, part) DO NOTHING",
            (trigger_id, agent, part),
        )
        await self._db.commit()

    @whole
    async def record(self, trigger_id: str, agent: str, part: int, event_id: str) -> None:
        """Record the event ID part ``part`` of the reply was posted as."""
        await self._db.execute(
            "INSERT INTO reply_parts (trigger_id, agent, part, event_id) VALUES (?, ?, ?, ?)"
            " ON CONFLICT(trigger_id, agent, part) DO UPDATE SET event_id = excluded.event_id",
            (trigger_id, agent, part, event_id),
        )
        await self._db.commit()

    @whole
    async def forget_finished(self) -> int:
        """Drop the parts of replies no longer claimed (answered, failed, expired), and not
        handed over to another process either (a hand-over's row is ``<trigger>><agent>``)."""
        cursor = await self._db.execute(
            "DELETE FROM reply_parts WHERE trigger_id NOT IN (SELECT event_id FROM handled"
            " WHERE status IN ('claimed', 'queued')) AND trigger_id || '>' || agent NOT IN"
            " (SELECT event_id FROM handled WHERE status IN ('claimed', 'queued'))"
        )
        await self._db.commit()
        return cursor.rowcount


class FlushSessions(Table):
    """``flush_sessions``: the memory flush's per-session control state.

    The claimer of a row owns its cursor, failures and cooldown; everyone else only marks it
    dirty or boosted. Each method is one statement, so it is atomic across processes."""

    async def entries(self, agent: str | None = None) -> list[FlushEntry]:
        """Every flush entry (of one agent or team), oldest key first."""
        where, args = ("WHERE agent = ?", (agent,)) if agent is not None else ("", ())
        async with self._db.query(
            f"SELECT {_FLUSH_COLUMNS} FROM flush_sessions {where} ORDER BY key", args
        ) as cursor:
            return [_flush_entry(row) for row in await cursor.fetchall()]

    async def entry(self, key: str) -> FlushEntry | None:
        """One flush entry by :attr:`FlushEntry.key`."""
        async with self._db.query(
            f"SELECT {_FLUSH_COLUMNS} FROM flush_sessions WHERE key = ?", (key,)
        ) as cursor:
            row = await cursor.fetchone()
        return _flush_entry(row) if row else None

    @whole
    async def mark_dirty(
        self,
        entry: FlushEntry,
        now: float,
        *,
        boost: bool = False,
        room: RoomAudience | None = None,
    ) -> None:
        """A turn of ``entry``'s session finished: dirty it (see ``flush_state.mark_dirty``),
        and narrow the record of who could read it to ``room``'s readers
        (:mod:`mindroom.memory.flush.told`)."""
        async with self._db.query(
            "SELECT told FROM flush_sessions WHERE key = ?", (entry.key,)
        ) as cursor:
            row = await cursor.fetchone()
        told = narrowed(row.told if row else None, room)
        await self._db.execute(
            "INSERT INTO flush_sessions (key, agent, session_id, requester, team, dirty,"
            " dirty_revision, first_dirty_at, last_seen_at, boosted, told)"
            " VALUES (?, ?, ?, ?, ?, 1, 1, ?, ?, ?, ?)"
            " ON CONFLICT(key) DO UPDATE SET dirty = 1,"
            " dirty_revision = flush_sessions.dirty_revision + 1,"
            " first_dirty_at = CASE WHEN flush_sessions.dirty = 1"
            " THEN flush_sessions.first_dirty_at ELSE excluded.first_dirty_at END,"
            " last_seen_at = excluded.last_seen_at, team = excluded.team,"
            f" boosted = {self._db.greatest}(flush_sessions.boosted, excluded.boosted),"
            " told = excluded.told",
            (
                entry.key,
                entry.agent,
                entry.session_id,
                entry.requester or "",
                json.dumps(list(entry.team)),
                now,
                now,
                int(boost),
                told,
            ),
        )
        await self._db.commit()

    @whole
    async def boost(self, keys: list[str]) -> int:
        """Flush these dirty sessions soon; returns how many were boosted."""
        if not keys:
            return 0
        marks = ", ".join("?" * len(keys))
        cursor = await self._db.execute(
            f"UPDATE flush_sessions SET boosted = 1 WHERE dirty = 1 AND key IN ({marks})", keys
        )
        await self._db.commit()
        return cursor.rowcount

    @whole
    async def claim(self, key: str, claim: FlushClaim) -> FlushEntry | None:
        """Take a dirty session for extraction; None when it is clean or someone else has it."""
        async with self._db.execute(
            "UPDATE flush_sessions SET in_flight = 1, claim_id = ?, claim_pid = ?, claim_boot = ?,"
            " claimed_at = ? WHERE key = ? AND in_flight = 0 AND dirty = 1"
            f" RETURNING {_FLUSH_COLUMNS}",
            (claim.claim_id, claim.pid, claim.boot, claim.claimed_at, key),
        ) as cursor:
            row = await cursor.fetchone()
        await self._db.commit()
        return _flush_entry(row) if row else None

    @whole
    async def finish(
        self, claimed: FlushEntry, claim_id: str, cursor: int, more: bool, updated_at: float
    ) -> FlushEntry | None:
        """Release a claim after the facts up to ``cursor`` were stored.

        The session stays dirty when ``more`` lines wait or a turn finished meanwhile (its
        revision moved). None when the claim was lost (expired and taken over).
        """
        async with self._db.execute(
            "UPDATE flush_sessions SET in_flight = 0, claim_id = NULL, claim_pid = NULL,"
            " claim_boot = NULL, claimed_at = NULL, cursor = ?, failures = 0,"
            " next_attempt_at = 0, flushed_updated_at = ?,"
            " dirty = CASE WHEN ? = 1 OR dirty_revision != ? THEN 1 ELSE 0 END,"
            " boosted = CASE WHEN boosted = 1 AND (? = 1 OR dirty_revision != ?) THEN 1 ELSE 0"
            " END"
            f" WHERE key = ? AND claim_id = ? RETURNING {_FLUSH_COLUMNS}",
            (
                cursor,
                updated_at,
                int(more),
                claimed.dirty_revision,
                int(more),
                claimed.dirty_revision,
                claimed.key,
                claim_id,
            ),
        ) as rows:
            row = await rows.fetchone()
        await self._db.commit()
        return _flush_entry(row) if row else None

    @whole
    async def back_off(self, failed: FlushEntry, claim_id: str) -> bool:
        """Release a claim after a failure, with ``failed``'s failures and next attempt time."""
        cursor = await self._db.execute(
            "UPDATE flush_sessions SET in_flight = 0, claim_id = NULL, claim_pid = NULL,"
            " claim_boot = NULL, claimed_at = NULL, failures = ?, next_attempt_at = ?"
            " WHERE key = ? AND claim_id = ?",
            (failed.failures, failed.next_attempt_at, failed.key, claim_id),
        )
        await self._db.commit()
        return cursor.rowcount == 1

    async def claims(self) -> list[tuple[str, FlushClaim]]:
        """Every claim held now: (entry key, claim)."""
        async with self._db.query(
            "SELECT key, claim_id, claim_pid, claim_boot, claimed_at FROM flush_sessions"
            " WHERE in_flight = 1"
        ) as cursor:
            rows = await cursor.fetchall()
        return [
            (
                row.key,
                FlushClaim(
                    row.claim_id or "",
                    int(row.claim_pid or 0),
                    row.claim_boot or "",
                    float(row.claimed_at or 0),
                ),
            )
            for row in rows
        ]

    @whole
    async def clear_claim(self, key: str, claim_id: str) -> bool:
        """Drop a claim whose owner is gone, so the session can be flushed again."""
        cursor = await self._db.execute(
            "UPDATE flush_sessions SET in_flight = 0, claim_id = NULL, claim_pid = NULL,"
            " claim_boot = NULL, claimed_at = NULL"
            " WHERE key = ? AND in_flight = 1 AND (claim_id = ? OR claim_id IS NULL)",
            (key, claim_id or None),
        )
        await self._db.commit()
        return cursor.rowcount == 1

    @whole
    async def forget(self, entries: list[FlushEntry]) -> int:
        """Delete stale entries, unless they were marked or claimed since they were read."""
        count = 0
        for entry in entries:
            cursor = await self._db.execute(
                "DELETE FROM flush_sessions WHERE key = ? AND in_flight = 0 AND dirty = 0"
                " AND dirty_revision = ?",
                (entry.key, entry.dirty_revision),
            )
            count += cursor.rowcount
        await self._db.commit()
        return count

    @whole
    async def import_state(self, entries: list[FlushEntry], passes: dict[str, int]) -> int:
        """Add entries (and curation passes, ``"scope|day" -> n``) from the old state file.

        Rows already in the table win; an in-flight mark of the old file is dropped (the
        process that set it is gone). Returns how many entries were added.
        """
        added = 0
        for e in entries:
            cursor = await self._db.execute(
                f"INSERT INTO flush_sessions ({_FLUSH_COLUMNS}) VALUES"
                " (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING",
                (
                    e.key,
                    e.agent,
                    e.session_id,
                    e.requester or "",
                    json.dumps(list(e.team)),
                    int(e.dirty),
                    e.dirty_revision,
                    e.first_dirty_at,
                    e.last_seen_at,
                    e.flushed_updated_at,
                    e.cursor,
                    e.failures,
                    e.next_attempt_at,
                    int(e.boosted),
                    e.told,
                ),
            )
            added += cursor.rowcount
        for scope_day, count in passes.items():
            scope, _, day = scope_day.rpartition("|")
            await self._db.execute(
                "INSERT INTO flush_curation (scope, day, passes) VALUES (?, ?, ?)"
                " ON CONFLICT (scope, day) DO NOTHING",
                (scope, day, count),
            )
        await self._db.commit()
        return added


class FlushCuration(Table):
    """``flush_curation``: how many curation passes each scope took today."""

    @whole
    async def take_pass(self, scope: str, day: str, limit: int) -> bool:
        """Take one of ``scope``'s ``limit`` curation passes of ``day``; False when used up."""
        await self._db.execute("DELETE FROM flush_curation WHERE day != ?", (day,))
        cursor = await self._db.execute(
            "INSERT INTO flush_curation (scope, day, passes)"
            " SELECT CAST(? AS TEXT), CAST(? AS TEXT), 1 WHERE CAST(? AS INTEGER) > 0"
            " ON CONFLICT(scope, day) DO UPDATE SET passes = flush_curation.passes + 1"
            " WHERE flush_curation.passes < ?",
            (scope, day, limit, limit),
        )
        await self._db.commit()
        return cursor.rowcount == 1


_FLUSH_COLUMNS = (
    "key, agent, session_id, requester, team, dirty, dirty_revision, first_dirty_at,"
    " last_seen_at, flushed_updated_at, cursor, in_flight, failures, next_attempt_at, boosted,"
    " told"
)


def _flush_entry(row: Any) -> FlushEntry:
    """A ``flush_sessions`` row (its :data:`_FLUSH_COLUMNS`), read by column name."""
    column = row._mapping  # SQLAlchemy's by-name view of a row
    return FlushEntry(
        agent=column["agent"],
        session_id=column["session_id"],
        requester=column["requester"] or None,
        team=tuple(json.loads(column["team"] or "[]")),
        dirty=bool(column["dirty"]),
        dirty_revision=int(column["dirty_revision"]),
        first_dirty_at=float(column["first_dirty_at"]),
        last_seen_at=float(column["last_seen_at"]),
        flushed_updated_at=float(column["flushed_updated_at"]),
        cursor=int(column["cursor"]),
        in_flight=bool(column["in_flight"]),
        failures=int(column["failures"]),
        next_attempt_at=float(column["next_attempt_at"]),
        boosted=bool(column["boosted"]),
        told=column["told"],
    )


@dataclass(frozen=True)
class ForgetRecord:
    """A person's ``!memory forget``: ``pending`` (waiting for their confirmation) or ``done``
    (confirmed; ``!memory undo`` restores it), until ``expires_at``.

    ``entries`` are ``(owner, scope, entry id)``: the agent or team whose memory holds the entry,
    that memory's scope, and the entry. ``requester`` asked; ``subject`` is whom the entries are
    about (the requester, or the person an admin named)."""

    requester: str
    state: str
    subject: str
    entries: tuple[tuple[str, str, str], ...]
    room_id: str
    prompt_event_id: str | None
    created_at: float
    expires_at: float


class MemoryForgets(Table):
    """``memory_forgets``: each requester's pending ``!memory forget`` and last confirmed one."""

    _COLUMNS = (
        "requester, state, subject, entries, room_id, prompt_event_id, created_at, expires_at"
    )

    @whole
    async def offer(
        self,
        requester: str,
        subject: str,
        entries: list[tuple[str, str, str]],
        room_id: str,
        ttl: float,
        now: float | None = None,
    ) -> ForgetRecord:
        """Record ``entries`` as ``requester``'s pending forget for ``ttl`` seconds, replacing
        their previous pending one."""
        now = time.time() if now is None else now
        await self._db.execute(
            "INSERT INTO memory_forgets (requester, state, subject, entries, room_id,"
            " prompt_event_id, created_at, expires_at) VALUES (?, 'pending', ?, ?, ?, NULL, ?, ?)"
            " ON CONFLICT (requester, state) DO UPDATE SET subject = excluded.subject,"
            " entries = excluded.entries, room_id = excluded.room_id, prompt_event_id = NULL,"
            " created_at = excluded.created_at, expires_at = excluded.expires_at",
            (requester, subject, json.dumps(entries), room_id, now, now + ttl),
        )
        await self._db.commit()
        items = tuple((owner, scope, entry) for owner, scope, entry in entries)
        return ForgetRecord(requester, "pending", subject, items, room_id, None, now, now + ttl)

    @whole
    async def set_prompt(self, requester: str, created_at: float, event_id: str) -> bool:
        """Record the message that listed ``requester``'s pending forget (made at
        ``created_at``: a newer one is left alone); False when it is no longer pending."""
        cursor = await self._db.execute(
            "UPDATE memory_forgets SET prompt_event_id = ?"
            " WHERE requester = ? AND state = 'pending' AND created_at = ?",
            (event_id, requester, created_at),
        )
        await self._db.commit()
        return cursor.rowcount == 1

    async def get(
        self, requester: str, state: str, now: float | None = None
    ) -> ForgetRecord | None:
        """``requester``'s ``pending`` or ``done`` forget, unless it expired."""
        now = time.time() if now is None else now
        async with self._db.query(
            f"SELECT {self._COLUMNS} FROM memory_forgets"
            " WHERE requester = ? AND state = ? AND expires_at > ?",
            (requester, state, now),
        ) as cursor:
            row = await cursor.fetchone()
        return _forget_record(row) if row else None

    async def by_prompt(self, event_id: str, now: float | None = None) -> ForgetRecord | None:
        """The pending forget the message ``event_id`` listed, unless it expired or was
        replaced."""
        now = time.time() if now is None else now
        async with self._db.query(
            f"SELECT {self._COLUMNS} FROM memory_forgets"
            " WHERE prompt_event_id = ? AND state = 'pending' AND expires_at > ?",
            (event_id, now),
        ) as cursor:
            row = await cursor.fetchone()
        return _forget_record(row) if row else None

    @whole
    async def confirm(
        self, record: ForgetRecord, undo_for: float, now: float | None = None
    ) -> bool:
        """Make the pending ``record`` its requester's last confirmed forget (restorable for
        ``undo_for`` seconds); False when it is no longer pending (confirmed meanwhile,
        replaced or expired): one confirmation wins."""
        now = time.time() if now is None else now
        cursor = await self._db.execute(
            "DELETE FROM memory_forgets WHERE requester = ? AND state = 'pending'"
            " AND created_at = ? AND expires_at > ?",
            (record.requester, record.created_at, now),
        )
        if cursor.rowcount != 1:
            await self._db.commit()
            return False
        await self._db.execute(
            "INSERT INTO memory_forgets (requester, state, subject, entries, room_id,"
            " prompt_event_id, created_at, expires_at) VALUES (?, 'done', ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (requester, state) DO UPDATE SET subject = excluded.subject,"
            " entries = excluded.entries, room_id = excluded.room_id,"
            " prompt_event_id = excluded.prompt_event_id, created_at = excluded.created_at,"
            " expires_at = excluded.expires_at",
            (
                record.requester,
                record.subject,
                json.dumps([list(e) for e in record.entries]),
                record.room_id,
                record.prompt_event_id,
                now,
                now + undo_for,
            ),
        )
        await self._db.commit()
        return True

    @whole
    async def cancel(self, record: ForgetRecord) -> bool:
        """Drop the pending ``record`` (its person said no); False when it is no longer
        pending (confirmed, replaced or expired meanwhile)."""
        cursor = await self._db.execute(
            "DELETE FROM memory_forgets WHERE requester = ? AND state = 'pending'"
            " AND created_at = ?",
            (record.requester, record.created_at),
        )
        await self._db.commit()
        return cursor.rowcount == 1

    @whole
    async def take_done(self, record: ForgetRecord) -> bool:
        """Remove the confirmed ``record`` to undo it; False when another undo took it."""
        cursor = await self._db.execute(
            "DELETE FROM memory_forgets WHERE requester = ? AND state = 'done' AND created_at = ?",
            (record.requester, record.created_at),
        )
        await self._db.commit()
        return cursor.rowcount == 1


def _forget_record(row: Any) -> ForgetRecord:
    return ForgetRecord(
        requester=str(row.requester),
        state=str(row.state),
        subject=str(row.subject),
        entries=tuple((str(o), str(s), str(i)) for o, s, i in json.loads(row.entries)),
        room_id=str(row.room_id),
        prompt_event_id=None if row.prompt_event_id is None else str(row.prompt_event_id),
        created_at=float(row.created_at),
        expires_at=float(row.expires_at),
    )
