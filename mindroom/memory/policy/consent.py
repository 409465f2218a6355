"""Consent before sensitive memory changes, and corroboration before benign ones.

A *sensitive* fact (preferred name, pronouns, city, language) is written only with the consent
of the person it is about, its *subject*; otherwise it becomes a *proposal*, kept for
:data:`PROPOSAL_DAYS` days, that the subject (or an admin) confirms (``!memory confirm ID`` in
chat, or ``mindroom memory confirm ID``) or rejects; unanswered, it expires. A *benign* change
(a tone preference, a new goal) found by the flush is written once a second, separate
extraction says the same (two signals); until then it waits as a proposal too.

One check, at the store's write chokepoint
-------------------------------------------
Every change to a memory file goes through :meth:`FileMemory._write
<mindroom.memory.files.store.FileMemory._write>`, which calls :func:`held_back` with the text before
and after the change and the write's :class:`WriteConsent`. Every entry text that is new in
the file (an add, an update's *new* text, a merge's synthesis, an import, a dashboard edit, the
flush) is classified there; a sensitive one stops the whole write, and the store files it as a
proposal (:class:`ConsentPending`). So a new write path cannot skip the check: a write that
states no consent is judged as an unattributed one (no consent at all). What writes carry:

``WriteConsent.model(speaker, people)``
    an agent's tool, the flush, consolidation's synthesis: a model's words are nobody's
    consent. Never exempt.
``WriteConsent.operator()`` (also the default: no consent stated)
    the admin dashboard, the CLI, ``memory import``: an operator's edit of a sensitive fact
    about someone is not that person's consent. Never exempt.
``WriteConsent.person(user_id)``
    a person editing their own memory (``/me``): exempt where the subject is that person
    (their private scope, or a fact about them), not for a fact about someone else.
``WriteConsent.confirmed()``
    writing a proposal its subject (or an admin) confirmed: that is the consent.
``KEPT``
    archiving, restoring, TTL and promotion move or bring back text that was stored before
    (through this check, or written by hand): they add no fact, so they are exempt.

The mem0 backend is checked the same way, by the same judgement (:func:`held_entry`): mem0
stores a text only through its vector store's insert or update, and both pass the write gate
of :class:`~mindroom.memory.mem0.Mem0Memory`, which judges the text as mem0 is about to
store it (for an extraction, as mem0's own model wrote it) with the write's consent. Its
proposals live in the mem0 scope's state folder, and confirming one writes it through mem0.

Whom a fact is about (:func:`subject_of`)
-----------------------------------------
In a private scope (``MemoryScope.person_key``): that scope's person, always. In a shared
scope: the known people (the speaker and the room's people, by Matrix ID, localpart or
display name) the text names, the speaker also when it is in the first person; exactly one
such person is the subject; none or several: nobody, and only an admin
(``authorization.admins``) may decide. Only the subject or an admin may confirm or reject
(:meth:`ConsentQueue.may_answer`); to anyone else a proposal does not exist.

Which field a fact is about is read from its text (English patterns, see :data:`SENSITIVE`;
a fact in another language is not recognised and is written as any other). Proposals live in
the scope's ``consent.db``: control state (resetting it drops pending proposals, never
memory). Every decision goes to the history as a ``consent`` record (confirmed, rejected,
expired, corroborated) with the proposal; a confirmed proposal's entry is written first,
with the proposal as its operation key, so a crash between the two steps never writes it
twice, and the audit shows who decided what.
"""

from __future__ import annotations

import logging
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from mindroom.authorization import is_authorized
from mindroom.errors import MemoryStoreError
from mindroom.memory.backend import keeps_files
from mindroom.memory.files.fields import EntryFields, parse_fields, render_fields
from mindroom.memory.files.markdown import MemoryEntry, parse_entries
from mindroom.memory.private import requester_key
from mindroom.store.migrations import open_store, transaction
from mindroom.store.schemas import CONSENT

if TYPE_CHECKING:
    from mindroom.memory.backend import MemoryBackend
    from mindroom.memory.scope import MemoryScope

logger = logging.getLogger(__name__)

PROPOSAL_DAYS = 7
SIGNALS = 2  # a benign change is written when this many extractions said it
SENSITIVE = {
    "preferred_name": re.compile(
        r"\b(prefers? to be called|goes by|preferred name|wants? to be called|nickname)\b", re.I
    ),
    "pronouns": re.compile(r"\bpronouns?\b|\b(she/her|he/him|they/them)\b", re.I),
    # "moved to" names a place only before a capital ("moved to Lyon", not "moved to 10:00")
    "city": re.compile(
        r"\b(lives? in|living in|based in|home ?town|city)\b"
        r"|\b(move|moved|moving|relocated?|relocating) to (?-i:[A-Z])",
        re.I,
    ),
    "language": re.compile(
        r"\b(native language|mother tongue|prefers? (to )?(speak|write)|language)\b", re.I
    ),
}
BENIGN = {
    "tone": re.compile(
        r"\b(tone|formal|informal|casual|concise|brief answers|short answers|emoji)\b", re.I
    ),
}
_FIRST_PERSON = re.compile(r"\b(i|i'm|i've|i'd|i'll|me|my|mine|myself|the user)\b", re.I)


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
    replaces: str | None = None  # a held-back update's entry: confirming replaces its text


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


@dataclass(frozen=True)
class Person:
    """Someone a fact may be about: a Matrix ID and, when known, a display name."""

    user_id: str
    name: str | None = None

    def names(self) -> list[str]:
        """How a text may name them: the Matrix ID, its localpart, the display name."""
        localpart = self.user_id[1:].split(":", 1)[0] if self.user_id.startswith("@") else ""
        return [n for n in (self.user_id, localpart, self.name) if n and len(n.strip()) >= 2]

    def named_in(self, text: str) -> bool:
        """Whether ``text`` names this person (a whole word, any case)."""
        folded = text.casefold()
        return any(
            re.search(r"(?<!\w)" + re.escape(name.strip().casefold()) + r"(?!\w)", folded)
            for name in self.names()
        )


@dataclass(frozen=True)
class WriteConsent:
    """On whose word a memory write is made (see the module docstring): ``kind`` is
    ``model``, ``operator``, ``person``, ``confirmed`` or ``kept``; ``speaker`` is who spoke
    (a model's turn) or who edits (``person``); ``people`` are the others a fact may name."""

    kind: str
    speaker: Person | None = None
    people: tuple[Person, ...] = ()

    @classmethod
    def model(
        cls, speaker: Person | str | None = None, people: Iterable[Person] = ()
    ) -> WriteConsent:
        """A model's write (a tool, the flush, a synthesis) in a turn ``speaker`` started."""
        if isinstance(speaker, str):
            speaker = next((p for p in people if p.user_id == speaker), Person(speaker))
        return cls("model", speaker, tuple(people))

    @classmethod
    def operator(cls) -> WriteConsent:
        """An operator's write (the admin dashboard, the CLI, import): no one's consent."""
        return cls("operator")

    @classmethod
    def person(cls, user_id: str) -> WriteConsent:
        """``user_id`` editing their own memory (``/me``)."""
        return cls("person", Person(user_id))

    @classmethod
    def confirmed(cls) -> WriteConsent:
        """Writing a proposal its subject or an admin confirmed."""
        return cls("confirmed")

    @property
    def exempt(self) -> bool:
        """True when nothing this write adds can need consent (no fact is added, or the
        consent was given)."""
        return self.kind in ("confirmed", "kept")

    def consents_for(self, subject: Subject) -> bool:
        """Whether this write is the consent of ``subject`` (a person about themselves)."""
        if self.exempt:
            return True
        if self.kind != "person" or self.speaker is None:
            return False
        me = self.speaker.user_id
        if subject.person_key is not None:
            return requester_key(me) == subject.person_key
        return subject.user_id == me


KEPT = WriteConsent("kept")
UNATTRIBUTED = WriteConsent.operator()  # a write that states no consent has none


@dataclass(frozen=True)
class Subject:
    """Whom a fact is about: a Matrix ID (None: nobody known, so only an admin decides) and,
    in a private scope, the key of its person (who decides there whatever ``user_id`` says)."""

    user_id: str | None
    person_key: str | None = None


def subject_of(text: str, scope: MemoryScope, consent: WriteConsent) -> Subject:
    """The person ``text`` is about, written in ``scope`` with ``consent`` (pure)."""
    speaker = consent.speaker
    if scope.person_key is not None:  # a private scope: everything in it is its person's
        mine = speaker is not None and requester_key(speaker.user_id) == scope.person_key
        return Subject(speaker.user_id if mine and speaker else None, scope.person_key)
    people = {p.user_id: p for p in consent.people}
    if speaker is not None:
        people[speaker.user_id] = people.get(speaker.user_id) or speaker
    named = {user for user, person in people.items() if person.named_in(text)}
    if speaker is not None and _FIRST_PERSON.search(text):
        named.add(speaker.user_id)
    return Subject(named.pop() if len(named) == 1 else None)


@dataclass(frozen=True)
class HeldBack:
    """A new entry text that needs its subject's consent before it is written."""

    entry: MemoryEntry
    field: str
    subject: Subject
    replaces: str | None  # the entry an update would have changed


def held_back(
    scope: MemoryScope, relative: str, old: str, new: str, consent: WriteConsent
) -> list[HeldBack]:
    """The entries of ``new`` (file ``relative`` of ``scope``, which held ``old``) whose text
    is new in the file, sensitive, and not consented to by ``consent`` (pure)."""
    if consent.exempt:
        return []
    before = set(old.splitlines())
    added = "\n".join(line for line in new.splitlines() if line not in before)
    if not any(pattern.search(added) for pattern in SENSITIVE.values()):
        return []  # the common case: nothing sensitive changed, no parsing
    old_entries = parse_entries(old, relative)
    old_texts = {_same(e.text) for e in old_entries}
    old_ids = {e.id for e in old_entries}
    held = []
    for entry in parse_entries(new, relative):
        if _same(entry.text) in old_texts:
            continue
        replaces = entry.id if entry.id in old_ids else None
        if (judged := held_entry(scope, entry, consent, replaces)) is not None:
            held.append(judged)
    return held


def held_entry(
    scope: MemoryScope, entry: MemoryEntry, consent: WriteConsent, replaces: str | None = None
) -> HeldBack | None:
    """``entry`` (a text about to be stored in ``scope``, replacing entry ``replaces``'s
    text when given) as a :class:`HeldBack` when it is sensitive and ``consent`` is not its
    subject's; None when it may be written (pure). The one judgement of both backends: the
    file store's :func:`held_back` and the mem0 store's write gate
    (:meth:`mindroom.memory.mem0.Mem0Memory.admit`)."""
    if consent.exempt:
        return None
    change = classify(entry.text, entry.fields)
    if change is None or change[0] != "sensitive":
        return None
    subject = subject_of(entry.text, scope, consent)
    if consent.consents_for(subject):
        return None
    return HeldBack(entry, change[1], subject, replaces)


class ConsentPending(MemoryStoreError):
    """A write was not made: what it adds waits for its subject's consent as ``proposals``."""

    def __init__(self, proposals: Sequence[Proposal]) -> None:
        self.proposals = list(proposals)
        super().__init__("; ".join(waiting_text(p) for p in self.proposals))


def waiting_text(proposal: Proposal) -> str:
    """What a write held back as ``proposal`` answers (a tool's result, a notice)."""
    who = proposal.user_id or "an admin (authorization.admins)"
    return (
        f"not stored yet: {proposal.field.replace('_', ' ')} is a personal detail, so it "
        f"waits for {who} to confirm (proposal {proposal.id}, for {PROPOSAL_DAYS} days). "
        f"Only they can: `!memory confirm {proposal.id}` stores it, "
        f"`!memory reject {proposal.id}` drops it"
    )


def file_proposals(memory: MemoryBackend, held: Sequence[HeldBack]) -> ConsentPending:
    """File what a write to ``memory`` held back as proposals of its scope; the error that
    says they wait (each backend's write raises it)."""
    queue = ConsentQueue(memory)
    try:
        return queue.hold(held)
    finally:
        queue.close()


def db_path(state_dir: Path) -> Path:
    """A scope's proposals (in its state folder)."""
    return state_dir / "consent.db"


class ConsentQueue:
    """The proposals of one scope, of either backend: they live in the scope's state folder
    (``memory.scope.state_dir``), and a confirmed one is written through that scope's own
    store (a file entry, or a mem0 memory)."""

    def __init__(self, memory: MemoryBackend) -> None:
        self.memory = memory
        self._db: sqlite3.Connection = open_store(db_path(memory.scope.state_dir), CONSENT)
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def _row(self, row: sqlite3.Row) -> Proposal:
        user, replaces = row["user_id"], row["replaces"]
        return Proposal(
            id=str(row["id"]),
            kind=str(row["kind"]),
            field=str(row["field"]),
            text=str(row["text"]),
            fields=parse_fields(str(row["fields"])),
            path=str(row["path"]),
            user_id=None if user is None else str(user),
            signals=int(row["signals"]),
            created=float(row["created"]),
            expires=float(row["expires"]),
            status=str(row["status"]),
            replaces=None if replaces is None else str(replaces),
        )

    def may_answer(self, proposal: Proposal, user_id: str | None, admins: Sequence[str]) -> bool:
        """Whether ``user_id`` may see, confirm or reject ``proposal``: its subject (in a
        private scope, the scope's person), or an admin; None is a person at the CLI, who
        holds the storage anyway. Anyone else: no (allow-list)."""
        if user_id is None or is_authorized(user_id, admins):
            return True
        key = self.memory.scope.person_key
        if key is not None:
            return requester_key(user_id) == key
        return proposal.user_id == user_id

    def pending(self, user_id: str | None = None) -> list[Proposal]:
        """Pending proposals (whose subject is ``user_id``, when given), oldest first; expired
        ones are marked so first."""
        self.expire()
        query = "SELECT * FROM proposals WHERE status = 'pending'"
        args: tuple[object, ...] = ()
        if user_id is not None:
            query += " AND user_id = ?"
            args = (user_id,)
        with self._lock:
            rows = self._db.execute(query + " ORDER BY created", args).fetchall()
        return [self._row(r) for r in rows]

    def waiting_for(self, user_id: str, admins: Sequence[str] = ()) -> list[Proposal]:
        """The pending proposals ``user_id`` may answer (see :meth:`may_answer`)."""
        return [p for p in self.pending() if self.may_answer(p, user_id, admins)]

    def get(self, proposal_id: str) -> Proposal | None:
        with self._lock:
            row = self._db.execute(
                "SELECT * FROM proposals WHERE id = ?", (proposal_id.strip(),)
            ).fetchone()
        return None if row is None else self._row(row)

    def hold(self, held: Sequence[HeldBack]) -> ConsentPending:
        """File the entries a write held back as proposals (see :func:`held_back`)."""
        proposals = []
        for item in held:
            proposal, _ = self.propose(
                item.entry.text,
                item.entry.fields,
                kind="sensitive",
                field=item.field,
                path=item.entry.path,
                user_id=item.subject.user_id,
                replaces=item.replaces,
            )
            logger.info(
                "memory %s: %s change waits for consent as %s (subject %s)",
                self.memory.scope_id,
                item.field,
                proposal.id,
                item.subject.user_id or "admins",
            )
            proposals.append(proposal)
        return ConsentPending(proposals)

    def propose(
        self,
        text: str,
        fields: EntryFields,
        *,
        kind: str,
        field: str,
        path: str,
        user_id: str | None,
        actor: str = "",
        replaces: str | None = None,
    ) -> tuple[Proposal, bool]:
        """Queue ``text`` about ``user_id`` (or count a second signal for the same pending
        one); returns the proposal and whether a benign one now has its signals (the caller
        writes it)."""
        del actor  # who proposed is in the history of what is written, not here
        now = time.time()
        for found in self.pending(user_id):
            if found.kind == kind and _same(found.text) == _same(text):
                if found.user_id != user_id:
                    continue  # pending(None) lists everyone's
                if kind != "benign":
                    return found, False
                with self._lock, transaction(self._db) as db:
                    db.execute(
                        "UPDATE proposals SET signals = signals + 1 WHERE id = ?", (found.id,)
                    )
                # ready: the caller writes it, then settles it (a crash between the two
                # leaves it pending, and the next signal writes it: append_unique)
                return self.get(found.id) or found, found.signals + 1 >= SIGNALS
        proposal_id = "p-" + secrets.token_hex(4)
        with self._lock, transaction(self._db) as db:
            db.execute(
                "INSERT INTO proposals (id, kind, field, text, fields, path, user_id, signals,"
                " created, expires, replaces) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)",
                (
                    proposal_id,
                    kind,
                    field,
                    text,
                    render_fields(fields),
                    path,
                    user_id,
                    now,
                    now + PROPOSAL_DAYS * 86400,
                    replaces,
                ),
            )
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
        meta = {"decision": status, "field": proposal.field, "kind": proposal.kind, "why": why}
        if keeps_files(self.memory):
            self.memory.history.append(
                actor=actor,
                op="consent",
                entry_id=proposal.id,
                path=proposal.path,
                old=None,
                new=proposal.text,
                meta=meta,
            )
        else:  # no history of ours: consent.db keeps it
            logger.info(
                "memory %s: proposal %s %s by %s (%s)",
                self.memory.scope_id,
                proposal.id,
                status,
                actor,
                why,
            )
        with self._lock, transaction(self._db) as db:
            db.execute(
                "UPDATE proposals SET status = ?, decided_at = ?, decided_by = ? WHERE id = ?",
                (status, time.time(), actor, proposal.id),
            )

    def decide(
        self,
        proposal_id: str,
        *,
        confirm: bool,
        actor: str,
        user_id: str | None,
        admins: Sequence[str] = (),
    ) -> tuple[Proposal, MemoryEntry | None]:
        """Confirm (write it) or reject a pending proposal. ``user_id`` (a chat command's
        sender) must be allowed to (:meth:`may_answer`: the subject or one of ``admins``);
        None is a person at the CLI. To anyone else it reads as no such proposal."""
        proposal = self.get(proposal_id)
        if proposal is None or not self.may_answer(proposal, user_id, admins):
            raise MemoryStoreError(f"no proposal {proposal_id.strip()!r} waiting for you")
        if proposal.status != "pending" or proposal in self.expire():
            raise MemoryStoreError(f"proposal {proposal.id} is {self.get(proposal.id).status}")  # type: ignore[union-attr]
        if not confirm:
            self._decide(proposal, "rejected", actor, "the person said no")
            return proposal, None
        # written first, idempotently: a crash before the decision is recorded leaves the
        # proposal pending, and confirming again finds the entry instead of adding a second
        written = self._write_confirmed(proposal, actor)
        self._decide(proposal, "applied", actor, "the person confirmed")
        return proposal, written

    def _write_confirmed(self, proposal: Proposal, actor: str) -> MemoryEntry:
        """Write a confirmed proposal, as its backend does (idempotently, by the proposal)."""
        return self.memory.write_confirmed(proposal, actor=actor, op_key=f"consent-{proposal.id}")
