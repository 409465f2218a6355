"""One scope's memory in mem0: the :class:`~mindroom.memory.backend.MemoryBackend` contract.

Entries are mem0 memories shown as :class:`MemoryEntry` (``id`` mem0's id, ``path`` ``"mem0"``,
lines 0). Search scores are cosine similarities, like the file backend's vector half, so the
recall gate's ``min_similarity`` means the same on both backends.

mem0 finds, updates and deletes an id in any scope; here every id is checked against this
scope first, and another scope's id is answered exactly as a missing one. Writes of a scope are
serialised (mem0's dedup reads, then writes) and may carry an ``op_key`` (see
:mod:`mindroom.memory.mem0.ops`). ``MEMORY.md`` is this scope rendered as markdown
(:meth:`Mem0Memory.export_markdown`), read-only: mem0 is the source of truth here.

Consent, as on the file backend (:mod:`mindroom.memory.policy.consent`): every write of a scope runs
under the engine's write gate (:meth:`Mem0Memory._gated`), which judges each text mem0 is
about to store, verbatim or as its extraction model wrote it, with the write's
:class:`~mindroom.memory.policy.consent.WriteConsent` (none stated: none given). A sensitive text
its subject did not consent to is not stored; it becomes a proposal in the scope's
``consent.db`` (its state folder), and confirming it writes it here.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mindroom.errors import MemoryStoreError
from mindroom.memory.backend import ENGINE, threaded
from mindroom.memory.extraction import ChatLine
from mindroom.memory.files.lines import numbered_window
from mindroom.memory.files.markdown import MemoryEntry, normalize_text, parse_entries
from mindroom.memory.mem0.engine import WriteRefused
from mindroom.memory.mem0.ops import OpLog
from mindroom.memory.policy.consent import (
    UNATTRIBUTED,
    ConsentPending,
    HeldBack,
    Proposal,
    WriteConsent,
    file_proposals,
    held_entry,
)
from mindroom.memory.scope import ENTRYPOINT, MemoryScope
from mindroom.memory.search.index import SearchHit
from mindroom.speakers import named_line

if TYPE_CHECKING:
    from mindroom.memory.mem0.engine import Mem0Engine, Mem0Record

logger = logging.getLogger(__name__)

MEM0_PATH = "mem0"  # the ``path`` of every mem0 entry
MAX_READ_LINES = 400
_ID_MARKER = re.compile(r"[ \t]*<!--[ \t]*[0-9A-Za-z-]{8,}[ \t]*-->[ \t]*$")


@dataclass(frozen=True)
class Mem0Entry(MemoryEntry):
    """A mem0 memory: dated by the day its text was stored (local time), as a daily file's
    entry is by its file, so recall shows when it was said."""

    stored: dt.date | None = field(default=None, compare=False)  # not part of its identity

    @property
    def date(self) -> dt.date | None:
        return self.stored or super().date


def _stored_day(timestamp: str) -> dt.date | None:
    try:
        return dt.datetime.fromisoformat(timestamp).astimezone().date()
    except ValueError:  # empty or not ISO: undated
        return None


def _entry(record: Mem0Record) -> MemoryEntry:
    return Mem0Entry(record.id, record.text, MEM0_PATH, 0, 0, stored=_stored_day(record.updated_at))


def _checked(text: str) -> str:
    try:
        return normalize_text(text)
    except ValueError as exc:
        raise MemoryStoreError(f"cannot store an empty memory: {exc}") from None


def _same(text: str) -> str:
    """What "the same text" means for import: equal after collapsing whitespace."""
    return " ".join(text.split())


def not_found(entry_id: str) -> MemoryStoreError:
    """The one answer for a missing id and for another scope's id (the file backend's words)."""
    return MemoryStoreError(f"no memory with id {entry_id!r} (search or list to find ids)")


def render_markdown(scope_id: str, records: list[Mem0Record]) -> str:
    """``records`` as a markdown memory file: a heading, then ``- text <!-- id -->`` entries
    (continuation lines indented by two, as the file backend writes them)."""
    lines = [f"# Memories of {scope_id} (mem0)", ""]
    for record in records:
        first, *rest = normalize_text(record.text).split("\n")
        lines += [f"- {first} <!-- {record.id} -->", *("  " + line for line in rest)]
    return "\n".join(lines) + "\n"


def entries_from_markdown(document: str) -> list[str]:
    """The memory texts of a markdown file, as either backend writes it (or a person does):
    headings skipped, a trailing ``<!-- id -->`` marker of any backend dropped."""
    texts = []
    for entry in parse_entries(document, ENTRYPOINT):
        first, *rest = entry.text.split("\n")
        text = "\n".join([_ID_MARKER.sub("", first), *rest]).strip()
        if text:
            texts.append(text)
    return texts


class Mem0Memory:
    """The memories of one scope (a mem0 ``user_id`` namespace) in a shared engine."""

    backend = "mem0"
    capabilities = ENGINE

    def __init__(
        self,
        engine: Mem0Engine,
        scope_id: str,
        state_dir: Path,
        agent: str | None = None,
        person_key: str | None = None,
    ) -> None:
        self.engine = engine
        self.scope_id = scope_id
        self.state_dir = state_dir  # this scope's own small state (idempotency, proposals)
        self.agent = agent  # stored with each memory, never used to filter
        self.ops = OpLog(state_dir / "mem0_ops.db")
        # for consent: whose scope this is (a private one's person) and where its proposals
        # live; mem0 keeps no files, so the root is the state folder too
        self.scope = MemoryScope(scope_id, state_dir, state_dir, person_key)

    def _metadata(self, **extra: str) -> dict[str, Any]:
        return {**({"agent": self.agent} if self.agent else {}), **extra}

    def _owned(self, entry_id: str) -> Mem0Record:
        record = self.engine.get(entry_id)
        if record is None or record.scope_id != self.scope_id:
            raise not_found(entry_id)
        return record

    # -- consent: the one gate of every write ------------------------------------------------

    @contextmanager
    def _gated(
        self, consent: WriteConsent | None, unchanged: str | None = None
    ) -> Iterator[list[HeldBack]]:
        """Run this thread's mem0 writes past the consent check (the engine calls it with
        each text mem0 is about to store, see :meth:`Mem0Engine.gated
        <mindroom.memory.mem0.engine.Mem0Engine.gated>`); yields the texts held back.
        ``unchanged``: an update's current text (storing it again adds no fact)."""
        consent = consent or UNATTRIBUTED
        held: list[HeldBack] = []

        def admit(text: str, replaces: str | None) -> bool:
            if unchanged is not None and _same(text) == _same(unchanged):
                return True
            entry = Mem0Entry(replaces or "", text, MEM0_PATH, 0, 0)
            judged = held_entry(self.scope, entry, consent, replaces)
            if judged is None:
                return True
            if all(_same(h.entry.text) != _same(text) for h in held):
                held.append(judged)
            return False

        with self.engine.gated(admit):
            yield held

    def write_confirmed(self, proposal: Proposal, *, actor: str, op_key: str) -> MemoryEntry:
        """Write a confirmed ``proposal`` (:meth:`ConsentQueue.decide
        <mindroom.memory.policy.consent.ConsentQueue.decide>`): the update it held back when that
        memory is still here, else a new memory; idempotent by ``op_key``."""
        consent = WriteConsent.confirmed()
        if proposal.replaces is not None:
            record = self.engine.get(proposal.replaces)
            if record is not None and record.scope_id == self.scope_id:
                return self.update_sync(
                    proposal.replaces, proposal.text, actor=actor, op_key=op_key, consent=consent
                )
        return self.add_sync(proposal.text, actor=actor, op_key=op_key, consent=consent)

    # -- blocking core (runs in a worker thread) --------------------------------------------

    def add_sync(
        self,
        text: str,
        *,
        actor: str,
        path: str | None = None,
        op_key: str | None = None,
        consent: WriteConsent | None = None,
    ) -> MemoryEntry:
        """Store ``text`` as one memory, verbatim (no model call; ``path`` is ignored: mem0
        keeps no files). Raises :class:`ConsentPending` (nothing stored) when the text is a
        sensitive fact ``consent`` is not its subject's."""
        text = _checked(text)
        with self.engine.scope_lock(self.scope_id):
            if op_key is not None:
                done = self.ops.get(op_key)
                if done is not None:
                    return Mem0Entry(done.entry_id, done.text, MEM0_PATH, 0, 0)
                earlier = self.engine.find(self.scope_id, "op_key", op_key)  # crashed before
                if earlier is not None:
                    self.ops.record(op_key, "add", earlier.id, earlier.text, done=True)
                    return _entry(earlier)
            extra = {"actor": actor, **({"op_key": op_key} if op_key else {})}
            with self._gated(consent) as held:
                try:
                    record = self.engine.add(self.scope_id, text, self._metadata(**extra))
                except WriteRefused:
                    record = None  # held: filed below
            if record is not None:
                self.ops.remember([record.id])
                if op_key is not None:
                    self.ops.record(op_key, "add", record.id, record.text, done=True)
        if record is None:  # outside the scope's lock: the proposals have their own
            raise file_proposals(self, held)
        return _entry(record)

    def search_sync(self, query: str, limit: int = 5) -> list[SearchHit]:
        """This scope's memories most similar to ``query``, scored by cosine similarity."""
        if not query.strip() or limit < 1:
            return []
        hits = self.engine.search(self.scope_id, query, limit)
        return [SearchHit(_entry(record), score) for record, score in hits]

    def list_sync(self, limit: int = 50) -> list[MemoryEntry]:
        """This scope's memories, newest first."""
        records = self.engine.records(self.scope_id)
        return [_entry(r) for r in reversed(records)][: max(0, limit)]

    def get_sync(self, entry_id: str) -> MemoryEntry:
        """The memory ``entry_id`` of this scope (another scope's id is "no such memory")."""
        return _entry(self._owned(entry_id))

    def update_sync(
        self,
        entry_id: str,
        text: str,
        *,
        actor: str,
        op_key: str | None = None,
        consent: WriteConsent | None = None,
    ) -> MemoryEntry:
        """Replace the text of ``entry_id`` (repeating an update is harmless: same text). The new
        text is checked for consent as an add's is (:class:`ConsentPending`: unchanged)."""
        text = _checked(text)
        with self.engine.scope_lock(self.scope_id):
            done = self.ops.get(op_key) if op_key is not None else None
            if done is not None and done.done:
                return Mem0Entry(done.entry_id, done.text, MEM0_PATH, 0, 0)
            current = self._owned(entry_id)
            with self._gated(consent, unchanged=current.text) as held, suppress(WriteRefused):
                self.engine.update(entry_id, text, {"updated_by": actor})  # held: filed below
            if not held and op_key is not None:
                self.ops.record(op_key, "update", entry_id, text, done=True)
        if held:
            raise file_proposals(self, held)
        return Mem0Entry(entry_id, text, MEM0_PATH, 0, 0)

    def delete_sync(self, entry_id: str, *, actor: str, op_key: str | None = None) -> MemoryEntry:
        """Forget ``entry_id`` (mem0's history keeps it)."""
        with self.engine.scope_lock(self.scope_id):
            done = self.ops.get(op_key) if op_key is not None else None
            if done is not None:
                answer = Mem0Entry(done.entry_id, done.text, MEM0_PATH, 0, 0)
                record = self.engine.get(done.entry_id) if not done.done else None
                if record is not None and record.scope_id == self.scope_id:
                    self.engine.delete(done.entry_id)  # the crashed call's delete, finished
                if not done.done and op_key is not None:
                    self.ops.record(op_key, done.op, done.entry_id, done.text, done=True)
                return answer
            record = self._owned(entry_id)
            if op_key is not None:
                self.ops.record(op_key, "delete", entry_id, record.text, done=False)
            self.engine.delete(entry_id)
            if op_key is not None:
                self.ops.record(op_key, "delete", entry_id, record.text, done=True)
        return _entry(record)

    def read_file_sync(self, path: str, from_line: int = 1, lines: int = 100) -> str:
        """Lines of ``MEMORY.md`` as :meth:`export_markdown` renders this scope (numbered)."""
        name = path.strip().replace("\\", "/").removeprefix("./")
        if name != ENTRYPOINT:
            raise MemoryStoreError(
                f"no memory file {path!r}: the mem0 backend keeps no files; read {ENTRYPOINT!r} "
                "(this memory as markdown) or search"
            )
        all_lines = self.export_markdown().rstrip("\n").split("\n")
        return numbered_window(ENTRYPOINT, all_lines, from_line, lines, MAX_READ_LINES)

    # -- beyond the contract ------------------------------------------------------------------

    def extract_sync(
        self, lines: Sequence[ChatLine], consent: WriteConsent | None = None
    ) -> list[str]:
        """mem0's own extraction of ``lines`` (its model call): the texts of new memories.

        A person's line is written ``<matrix id>: text`` so that in a shared scope the
        extractor knows who said it. Each memory mem0's model writes is checked for consent
        as it is about to be stored (``consent``: the flush's, a model's; none: none given):
        a sensitive one waits as a proposal, and the others are stored. Raises
        :class:`MemoryStoreError` when the model fails.
        """
        messages = []
        for line in lines:
            if line.role not in ("user", "assistant") or not line.text.strip():
                continue
            said = named_line(line.text, line.user_id if line.role == "user" else None)
            messages.append({"role": line.role, "content": said})
        if not messages:
            return []
        with self.engine.scope_lock(self.scope_id):
            with self._gated(consent) as held:
                records = self.engine.extract(
                    self.scope_id, messages, self._metadata(actor="mem0 extraction")
                )
            self.ops.remember([r.id for r in records])
        if held:
            waiting = file_proposals(self, held)
            logger.info("memory %s: extracted facts wait for consent: %s", self.scope_id, waiting)
        return [r.text for r in records]

    def history_sync(self, entry_id: str | None = None) -> list[dict[str, str]]:
        """mem0's change records of ``entry_id`` (of this scope only), oldest first."""
        held = self.ops.ids()
        if entry_id is not None:
            if entry_id not in held:
                self._owned(entry_id)
            held = [entry_id]
        rows = []
        for memory_id in held:
            for row in self.engine.history(memory_id):
                rows.append({k: "" if v is None else str(v) for k, v in row.items()})
        return sorted(rows, key=lambda r: r.get("updated_at") or r.get("created_at", ""))

    def export_markdown(self) -> str:
        """This scope as a markdown memory file: ``- text <!-- id -->`` lines, oldest first."""
        return render_markdown(self.scope_id, self.engine.records(self.scope_id))

    def import_entries(
        self, texts: list[str], *, actor: str, held: list[str] | None = None
    ) -> list[MemoryEntry]:
        """Add each of ``texts`` not already stored verbatim in this scope (whitespace
        collapsed), on an operator's word (no one's consent); returns the entries added.
        A sensitive one waits for its subject as a proposal (its id goes to ``held``)."""
        present = {_same(r.text) for r in self.engine.records(self.scope_id)}
        added = []
        for text in texts:
            key = _same(text)
            if not key or key in present:
                continue
            try:
                added.append(self.add_sync(text, actor=actor, consent=WriteConsent.operator()))
            except ConsentPending as waiting:
                if held is not None:
                    held.extend(p.id for p in waiting.proposals)
            present.add(key)
        return added

    # -- the MemoryBackend contract, async: each call in a worker thread, bounded (see threaded)

    add = threaded(add_sync)
    search = threaded(search_sync)
    list = threaded(list_sync)
    get = threaded(get_sync)
    update = threaded(update_sync)
    delete = threaded(delete_sync)
    read_file = threaded(read_file_sync)

    def close(self) -> None:
        """Nothing to release per scope: the engine is shared (closed by the registry)."""
