"""File memory: a scope's markdown files, its search index and its history, together.

This is the ``file`` backend. The markdown files are the source of truth; every method reads
them (through the index, which syncs with them first) and every write goes through
:meth:`FileMemory._write`, the one chokepoint: it checks consent there (an entry text new in
the file that is sensitive and not consented to by the write's
:class:`~mindroom.memory.policy.consent.WriteConsent` is filed as a proposal instead, and the write
raises :class:`~mindroom.memory.policy.consent.ConsentPending`; see
:mod:`mindroom.memory.policy.consent`),
then :func:`mindroom.memory.files.protocol.edit_file` (locked, re-read, never replacing a version
it did
not see) writes after its history record is written. An answer is built from the text written, never
from a re-read. The blocking work runs in a thread with a bound, so the event loop never waits
on disk and a call always answers. A file that cannot be read is skipped by listing and
recall (logged once), not allowed to take the rest of the memory down.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from dataclasses import replace as _replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from mindroom.adapters.embeddings.install import vectors_need_numpy
from mindroom.errors import MemoryStoreError
from mindroom.memory.backend import FILES, threaded
from mindroom.memory.files.fields import (
    NO_FIELDS,
    EntryFields,
    dated_fields,
    history_meta,
    parse_fields,
)
from mindroom.memory.files.hand_edits import record_hand_edits
from mindroom.memory.files.history import History, HistoryRecord
from mindroom.memory.files.intents import Intents
from mindroom.memory.files.lines import FileHead, Hide, head_of, masked_lines, numbered_window
from mindroom.memory.files.markdown import (
    ENTRY_ID_RE,
    MemoryEntry,
    append_new_entry,
    hand_id,
    hand_lines,
    iter_entries,
    last_heading,
    new_entry_id,
    normalize_text,
    parse_entries,
    remove_entry,
    render_entry,
    replace_entry,
)
from mindroom.memory.files.protocol import clean_temp_files, edit_file, read_text
from mindroom.memory.policy.consent import (
    UNATTRIBUTED,
    HeldBack,
    Proposal,
    WriteConsent,
    file_proposals,
    held_back,
)
from mindroom.memory.policy.filters import LIVE, MemoryFilter
from mindroom.memory.scope import ENTRYPOINT, MemoryScope, confined_path
from mindroom.memory.search.index import MemoryIndex, SearchHit, memory_files

if TYPE_CHECKING:
    from mindroom.adapters.embeddings import Embedder
    from mindroom.memory.search.hybrid import Weights
    from mindroom.memory.search.pg_search import PgSearch
    from mindroom.memory.search.vectors import VectorIndex
    from mindroom.store.database import SyncDatabase

logger = logging.getLogger(__name__)

MAX_READ_LINES = 400
_T = TypeVar("_T")


class FileMemory:
    """The file memory of one scope; ``embedder`` (None: keyword-only) makes its vectors."""

    capabilities = FILES

    def __init__(self, scope: MemoryScope, embedder: Embedder | None = None) -> None:
        self.scope = scope
        self.scope_id = scope.scope_id
        self.index = MemoryIndex(scope.state_dir / "index.db", scope.root)
        self.embedder = embedder
        self.search_weights: Weights | None = None  # memory.search, set by the registry
        self._vectors: VectorIndex | None = None
        self._vectors_lock = threading.Lock()
        self.search_db: SyncDatabase | None = None  # memory.search.index, set by the registry
        self._pg_search: PgSearch | None = None
        self.history = History(scope.state_dir / "history.jsonl", self._locks)
        # other handles kept open for this scope by the code that reads it (search's thread
        # revisions): each is closed with the memory (see :meth:`held`)
        self._kept: dict[str, Any] = {}
        self._kept_lock = threading.Lock()
        self.index.observer = self._hand_edits
        clean_temp_files(scope.root, self._locks)  # a crashed writer's leftovers
        self._intents = Intents(scope, self._locks, self.history, self._entries)
        self._intents.reconcile()

    def _hand_edits(self, relative: str, old: list[MemoryEntry], new: list[MemoryEntry]) -> None:
        """Record what a person changed in a file by hand (see :mod:`~.hand_edits`). A history
        that cannot be written is logged, never allowed to stop the index (search) from
        following the files."""
        try:
            record_hand_edits(self.history, relative, old, new)
        except (OSError, MemoryStoreError):
            logger.exception("memory %s: hand edits of %s not recorded", self.scope_id, relative)

    @property
    def _locks(self) -> Path:
        return self.scope.state_dir / "locks"

    def held(self, key: str, fresh: Callable[[Any], bool], open_: Callable[[], _T]) -> _T:
        """The handle kept open for this scope under ``key``: opened by ``open_`` on first use,
        and again when ``fresh`` says the one kept is stale (which is then closed). Each has a
        ``close()``; :meth:`close` closes them all."""
        with self._kept_lock:
            kept = self._kept.get(key)
            if kept is not None and fresh(kept):
                return kept  # type: ignore[no-any-return]
            if kept is not None:
                kept.close()
            handle = self._kept[key] = open_()
            return handle

    def close(self) -> None:
        """Close the indexes (and the handles :meth:`held` kept)."""
        with self._kept_lock:
            held, self._kept = list(self._kept.values()), {}
        for handle in held:
            handle.close()
        self.index.close()
        with self._vectors_lock:
            if self._vectors is not None:
                self._vectors.close()

    def use_embedder(self, embedder: Embedder | None) -> None:
        """Make vectors with ``embedder`` from now on (a reloaded config may name another)."""
        with self._vectors_lock:
            old, self.embedder = self._vectors, embedder
            self._vectors = old if old is None or old.embedder is embedder else None
        if old is not None and self._vectors is None:
            old.close()

    @property
    def pg_search(self) -> PgSearch | None:
        """The derived index in PostgreSQL (``memory.search.index``), None when local.
        Raises :class:`EmbedderError` as :attr:`vectors` does."""
        vectors, db = self.vectors, self.search_db
        with self._vectors_lock:
            cached = self._pg_search
            if db is not None and (cached is None or (cached.db, cached.vectors) != (db, vectors)):
                from mindroom.memory.search.pg_search import PgSearch

                self._pg_search = cached = PgSearch(db, self.scope_id, self.index, vectors)
            return cached if db is not None else None

    @property
    def vectors(self) -> VectorIndex | None:
        """The vector index (None: keyword-only), opened on first use: only then are numpy
        imported and ``vectors.db`` created. Raises :class:`EmbedderError` without numpy."""
        with self._vectors_lock:
            if self._vectors is None and self.embedder is not None:
                try:
                    from mindroom.memory.search.vectors import VectorIndex
                except ImportError as exc:  # a local embedder may install it (and the rest)
                    raise vectors_need_numpy(self.embedder) from exc
                path = self.scope.state_dir / "vectors.db"
                self._vectors = VectorIndex(self.index, self.embedder, path)
            return self._vectors

    def prepare(self) -> None:
        """Bring the files to a consistent state before reading them (mirrors repair here)."""

    def as_one_write(self, operation: Callable[[], _T]) -> _T:
        """Run ``operation``, a few writes of this scope (e.g. through :meth:`write`), as one:
        a team runs it under its mirror lock and carries it to every copy."""
        return operation()

    def write(
        self,
        relative: str,
        edit: Callable[[str], str | None],
        record: Callable[[], HistoryRecord | list[HistoryRecord]] | None,
        *,
        consent: WriteConsent | None = None,
    ) -> tuple[str, str]:
        """Edit one file by the write protocol (see :meth:`_write`); ``(old, new)`` text."""
        return self._write(relative, edit, record, consent)

    # -- synchronous core (runs in a worker thread) --------------------------------------------

    def _entries(self, relative: str) -> list[MemoryEntry]:
        path, relative = confined_path(self.scope.root, relative)
        return parse_entries(read_text(path, relative), relative)

    def entries_of(self, relative: str) -> list[MemoryEntry]:
        """The entries of file ``relative`` as it is now (none when it does not exist)."""
        return self._entries(relative)

    def _write(
        self,
        relative: str,
        edit: Callable[[str], str | None],
        record: Callable[[], HistoryRecord | list[HistoryRecord]] | None,
        consent: WriteConsent | None = None,
    ) -> tuple[str, str]:
        """Edit file ``relative`` by the write protocol; ``record`` writes the history record
        (or the records of a batch) of the change, once, before the file changes, and leaves an
        intent marker until the write is settled: done, or followed by an ``abort`` record if
        the file did not change.

        Every write of a memory file comes here, so consent is checked here, on the text
        about to be written (:func:`~mindroom.memory.policy.consent.held_back`): when the change
        adds
        a sensitive fact ``consent`` does not cover (None: a write that states no consent, so
        it has none), nothing is written, no history record either; the fact is filed as a
        proposal for its subject and :class:`~mindroom.memory.policy.consent.ConsentPending` raised.
        """
        target, relative = confined_path(self.scope.root, relative)
        intents: list[tuple[list[HistoryRecord], Path]] = []
        consent = consent or UNATTRIBUTED

        def before_write(old: str, new: str) -> None:
            held = held_back(self.scope, relative, old, new, consent)
            if held:
                raise _Held(held)
            if record is not None and not intents:
                written = record()
                records = written if isinstance(written, list) else [written]
                intents.append((records, self._intents.mark(written)))

        try:
            old, new = edit_file(
                target, self._locks, edit, name=relative, before_write=before_write
            )
        except _Held as stopped:  # outside the file's lock: the proposals have their own
            self._settle(intents)  # an earlier attempt's records: nothing changed
            raise file_proposals(self, stopped.held) from None
        except BaseException:
            self._settle(intents)
            raise
        for records, marker in intents:
            if old == new:
                for written in records:
                    self._intents.abort(written)
            marker.unlink(missing_ok=True)
        return old, new

    def _settle(self, intents: list[tuple[list[HistoryRecord], Path]]) -> None:
        """After a write that failed: abort each record whose change does not show, and drop
        the markers."""
        for records, marker in intents:
            for written in records:
                self._intents.settle(written, marker)

    def _repeated(self, op_key: str | None) -> HistoryRecord | None:
        """The record of an earlier call with ``op_key`` that really wrote (None: write now)."""
        if op_key is None:
            return None
        record = self.history.by_op_key(op_key)
        return None if record is None or record.op == "abort" else record

    def find(self, entry_id: str) -> MemoryEntry:
        """The entry ``entry_id`` as it is in its file now."""
        entry_id = entry_id.strip()
        self.index.sync()
        for relative in self.index.locate(entry_id):
            for entry in self._entries(relative):
                if entry.id == entry_id:
                    return entry
        raise MemoryStoreError(f"no memory with id {entry_id!r} (search or list to find ids)")

    def lookup(self, entry_id: str) -> MemoryEntry | None:
        """:meth:`find`, or None when there is no such entry (or its file cannot be read)."""
        try:
            return self.find(entry_id)
        except MemoryStoreError:
            return None

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
        """Append a new entry to ``path`` (default ``MEMORY.md``) with ``fields`` (and the day
        it was written, outside daily files, whose name is their day); the history notes the
        conversation ``run`` it came from. ``consent``: see :meth:`_write`.

        ``op_key`` makes the call idempotent: if the history records a write with that key,
        its entry is returned (and written again only if a crash kept it out of the file).
        """
        text = _checked(text)
        _, relative = confined_path(self.scope.root, path or ENTRYPOINT)
        fields = dated_fields(fields, relative)
        earlier = self._repeated(op_key)
        if earlier is not None:
            present = _entry(self._entries(earlier.path), earlier.id)
            if present is not None:
                return present
            relative, entry_id, text = earlier.path, earlier.id, earlier.new or text
            fields = parse_fields(str((earlier.meta or {}).get("fields", "")))
            record = None  # the intent is recorded: complete it
        else:
            entry_id = new_entry_id()

            def record() -> HistoryRecord:
                return self.history.append(
                    actor=actor,
                    op="add",
                    entry_id=entry_id,
                    path=relative,
                    old=None,
                    new=text,
                    op_key=op_key,
                    meta=history_meta(fields, run),
                )

        def edit(doc: str) -> str | None:
            if _entry(parse_entries(doc, relative), entry_id) is not None:
                return None
            return append_new_entry(doc, entry_id, text, fields)

        _, new = self._write(relative, edit, record, consent)
        return _found(new, relative, entry_id)

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
        """Append ``text`` to ``path`` unless an entry with the same text is already there
        (``consent``: see :meth:`_write`)."""
        text = _checked(text)
        _, relative = confined_path(self.scope.root, path)
        entry_id = new_entry_id()
        fields = dated_fields(fields, relative)

        def edit(doc: str) -> str | None:
            existing = {same_text(e.text) for e in parse_entries(doc, relative)}
            return (
                None
                if same_text(text) in existing
                else append_new_entry(doc, entry_id, text, fields)
            )

        def record() -> HistoryRecord:
            return self.history.append(
                actor=actor,
                op="add",
                entry_id=entry_id,
                path=relative,
                old=None,
                new=text,
                meta=history_meta(fields, run),
            )

        old, new = self._write(relative, edit, record, consent)
        return None if old == new else _found(new, relative, entry_id)

    def add_many_sync(
        self,
        relative: str,
        items: Sequence[NewEntry],
        *,
        actor: str,
        consent: WriteConsent | None = None,
    ) -> list[MemoryEntry]:
        """Append ``items`` to file ``relative`` as they are given (an import), in one write:
        one lock, one rewrite of the file, one batch of history records (``add``, one per
        entry, one fsync). Returns the entries written, in order.

        An item's ``m-`` id is kept unless the file already holds it (then it gets a fresh
        one: the caller decides about ids found elsewhere); an ``h-`` item without fields is
        written as a hand-written line, so its id (which follows its file and text) comes
        back, unless no hand-written form of its text reads back in place (then it becomes a
        mindroom entry ``m-`` + the id's hex). Each heading an item stands under is written
        before it when the file does not end under that heading already. Consent is checked
        on the whole batch (see :meth:`_write`): one held item holds the batch back.
        """
        if not items:
            return []
        items = [_replace(item, text=_checked(item.text)) for item in items]
        _, relative = confined_path(self.scope.root, relative)
        planned: list[str] = []

        def edit(doc: str) -> str | None:
            taken = {e.id for e in parse_entries(doc, relative)}
            as_markers: set[int] = set()
            for _attempt in range(2):  # again with the hand-written lines that did not read back
                planned[:] = _plan_ids(items, relative, taken, as_markers)
                new = _append_items(doc, relative, items, planned, as_markers)
                missing = _unread(new, relative, planned, items)
                if not missing - as_markers:
                    return new
                as_markers |= missing
            raise MemoryStoreError(f"an import into {relative} did not read back; nothing written")

        def record() -> list[HistoryRecord]:
            records = [
                HistoryRecord(
                    time=0.0,
                    actor=actor,
                    op="add",
                    id=entry_id,
                    path=relative,
                    old=None,
                    new=item.text,
                    meta=history_meta(item.fields),
                )
                for entry_id, item in zip(planned, items, strict=True)
            ]
            return self.history.append_many(records)

        _, new = self._write(relative, edit, record, consent)
        entries = {e.id: e for e in parse_entries(new, relative)}
        return [entries[entry_id] for entry_id in planned if entry_id in entries]

    def update_sync(
        self,
        entry_id: str,
        text: str,
        *,
        actor: str,
        op_key: str | None = None,
        consent: WriteConsent | None = None,
    ) -> MemoryEntry:
        """Replace the text of ``entry_id`` in its file; the new text is checked for consent
        as an added one is (see :meth:`_write`)."""
        text = _checked(text)
        earlier = self._repeated(op_key)
        if earlier is not None and earlier.op == "update":
            return self.find(
                hand_id(earlier.path, text) if earlier.id.startswith("h-") else earlier.id
            )
        entry = self.find(entry_id)

        def record() -> HistoryRecord:
            return self.history.append(
                actor=actor,
                op="update",
                entry_id=entry.id,
                path=entry.path,
                old=entry.text,
                new=text,
                op_key=op_key,
            )

        # a mindroom entry notes the day it changed; a hand-written line stays as people wrote it
        fields = (
            None
            if entry.hand_written or entry.text == text
            else _replace(entry.fields, updated=dt.date.today())
        )
        old, new = self._write(
            entry.path,
            lambda doc: replace_entry(doc, entry.path, entry.id, text, fields),
            record,
            consent,
        )
        if old == new:
            if entry.text != text:
                raise MemoryStoreError(f"memory {entry_id!r} changed while updating; try again")
            return entry
        # a hand-written line's id follows its text: find the entry where it stood
        entries = parse_entries(new, entry.path)
        wanted = hand_id(entry.path, text) if entry.hand_written else entry.id
        found = _entry(entries, wanted) or next(
            (e for e in entries if e.start_line == entry.start_line), None
        )
        if found is None:
            raise MemoryStoreError(f"memory {entry_id!r} changed while updating; look it up again")
        return found

    def delete_sync(self, entry_id: str, *, actor: str, op_key: str | None = None) -> MemoryEntry:
        """Remove ``entry_id`` from its file; the history keeps its text."""
        earlier = self._repeated(op_key)
        if earlier is not None and earlier.op == "delete":
            return MemoryEntry(earlier.id, earlier.old or "", earlier.path, 0, 0)
        entry = self.find(entry_id)

        def record() -> HistoryRecord:
            return self.history.append(
                actor=actor,
                op="delete",
                entry_id=entry.id,
                path=entry.path,
                old=entry.text,
                new=None,
                op_key=op_key,
                meta=history_meta(entry.fields),
            )

        old, new = self._write(
            entry.path, lambda doc: remove_entry(doc, entry.path, entry.id), record
        )
        if old == new:
            raise MemoryStoreError(f"memory {entry_id!r} changed while deleting; try again")
        return entry

    def restore_sync(self, entry_id: str, *, actor: str) -> MemoryEntry:
        """Bring back an archived, deleted or expired entry, with its id, where it was."""
        from mindroom.memory.files.restore import restore_sync  # restoring builds on this module

        return restore_sync(self, entry_id.strip(), actor=actor)

    def list_sync(self, limit: int = 50, only: MemoryFilter = LIVE) -> list[MemoryEntry]:
        """Entries ``only`` holds (default: the live ones) of MEMORY.md, then daily files newest
        first, then other files.

        A file that cannot be read (not UTF-8, a link out of the folder) is skipped and logged.
        """
        files = [relative for relative, _ in memory_files(self.scope.root)]
        daily = sorted((f for f in files if f.startswith("memory/")), reverse=True)
        ordered = [f for f in files if f == ENTRYPOINT] + daily
        ordered += [f for f in files if f not in ordered]
        found: list[MemoryEntry] = []
        for relative in ordered:
            try:
                path, relative = confined_path(self.scope.root, relative)
                entries = iter_entries(read_text(path, relative), relative)
            except MemoryStoreError as exc:
                skip_unreadable(self.scope, relative, exc)
                continue
            # parsed as taken: a big daily file is read only as far as the listing needs
            held = (entry for entry in entries if only.holds(entry))
            found.extend(itertools.islice(held, max(0, limit - len(found))))
            if len(found) >= limit:
                break
        return found

    def read_file_sync(
        self, path: str, from_line: int = 1, lines: int = 100, *, hide: Hide | None = None
    ) -> str:
        """Numbered lines ``from_line``.. of a memory file; the lines of entries ``hide`` is
        True for read as a placeholder (their numbers kept)."""
        target, relative = confined_path(self.scope.root, path)
        if not target.is_file():
            raise MemoryStoreError(f"no memory file {relative!r}")
        all_lines = masked_lines(read_text(target, relative), relative, hide)
        return numbered_window(relative, all_lines, from_line, lines, MAX_READ_LINES)

    def head(self, relative: str, max_lines: int, *, hide: Hide | None = None) -> FileHead:
        """The first ``max_lines`` lines of a file as a model reads them, numbered
        (:func:`~mindroom.memory.files.lines.head_of`: no guidance for people, no lines of
        entries ``hide`` is True for); empty when the file is missing.

        A file that cannot be read is skipped (logged once) and reads as missing.
        """
        try:
            target, relative = confined_path(self.scope.root, relative)
            text = read_text(target, relative)
        except MemoryStoreError as exc:
            skip_unreadable(self.scope, relative, exc)
            return FileHead([], 0, 0)
        return head_of(text, relative, max_lines, hide)

    def history_of(self, entry_id: str | None = None) -> list[HistoryRecord]:
        """History records (of one entry when given)."""
        return self.history.records(entry_id)

    def get_sync(self, entry_id: str) -> MemoryEntry:
        """The entry ``entry_id`` (:meth:`find`: as it is in its file now)."""
        return self.find(entry_id)

    def search_sync(self, query: str, limit: int = 5, only: MemoryFilter = LIVE) -> list[SearchHit]:
        """The best ``limit`` entries ``only`` holds for ``query`` (hybrid search)."""
        from mindroom.memory.search.hybrid import search_hits  # hybrid search builds on this module

        return search_hits(self, query, limit, self.search_weights, only)

    def write_confirmed(self, proposal: Proposal, *, actor: str, op_key: str) -> MemoryEntry:
        """Write a confirmed ``proposal`` (:meth:`ConsentQueue.decide
        <mindroom.memory.policy.consent.ConsentQueue.decide>`): the update it held back when its
        entry still reads as it did (else, and for an add, a new entry in its file, with its
        fields); idempotent by ``op_key``."""
        consent = WriteConsent.confirmed()
        if proposal.replaces is not None and self.lookup(proposal.replaces) is not None:
            return self.update_sync(
                proposal.replaces, proposal.text, actor=actor, op_key=op_key, consent=consent
            )
        return self.add_sync(
            proposal.text,
            actor=actor,
            path=proposal.path,
            fields=proposal.fields,
            op_key=op_key,
            consent=consent,
        )

    # -- the async backend interface: each call in a worker thread, bounded (see threaded) ------

    add = threaded(add_sync)
    search = threaded(search_sync)
    list = threaded(list_sync)
    get = threaded(get_sync)
    update = threaded(update_sync)
    delete = threaded(delete_sync)
    read_file = threaded(read_file_sync)


class _Held(Exception):
    """Raised inside a file's lock to stop a write that needs consent (see :meth:`_write`)."""

    def __init__(self, held: list[HeldBack]) -> None:
        super().__init__(f"{len(held)} change(s) need consent")
        self.held = held


_skipped: set[tuple[str, str, str]] = set()


def skip_unreadable(scope: MemoryScope, relative: str, error: MemoryStoreError) -> None:
    """Log (once per scope, file and reason, not every turn) that a file is left out."""
    key = (str(scope.root), relative, str(error))
    if key not in _skipped:
        if len(_skipped) > 10_000:  # a bound, not a cache: at worst a file is logged again
            _skipped.clear()
        _skipped.add(key)
        logger.warning("memory %s: skipping %s: %s", scope.scope_id, relative, error)


def today(now: dt.datetime | None = None) -> str:
    """Today's date as daily files name it (local time)."""
    return (now or dt.datetime.now()).strftime("%Y-%m-%d")


def _entry(entries: list[MemoryEntry], entry_id: str) -> MemoryEntry | None:
    return next((e for e in entries if e.id == entry_id), None)


def _found(document: str, relative: str, entry_id: str) -> MemoryEntry:
    """The entry ``entry_id`` in the text just written (not re-read: a later save may have
    changed the file already, which must not turn a done write into an error or a hang)."""
    entry = _entry(parse_entries(document, relative), entry_id)
    if entry is None:
        raise MemoryStoreError(f"memory {entry_id} was written but is no longer in {relative}")
    return entry


@dataclass(frozen=True)
class NewEntry:
    """An entry to write as it is given (see :meth:`FileMemory.add_many_sync`)."""

    text: str
    fields: EntryFields = NO_FIELDS
    entry_id: str | None = None  # m-: kept; h-: written by hand; None: a fresh id
    heading: str | None = None  # the markdown heading line it stands under
    note: str | None = None  # a line written right after it (an archive note)


def _plan_ids(
    items: Sequence[NewEntry], relative: str, taken: set[str], as_markers: set[int]
) -> list[str]:
    """The id each item will have in file ``relative``, which holds ``taken`` already."""
    taken = set(taken)
    planned: list[str] = []
    for n, item in enumerate(items):
        wanted = item.entry_id or ""
        hand = wanted.startswith("h-") and item.fields == NO_FIELDS and n not in as_markers
        if hand and hand_lines(item.text) is not None:
            planned.append(hand_id(relative, item.text))
            continue
        if wanted.startswith("h-"):
            wanted = "m-" + wanted[2:]
        while not ENTRY_ID_RE.fullmatch(wanted) or wanted in taken:
            wanted = new_entry_id()
        taken.add(wanted)
        planned.append(wanted)
    return planned


def _unread(new: str, relative: str, ids: list[str], items: Sequence[NewEntry]) -> set[int]:
    """Which items do not read back from ``new`` with their planned id and text."""
    written = {(e.id, e.text) for e in parse_entries(new, relative)}
    pairs = enumerate(zip(ids, items, strict=True))
    return {n for n, (entry_id, item) in pairs if (entry_id, item.text) not in written}


def _append_items(
    doc: str, relative: str, items: Sequence[NewEntry], ids: list[str], as_markers: set[int]
) -> str:
    """``doc`` with ``items`` at its end under their ids (hand-written lines for ``h-`` ids)."""
    heading = last_heading(doc)
    lines: list[str] = []
    for entry_id, item in zip(ids, items, strict=True):
        if item.heading is not None and item.heading != heading:
            lines += ["", item.heading] if doc.strip() or lines else [item.heading]
            heading = item.heading
        hand = hand_lines(item.text) if entry_id.startswith("h-") else None
        lines += hand if hand is not None else render_entry(entry_id, item.text, item.fields)
        if item.note is not None:
            lines.append(item.note)
    eol = "\r\n" if doc.endswith("\r\n") else "\n"
    if doc and not doc.endswith("\n"):
        doc += eol
    return doc + "".join(line + eol for line in lines)


def _checked(text: str) -> str:
    try:
        return normalize_text(text)
    except ValueError as exc:
        raise MemoryStoreError(f"cannot store an empty memory: {exc}") from None


def same_text(text: str) -> str:
    """``text`` as compared for "the same entry": its words, spacing and case aside."""
    return " ".join(text.split()).casefold()
