"""One agent's view of a memory: the store's read and write calls with its allowlist applied.

The memory tools, recall, the CLI with ``--agent`` and the flush reach a scope's memory
through an :class:`AgentView`, never around it, so a category the agent's allowlist
(``memory.allowlists``) does not grant is refused on every path the same way: a read sees
only granted categories (the store filters, see :mod:`mindroom.memory.policy.filters`), a read of
one entry by id, an update or a delete of an entry in another category fails with a
:class:`~mindroom.errors.MemoryAccessError`, and a write names only a granted category.
Lines of a file the agent may not read come back as a placeholder.

Whether an entry may be shown is decided by the read gate,
:func:`mindroom.memory.policy.gate.may_read`,
on the entry as it is stored now: the store's filter is the gate's (:meth:`AgentView.reading`),
and what a read returns passes the gate again before it is shown. Conversational reads leave
``procedural`` entries out: they are how-to steps an agent fetches on purpose (a
``memory_query`` naming ``procedural``, a read by id). Soft-deleted entries (expired by TTL)
are never read; ``mindroom memory restore`` brings them back.

A view made for a room (``room``, the room the text is shown in, with the deployment's
``memory.audience`` policy) reads only what that room may show
(:mod:`mindroom.memory.policy.audience`); it changes and deletes by id only that too (an entry
told elsewhere is an id that does not exist there: a delete's answer quotes the text it
removed). What it writes carries the room's audience (an update narrows the entry's to the
room's: its new words were told there).

The access is taken from the config each time a view is made (every turn), so a reload
takes effect at the next turn. An agent's view (``count``) also notes what it reads (for TTL)
and records its operations (``hotpath`` events); a view with ``relations`` links what it
writes to its neighbours (:mod:`mindroom.memory.search.relations`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TypeVar

from mindroom.errors import MemoryStoreError
from mindroom.memory.backend import MemoryBackend, keeps_files, threaded
from mindroom.memory.files.fields import NO_FIELDS, EntryFields
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.files.restore import set_fields_sync
from mindroom.memory.files.store import FileMemory
from mindroom.memory.files.writing import check_procedural
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords, db_path
from mindroom.memory.ops_events import OpEvent, emit
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.audience import (
    AudienceBook,
    AudiencePolicy,
    allowed_words,
    narrower,
    word_for,
)
from mindroom.memory.policy.consent import WriteConsent
from mindroom.memory.policy.filters import MemoryFilter
from mindroom.memory.policy.gate import (
    Reader,
    RoomAudience,
    StoredEntry,
    heard_where_read,
    may_read,
    readable,
)
from mindroom.memory.search.index import SearchHit
from mindroom.memory.search.relations import RelationSettings, link_entry
from mindroom.memory.search.session_source import (
    is_transcript_path,
    merged,
    read_transcript,
    search_sessions,
)

DELIBERATE = frozenset({"procedural"})  # types only a read asking for them returns
BY_ID = DELIBERATE  # a read by id is deliberate: any type is shown
_E = TypeVar("_E", MemoryEntry, SearchHit)


def note_access(memory: FileMemory, entries: Iterable[MemoryEntry]) -> None:
    """Record that an agent read ``entries`` now, in the scope's ``consolidation.db`` beside
    the retrieval counts (TTL reads it, see :mod:`mindroom.memory.jobs.lifecycle`); never a file
    write. Hand-written lines are left out (their ids follow their text, and TTL leaves them
    alone)."""
    ids = [e.id for e in entries if not e.hand_written]
    if not ids:
        return
    records = ConsolidationRecords(db_path(memory.scope.state_dir))
    try:
        records.note_retrieved(ids)
    finally:
        records.close()


class AgentView:
    """``memory`` as ``access`` lets its agent (or team, or person) use it."""

    def __init__(
        self,
        memory: MemoryBackend,
        access: CategoryAccess,
        *,
        count: bool = False,
        relations: RelationSettings | None = None,
        sessions: bool = False,
        room: RoomAudience | None = None,
        policy: AudiencePolicy = "strict",
    ) -> None:
        self.memory = memory
        self.access = access
        self.count = count  # an agent's reads: note them (TTL keeps what is used)
        self.relations = relations  # link what this view writes to its neighbours
        self.sessions = sessions  # past conversations are a source (memory.sources)
        self.room = room  # the room the text is shown in (None: the CLI, the dashboard)
        self.policy = policy

    @property
    def book(self) -> AudienceBook | None:
        """The scope's audiences (None: a memory that keeps no files)."""
        return AudienceBook(self.memory.scope.state_dir) if keeps_files(self.memory) else None

    @property
    def audiences(self) -> frozenset[str] | None:
        """The audience words this view's room may show (None: no condition), read now."""
        book = self.book
        if self.room is None or book is None:
            return None
        return allowed_words(self.room, self.policy, book)

    @property
    def conversations(self) -> frozenset[str] | None:
        """The audience words of the past conversations this view's room may show: as
        :attr:`audiences`, but a conversation whose audience was never recorded is shown in no
        room (it has no scope default: its words were said somewhere)."""
        words = self.audiences
        return None if words is None else words - {""}

    def told_here(self, fields: EntryFields) -> EntryFields:
        """``fields`` with the audience of this view's room, unless they name one."""
        book = self.book
        if self.room is None or book is None or fields.audience is not None:
            return fields
        return replace(fields, audience=word_for(self.room, book))

    def _linked(self, entry: MemoryEntry | None, actor: str) -> MemoryEntry | None:
        if entry is not None and self.relations and keeps_files(self.memory):
            edges = link_entry(self.memory, entry, self.relations, actor=actor)
            if edges:
                self.event("link", entry)
        return entry

    def event(self, op: str, entry: MemoryEntry | None = None, sim: float | None = None) -> None:
        """An operational event of an agent's own reads and writes (``hotpath``)."""
        if self.count:
            category = entry.fields.category_or(self.access.default) if entry else None
            emit(
                self.memory,
                OpEvent("hotpath", op, "ok", entry.id if entry else None, category, sim),
            )

    def noted(self, entries: list[_E]) -> list[_E]:
        """``entries``, noted as read now when this view counts (file memory only)."""
        if self.count and entries and keeps_files(self.memory):
            note_access(self.memory, [e.entry if isinstance(e, SearchHit) else e for e in entries])
        return entries

    @property
    def scope_id(self) -> str:
        """The scope's id (what the tools and logs name)."""
        return self.memory.scope_id

    def reader(self, deliberate: frozenset[str] = frozenset()) -> Reader:
        """This view as the read gate's reader (the allowlist of the config of the moment, the
        audience of the room)."""
        return self.access.reader(deliberate, audiences=self.audiences)

    @property
    def catching_up(self) -> bool:
        """Whether the last search did not wait for the index to follow a big file (it
        searched what was indexed so far)."""
        return keeps_files(self.memory) and self.memory.index.catching_up

    def reading(self) -> MemoryFilter:
        """The filter of a conversational read: the gate's (granted categories, live,
        conversational types)."""
        return self.reader().filter()

    def hidden(self, entry: MemoryEntry) -> bool:
        """Whether a conversational read leaves ``entry`` (as read from its file now) out."""
        return not may_read(self.reader(), StoredEntry.of(entry))

    def shown(self, hits: list[_E]) -> list[_E]:
        """The entries (or search hits) of ``hits`` a conversational read may show: each
        passes the gate on the entry as it was read now."""
        reader = self.reader()
        kept = []
        for hit in hits:
            entry = hit.entry if isinstance(hit, SearchHit) else hit
            if may_read(reader, StoredEntry.of(entry)):
                kept.append(hit)
        return kept

    def shows_by_id(self, entry: MemoryEntry) -> bool:
        """Whether a read of ``entry`` (as read from its file now) by id may show it here: what
        a read, change or delete by id asks (:meth:`_visible`), and an offer that quotes it."""
        return may_read(self.reader(BY_ID), StoredEntry.of(entry))

    def _visible(self, entry: MemoryEntry, verb: str) -> MemoryEntry:
        """``entry`` if this view may ``verb`` it by id (read, change or delete): the same
        decision for each, since a change or a delete answers with the entry's text. One
        learned where this view's room may not show it is answered as an id that does not
        exist, before anything else is said of it."""
        unknown = MemoryStoreError(f"no memory with id {entry.id!r} (search or list to find ids)")
        if not heard_where_read(self.reader(BY_ID), StoredEntry.of(entry)):
            raise unknown
        self.access.check_entry(entry, verb)
        if entry.fields.soft_deleted:
            raise MemoryStoreError(
                f"memory {entry.id} expired (not used for a long time) and waits to be purged "
                f"on {entry.fields.purge}; a person can bring it back with "
                "`mindroom memory restore`"
            )
        if not self.shows_by_id(entry):
            raise unknown
        return entry

    # -- synchronous (a worker thread; the CLI) -----------------------------------------------

    def add_sync(
        self,
        text: str,
        *,
        actor: str,
        path: str | None = None,
        op_key: str | None = None,
        fields: EntryFields = NO_FIELDS,
        run: str | None = None,
        consent: WriteConsent | None = None,
    ) -> MemoryEntry:
        """Add an entry in a granted category (``fields.category``; None: the default),
        written in conversation ``run`` on ``consent``'s word (the store checks it);
        procedural memory must be numbered steps."""
        self.access.writable(fields.category)
        if fields.type_in(path or "") == "procedural" and (why := check_procedural(text)):
            raise MemoryStoreError(why)
        if not keeps_files(self.memory):
            if fields != NO_FIELDS or path is not None:
                raise MemoryStoreError(
                    "the mem0 backend keeps no files, categories or fields: add the text alone"
                )
            return self.memory.add_sync(text, actor=actor, op_key=op_key, consent=consent)
        added = self.memory.add_sync(
            text,
            actor=actor,
            path=path,
            op_key=op_key,
            fields=self.told_here(fields),
            run=run,
            consent=consent,
        )
        self.event("create", added)
        self._linked(added, actor)
        return added

    def append_unique_sync(
        self,
        text: str,
        *,
        actor: str,
        path: str,
        fields: EntryFields = NO_FIELDS,
        run: str | None = None,
        consent: WriteConsent | None = None,
    ) -> MemoryEntry | None:
        """Append ``text`` to ``path`` (a granted category) unless the file has it already."""
        self.access.writable(fields.category)
        if not keeps_files(self.memory):
            raise MemoryStoreError("the mem0 backend keeps no files")
        return self.memory.append_unique_sync(
            text, actor=actor, path=path, fields=self.told_here(fields), run=run, consent=consent
        )

    def search_sync(self, query: str, limit: int = 5) -> list[SearchHit]:
        """The best ``limit`` entries this agent may read for ``query``."""
        only = self.reading()
        if not keeps_files(self.memory):  # no fields there: every entry is the default's
            return self.shown(self.memory.search_sync(query, limit))
        hits = self.noted(self.shown(self.memory.search_sync(query, limit, only)))
        self.event("search", hits[0].entry if hits else None, hits[0].score if hits else None)
        if self.sessions:
            found = search_sessions(self.memory, query, limit, self.conversations)
            hits = merged(hits, found, limit)
        return hits

    def list_sync(self, limit: int = 50) -> list[MemoryEntry]:
        """Entries this agent may read, in the store's listing order."""
        if not keeps_files(self.memory):
            return readable(self.reader(), self.memory.list_sync(limit))
        return readable(self.reader(), self.memory.list_sync(limit, self.reading()))

    def get_sync(self, entry_id: str) -> MemoryEntry:
        """The entry ``entry_id``, if this agent may read it."""
        return self.noted([self._visible(self.memory.get_sync(entry_id), "read")])[0]

    def update_sync(
        self,
        entry_id: str,
        text: str,
        *,
        actor: str,
        op_key: str | None = None,
        consent: WriteConsent | None = None,
    ) -> MemoryEntry:
        """Replace the text of an entry this view may read by id (:meth:`_visible`). Its fields
        stay, but for its audience, which narrows to this view's room's: the new text was told
        there. The store checks the new text for consent. The audience narrows first, so the new
        words are never shown wider, not even while an update waits for consent (it stays
        narrowed then)."""
        if not self._repeat(op_key):
            current = self._visible(self.memory.get_sync(entry_id), "change")
            entry_id = self._narrowed(current, actor).id  # a hand-written line gets an m- id
        updated = self.memory.update_sync(
            entry_id, text, actor=actor, op_key=op_key, consent=consent
        )
        self.event("update", updated)
        self._linked(updated, actor)
        return updated

    def _narrowed(self, entry: MemoryEntry, actor: str) -> MemoryEntry:
        """``entry`` (just changed in this view's room) with the narrower of its audience and
        the room's: its new words were told here."""
        book = self.book
        if self.room is None or book is None or not keeps_files(self.memory):
            return entry
        word = narrower([entry.fields.audience, word_for(self.room, book)], book)
        if word == entry.fields.audience:
            return entry
        return set_fields_sync(
            self.memory, entry.id, replace(entry.fields, audience=word), actor=actor
        )

    def delete_sync(self, entry_id: str, *, actor: str, op_key: str | None = None) -> MemoryEntry:
        """Remove an entry this view may read by id (:meth:`_visible`; the history keeps it)."""
        if not self._repeat(op_key):
            self._visible(self.memory.get_sync(entry_id), "delete")
        deleted = self.memory.delete_sync(entry_id, actor=actor, op_key=op_key)
        self.event("delete", deleted)
        return deleted

    def read_file_sync(self, path: str, from_line: int = 1, lines: int = 100) -> str:
        """Numbered lines of a memory file; entries this agent may not read are placeholders."""
        if not keeps_files(self.memory):
            return self.memory.read_file_sync(path, from_line, lines)
        if is_transcript_path(path):
            if not self.sessions:
                raise MemoryStoreError(
                    f"{path!r} is a past conversation, and past conversations are not a memory "
                    "source here (memory.sources: [memory, sessions] makes them one)"
                )
            return read_transcript(self.memory, path, from_line, lines, self.conversations)
        return self.memory.read_file_sync(path, from_line, lines, hide=self.hidden)

    def _repeat(self, op_key: str | None) -> bool:
        """Whether ``op_key`` names a write this memory did already (a resumed turn: answered
        from the record, and the entry may be gone by now)."""
        if op_key is None or not keeps_files(self.memory):
            return False
        record = self.memory.history.by_op_key(op_key)
        return record is not None and record.op != "abort"

    # -- async (the tools): each call in a worker thread, bounded (see threaded) ---------------

    add = threaded(add_sync)
    search = threaded(search_sync)
    list = threaded(list_sync)
    get = threaded(get_sync)
    update = threaded(update_sync)
    delete = threaded(delete_sync)
    read_file = threaded(read_file_sync)
