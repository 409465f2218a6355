"""Consent before sensitive memory changes, and corroboration before benign ones (spec 10).

What mindroom writes on its own (the flush; an agent's tool) about a person's *sensitive
fields* (preferred name, pronouns, city, language) is not written: it becomes a *proposal*,
kept for :data:`PROPOSAL_DAYS` days, that the person confirms (``!memory confirm ID`` in chat,
or ``mindroom memory confirm ID``) or rejects; unanswered, it expires. A *benign* change (a
tone preference, a new goal) found by the flush is written once a second, separate
extraction says the same (two signals); until then it waits as a proposal too.

Which field a fact is about is read from its text (English patterns, see :data:`SENSITIVE`;
a fact in another language is not recognised and is written as any other). Proposals live in
the scope's ``consent.db``: control state (resetting it drops pending proposals, never
memory). Every decision goes to the history as a ``consent`` record (confirmed, rejected,
expired, corroborated) with the proposal; a confirmed proposal's entry is written first,
with the proposal as its operation key, so a crash between the two steps never writes it
twice, and the audit shows who decided what.
"""

from __future__ import annotations

import re
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass

from mindroom.errors import MemoryStoreError
from mindroom.memory.fields import EntryFields, parse_fields, render_fields
from mindroom.memory.markdown import MemoryEntry
from mindroom.memory.store import FileMemory
from mindroom.wal import open_database

PROPOSAL_DAYS = 7
SIGNALS = 2  # a benign change is written when this many extractions said it
SENSITIVE = {
    "preferred_name": re.compile(
        r"\b(prefers? to be called|goes by|preferred name|wants? to be called|nickname)\b", re.I
    ),
    "pronouns": re.compile(r"\bpronouns?\b|\b(she/her|he/him|they/them)\b", re.I),
    "city": re.compile(r"\b(lives in|moved to|relocated to|based in|home ?town|city)\b", re.I),
    "language": re.compile(
        r"\b(native language|mother tongue|prefers? (to )?(speak|write)|language)\b", re.I
    ),
}
BENIGN = {
    "tone": re.compile(
        r"\b(tone|formal|informal|casual|concise|brief answers|short answers|emoji)\b", re.I
    ),
}
_SCHEMA = """
CREATE TABLE IF NOT EXISTS proposals (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, field TEXT NOT NULL, text TEXT NOT NULL,
    fields TEXT NOT NULL, path TEXT NOT NULL, user_id TEXT, signals INTEGER NOT NULL,
    created REAL NOT NULL, expires REAL NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    decided_at REAL, decided_by TEXT
);
"""


@dataclass(frozen=True)
class Proposal:
    """A change waiting for the person (``sensitive``) or a second signal (``benign``)."""

    id: str
    kind: str
    field: str
    text: str
    fields: EntryFields
    path: str
    user_id: str | None
    signals: int
    created: float
    expires: float
    status: str


def classify(text: str, fields: EntryFields) -> tuple[str, str] | None:
    """``(kind, field)`` when ``text`` changes a sensitive or benign field, else None."""
    for field, pattern in SENSITIVE.items():
        if pattern.search(text):
            return "sensitive", field
    for field, pattern in BENIGN.items():
        if pattern.search(text):
            return "benign", field
    if fields.category == "goals":
        return "benign", "goals"
    return None


def _same(text: str) -> str:
    return " ".join(text.casefold().split()).rstrip(".")


class ConsentQueue:
    """The proposals of one scope."""

    def __init__(self, memory: FileMemory) -> None:
        self.memory = memory
        self._db: sqlite3.Connection = open_database(memory.scope.state_dir / "consent.db", _SCHEMA)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _row(self, row: tuple[object, ...]) -> Proposal:
        (id_, kind, field, text, words, path, user, signals, created, expires, status) = row[:11]
        return Proposal(
            str(id_), str(kind), str(field), str(text), parse_fields(str(words)), str(path),
            None if user is None else str(user), int(str(signals)), float(str(created)),
            float(str(expires)), str(status),
        )  # fmt: skip

    def pending(self, user_id: str | None = None) -> list[Proposal]:
        """Pending proposals (of ``user_id``, when given), oldest first; expired ones are
        marked so first."""
        self.expire()
        query = "SELECT * FROM proposals WHERE status = 'pending'"
        args: tuple[object, ...] = ()
        if user_id is not None:
            query += " AND user_id = ?"
            args = (user_id,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY created", args).fetchall()
        return [self._row(r) for r in rows]

    def get(self, proposal_id: str) -> Proposal | None:
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM proposals WHERE id = ?", (proposal_id.strip(),)
            ).fetchone()
        return None if row is None else self._row(row)

    def propose(
        self,
        text: str,
        fields: EntryFields,
        *,
        kind: str,
        field: str,
        path: str,
        user_id: str | None,
        actor: str,
    ) -> tuple[Proposal, bool]:
        """Queue ``text`` (or count a second signal for the same pending one); returns the
        proposal and whether a benign one now has its signals (the caller writes it)."""
        now = time.time()
        for found in self.pending(user_id):
            if found.kind == kind and _same(found.text) == _same(text):
                if kind != "benign":
                    return found, False
                with self._lock, self._db as db:
                    db.execute(
                        "UPDATE proposals SET signals = signals + 1 WHERE id = ?", (found.id,)
                    )
                # ready: the caller writes it, then settles it (a crash between the two
                # leaves it pending, and the next signal writes it: append_unique)
                return self.get(found.id) or found, found.signals + 1 >= SIGNALS
        proposal_id = "p-" + secrets.token_hex(4)
        with self._lock, self._db as db:
            db.execute(
                "INSERT INTO proposals (id, kind, field, text, fields, path, user_id, signals,"
                " created, expires) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
                (proposal_id, kind, field, text, render_fields(fields), path, user_id, now,
                 now + PROPOSAL_DAYS * 86400),
            )  # fmt: skip
        proposal = self.get(proposal_id)
        assert proposal is not None
        return proposal, False

    def expire(self, now: float | None = None) -> list[Proposal]:
        """Mark the pending proposals past their day as expired (and record it)."""
        now = now or time.time()
        with self._lock:
            rows = self._db.execute(
                "SELECT * FROM proposals WHERE status = 'pending' AND expires <= ?", (now,)
            ).fetchall()
        gone = [self._row(r) for r in rows]
        for proposal in gone:
            self._decide(proposal, "expired", "consent", "no answer in 7 days")
        return gone

    def settle(self, proposal: Proposal, actor: str) -> None:
        """Record that a corroborated benign proposal was written."""
        self._decide(proposal, "applied", actor, "corroborated")

    def _decide(self, proposal: Proposal, status: str, actor: str, why: str) -> None:
        self.memory.history.append(
            actor=actor, op="consent", entry_id=proposal.id, path=proposal.path, old=None,
            new=proposal.text,
            meta={"decision": status, "field": proposal.field, "kind": proposal.kind, "why": why},
        )  # fmt: skip
        with self._lock, self._db as db:
            db.execute(
                "UPDATE proposals SET status = ?, decided_at = ?, decided_by = ? WHERE id = ?",
                (status, time.time(), actor, proposal.id),
            )

    def decide(
        self, proposal_id: str, *, confirm: bool, actor: str, user_id: str | None
    ) -> tuple[Proposal, MemoryEntry | None]:
        """Confirm (write it) or reject a pending proposal. ``user_id`` (a chat command's
        sender) must be the person it is about; None is a person at the CLI."""
        proposal = self.get(proposal_id)
        if proposal is None or (user_id is not None and proposal.user_id != user_id):
            raise MemoryStoreError(f"no proposal {proposal_id.strip()!r} waiting for you")
        if proposal.status != "pending" or proposal in self.expire():
            raise MemoryStoreError(f"proposal {proposal.id} is {self.get(proposal.id).status}")  # type: ignore[union-attr]
        if not confirm:
            self._decide(proposal, "rejected", actor, "the person said no")
            return proposal, None
        # written first, idempotently: a crash before the decision is recorded leaves the
        # proposal pending, and confirming again finds the entry instead of adding a second
        written = self.memory.add_sync(
            proposal.text, actor=actor, path=proposal.path, fields=proposal.fields,
            op_key=f"consent-{proposal.id}",
        )  # fmt: skip
        self._decide(proposal, "applied", actor, "the person confirmed")
        return proposal, written
