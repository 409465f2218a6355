"""``prompts``: the messages mindroom posted that one person answers with a reaction.

A prompt is a question put to one person (a consent proposal to confirm, a deletion to
confirm): the event it was posted as, its room, the account that posted it, the person who
may answer it, its ``kind`` (which handler answers it, :mod:`mindroom.pipeline.prompts`) and
``ref`` (what it is about: a proposal's ID, say). Each (kind, ref, person) is offered once, and
answered once: :meth:`Prompts.answer` is one statement, so of two reactions (or two processes
hearing one) only the first answers.

Control state, like the rest of the ledger: deleting it forgets which questions were asked
and answered, never memory (a question asked again is answered by the same handler, whose
own state, a proposal's status say, decides what is still to do).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from mindroom.store.ledger_tables import Table
from mindroom.store.whole_writes import whole


@dataclass(frozen=True)
class Prompt:
    """A posted question (see the module docstring); ``answer`` is ``yes``/``no`` once given."""

    event_id: str
    room_id: str
    account: str
    person: str
    kind: str
    ref: str
    created_at: float
    answer: str | None = None
    answered_by: str | None = None


_COLUMNS = "event_id, room_id, account, user_id, kind, ref, created_at, answer, answered_by"


def _prompt(row: Any) -> Prompt:
    return Prompt(
        event_id=str(row.event_id),
        room_id=str(row.room_id),
        account=str(row.account),
        person=str(row.user_id),
        kind=str(row.kind),
        ref=str(row.ref),
        created_at=float(row.created_at),
        answer=row.answer,
        answered_by=row.answered_by,
    )


class Prompts(Table):
    """``prompts``: the questions posted to one person each, and their answers."""

    @whole
    async def add(
        self, event_id: str, room_id: str, account: str, person: str, kind: str, ref: str
    ) -> bool:
        """Record that ``event_id`` asks ``person`` about ``kind`` ``ref``; False when that
        question was recorded before (the earlier one stands)."""
        cursor = await self._db.execute(
            "INSERT INTO prompts (event_id, room_id, account, user_id, kind, ref, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
            (event_id, room_id, account, person, kind, ref, time.time()),
        )
        await self._db.commit()
        return cursor.rowcount == 1

    async def get(self, event_id: str) -> Prompt | None:
        """The prompt posted as ``event_id``, if it is one."""
        async with self._db.query(
            f"SELECT {_COLUMNS} FROM prompts WHERE event_id = ?", (event_id,)
        ) as cursor:
            row = await cursor.fetchone()
        return None if row is None else _prompt(row)

    async def offered(self, kind: str, ref: str, person: str) -> Prompt | None:
        """The prompt that asked ``person`` about ``kind`` ``ref``, if one did."""
        async with self._db.query(
            f"SELECT {_COLUMNS} FROM prompts WHERE kind = ? AND ref = ? AND user_id = ?",
            (kind, ref, person),
        ) as cursor:
            row = await cursor.fetchone()
        return None if row is None else _prompt(row)

    @whole
    async def answer(self, event_id: str, yes: bool, by: str) -> bool:
        """Record ``by``'s answer to the prompt ``event_id``; False when it was answered
        before (or is no prompt): then nothing is to be done."""
        cursor = await self._db.execute(
            "UPDATE prompts SET answer = ?, answered_by = ?, answered_at = ?"
            " WHERE event_id = ? AND answer IS NULL",
            ("yes" if yes else "no", by, time.time(), event_id),
        )
        await self._db.commit()
        return cursor.rowcount == 1
