"""The appservice's events as one ordered log in the shared database, for several processes.

In appservice mode the homeserver pushes every agent's events to one URL. When several
``mindroom run`` share one database (:mod:`mindroom.cluster.share`), whichever process a
transaction reaches appends its events here and acknowledges it once they are committed; each
process then reads the log and hands each event to the accounts *it* runs
(:mod:`mindroom.adapters.matrix.inbox_tail`), as each would have read its own sync.

* **Once.** An event is appended once, by its event ID: a transaction sent again (after a lost
  answer, or to another process) appends nothing new.
* **In order.** ``inbox_head`` numbers the events; an append updates its one row first, which
  holds that row's lock to the commit, so appends commit in the order of their numbers and a
  reader that saw number ``n`` never later finds a smaller one appear.
* **Where each account is.** An account's position (the last number handed to it, after its
  handlers ran: its messages were claimed) is saved as ``sync_tokens`` row ``inbox:<user>``,
  as a sync position would be; it starts at the head before the account's first sync. The
  process that takes an account over (its holder died) reads on from there: what the
  account had not seen is delivered, and what it had claimed is answered once (the ledger).
* **Kept a day** (:data:`KEPT_S`): an account down for longer catches up with its first sync's
  room state and pending invites instead, as the catch-up of client-server mode does.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from mindroom.store.database import Database
from mindroom.store.whole_writes import whole

KEPT_S = 24 * 3600.0
_POSITION = "inbox:"  # the sync_tokens key of an account's position: inbox:<user>


class Inbox:
    """The inbox on the ledger's database (its connection, its running writes)."""

    def __init__(self, db: Database, writes: set[asyncio.Future[Any]]) -> None:
        self._db = db
        self._writes = writes

    @whole
    async def append(self, events: list[dict[str, Any]], now: float | None = None) -> int:
        """Append ``events`` (those not appended before) in order; the head's number after."""
        now = time.time() if now is None else now
        await self._db.execute(  # first: its row lock orders the appends (module docstring)
            "UPDATE inbox_head SET seq = seq + ? WHERE id = 1", (len(events),)
        )
        async with self._db.query("SELECT seq FROM inbox_head WHERE id = 1") as cursor:
            head = int((await cursor.fetchone()).seq)
        for seq, event in enumerate(events, start=head - len(events) + 1):
            event_id = event.get("event_id")
            await self._db.execute(
                "INSERT INTO inbox (seq, event_id, event, received_at) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (event_id) DO NOTHING",
                (seq, event_id if isinstance(event_id, str) else None, json.dumps(event), now),
            )
        await self._db.commit()
        return head

    async def head(self) -> int:
        """The number of the last event appended (0: none yet)."""
        async with self._db.query("SELECT seq FROM inbox_head WHERE id = 1") as cursor:
            row = await cursor.fetchone()
        return int(row.seq) if row else 0

    async def since(self, after: int, limit: int) -> list[tuple[int, dict[str, Any]]]:
        """Up to ``limit`` events numbered after ``after``, in order."""
        async with self._db.query(
            "SELECT seq, event FROM inbox WHERE seq > ? ORDER BY seq LIMIT ?", (after, limit)
        ) as cursor:
            rows = await cursor.fetchall()
        return [(int(row.seq), json.loads(row.event)) for row in rows]

    async def position(self, user_id: str) -> int | None:
        """Where ``user_id`` was saved to be (None: it never read the inbox)."""
        async with self._db.query(
            "SELECT token FROM sync_tokens WHERE account = ?", (_POSITION + user_id,)
        ) as cursor:
            row = await cursor.fetchone()
        return int(row.token) if row else None

    @whole
    async def begin(self, user_id: str) -> None:
        """Give ``user_id`` a position at the head unless it has one (before its account's
        first sync: what arrives from then on is its own, whichever process runs it)."""
        head = await self.head()
        await self._db.execute(
            "INSERT INTO sync_tokens (account, token) VALUES (?, ?)"
            " ON CONFLICT (account) DO NOTHING",
            (_POSITION + user_id, str(head)),
        )
        await self._db.commit()

    @whole
    async def save_positions(self, positions: dict[str, int]) -> None:
        """Save each user's position (after its events were handled), in one statement."""
        if not positions:
            return
        rows = sorted(positions.items())
        await self._db.execute(
            "INSERT INTO sync_tokens (account, token) VALUES "
            + ", ".join("(?, ?)" for _ in rows)
            + " ON CONFLICT (account) DO UPDATE SET token = excluded.token",
            [value for user_id, seq in rows for value in (_POSITION + user_id, str(seq))],
        )
        await self._db.commit()

    @whole
    async def prune(self, older_than: float) -> int:
        """Forget the events received before ``older_than``; how many."""
        cursor = await self._db.execute("DELETE FROM inbox WHERE received_at < ?", (older_than,))
        await self._db.commit()
        return cursor.rowcount
