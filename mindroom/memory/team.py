"""Team memory, mirrored into every member's storage.

A team's files live once per member, under
``<storage>/agents/<member>/memory_files/team_<members>/`` (``MEMORY.md``, ``memory/...``), so
each member's folder holds everything it knows. Writes go to one copy through the normal
:class:`FileMemory` path (locked, never replacing an unseen version, with history) and are then
carried to every other copy, so an entry has one id in all of them; update and delete through
any member reach every copy.

One lock (the team's mirror lock, shared by every process and every member's view of the
team) is held around the whole operation: compare the copies, the edit itself, and carrying
it to the other copies. Copies are compared by *content* against the *base*: the text every
copy had when they were last made equal (kept under the team's state dir). A copy equal to the
base is unchanged; a copy that differs was edited. When one copy changed, its text goes to
the others. When several changed (two hand edits in two mirrors, or a hand edit racing a
write), they are merged entry by entry (:func:`merge_copies`): what one side added is added,
what one side removed is removed, and an entry both sides changed differently keeps both texts
(the other side's under a new id, with its own marker), each with the narrower of the two sides'
audiences: a merge never drops an entry's audience, category or type. A hand edit is never
overwritten. A missing copy is restored. Writes to copies go through
:func:`mindroom.memory.files.protocol.edit_file`, so a person saving a copy while it is being
written is merged too, not lost. Repairs of diverged or missing copies are recorded in the
team's history.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from mindroom.errors import MemoryStoreError
from mindroom.memory.files.fields import NO_FIELDS, EntryFields
from mindroom.memory.files.history import HistoryRecord
from mindroom.memory.files.markdown import (
    ENTRY_ID_RE,
    MemoryEntry,
    parse_entries,
    remove_entry,
    render_entry,
    replace_entry,
)
from mindroom.memory.files.protocol import (
    atomic_write,
    clean_temp_files,
    edit_file,
    file_lock,
    read_text,
)
from mindroom.memory.files.store import FileMemory, NewEntry, skip_unreadable
from mindroom.memory.policy.audience import AudienceBook, narrower
from mindroom.memory.policy.consent import WriteConsent
from mindroom.memory.policy.filters import LIVE, MemoryFilter
from mindroom.memory.scope import MemoryScope, state_dir, team_scope_id
from mindroom.memory.search.index import SearchHit, memory_files

_T = TypeVar("_T")
_PASSES = 3  # a person saving during a pass makes another pass; bounded


def mirror_root(storage: Path, member: str, scope_id: str, file_root: str | None = None) -> Path:
    """Where ``member`` keeps its copy of team ``scope_id``'s files."""
    parent = storage / file_root if file_root else storage / "agents"
    return parent / member / "memory_files" / scope_id


def _raw_lines(document: str, entry: MemoryEntry) -> list[str]:
    lines = document.removeprefix("\ufeff").split("\n")
    return [line.removesuffix("\r") for line in lines[entry.start_line - 1 : entry.end_line]]


Narrow = Callable[[list[str | None]], str | None]
"""Who may be shown an entry both sides changed: the narrower of their audience words."""


def _key(entry: MemoryEntry) -> tuple[str, str, EntryFields]:
    """What makes two copies of an entry the same: its id, its text and its marker's fields (a
    changed audience or category is a change, as a changed text is)."""
    return entry.id, entry.text, entry.fields


def _kept_id(entry: MemoryEntry, taken: set[str]) -> str:
    """A new id for the other side's text of an entry both sides changed: drawn from its id
    and text, so merging the same copies again gives the same file."""
    seed = f"{entry.id}\0{entry.text}"
    for attempt in range(1_000):
        digest = hashlib.sha256(f"{seed}\0{attempt}".encode("utf-8", "surrogatepass"))
        candidate = "m-" + digest.hexdigest()[:8]
        if candidate not in taken:
            return candidate
    raise MemoryStoreError(f"no free entry id for a merged copy of {entry.id}")  # pragma: no cover


def merge_copies(base: str, ours: str, theirs: str, path: str, narrow: Narrow) -> str:
    """``ours`` with the changes ``theirs`` made to ``base``, entry by entry (pure, but for what
    ``narrow`` records about closed rooms).

    Entries ``theirs`` added (or changed) are appended as written there; entries ``theirs``
    removed are removed from ``ours`` when ``ours`` still has them unchanged. An entry both sides
    changed differently keeps both texts (:func:`_keep_both`).
    """
    if theirs in (base, ours):
        return ours
    if ours == base:
        return theirs
    base_keys = {_key(e) for e in parse_entries(base, path)}
    their_entries = parse_entries(theirs, path)
    their_keys = {_key(e) for e in their_entries}
    result = ours
    for entry in parse_entries(base, path):  # removed (or changed) there
        unchanged_here = _key(entry) in {_key(e) for e in parse_entries(result, path)}
        if _key(entry) not in their_keys and unchanged_here:
            result = remove_entry(result, path, entry.id) or result
    current = parse_entries(result, path)
    keys = {_key(e) for e in current}
    taken = {e.id for e in current}
    added: list[str] = []
    for entry in their_entries:
        if _key(entry) in base_keys or _key(entry) in keys:
            continue
        if entry.id in taken and ENTRY_ID_RE.fullmatch(entry.id):
            result, lines = _keep_both(result, entry, path, taken, narrow)
            added.extend(lines)
        else:
            added.extend(_raw_lines(theirs, entry))
            taken.add(entry.id)
    if not added:
        return result
    if result and not result.endswith("\n"):
        result += "\n"
    return result + "".join(line + "\n" for line in added)


def _keep_both(
    result: str, theirs: MemoryEntry, path: str, taken: set[str], narrow: Narrow
) -> tuple[str, list[str]]:
    """``result`` and the lines to append for ``theirs``, an entry ``result`` holds (by id) with
    another text or marker: both sides changed it.

    Both texts are kept: ``result``'s under its id, the other side's under a new id with its own
    marker (category, type and the rest), and both take ``narrow`` of the two audiences, so
    neither text is shown anywhere one side would not show it. When both sides hold the same
    text, it stays one entry, with the narrower audience.
    """
    ours = next(e for e in parse_entries(result, path) if e.id == theirs.id)
    audience = narrow([ours.fields.audience, theirs.fields.audience])
    if ours.fields.audience != audience:
        narrowed = replace(ours.fields, audience=audience)
        result = replace_entry(result, path, ours.id, ours.text, narrowed) or result
    if theirs.text == ours.text:
        return result, []
    new_id = _kept_id(theirs, taken)
    taken.add(new_id)
    return result, render_entry(new_id, theirs.text, replace(theirs.fields, audience=audience))


def _carry(
    seen: str | None, merged: str, base: str | None, path: str, narrow: Narrow
) -> Callable[[str], str]:
    """The edit that brings a copy read as ``seen`` to ``merged``, merging a newer save."""

    def edit(doc: str) -> str:
        if doc == (seen or ""):
            return merged
        return merge_copies(base or "", merged, doc, path, narrow)

    return edit


class TeamMemory(FileMemory):
    """A team's memory: a :class:`FileMemory` on one member's copy, mirrored to the others."""

    def __init__(
        self,
        storage: Path,
        members: Sequence[str],
        *,
        via: str | None = None,
        file_root: str | None = None,
    ) -> None:
        scope_id = team_scope_id(members)
        self.members = sorted(set(members))
        self.mirrors = {m: mirror_root(storage, m, scope_id, file_root) for m in self.members}
        primary = via if via in self.mirrors else self.members[0]
        super().__init__(MemoryScope(scope_id, self.mirrors[primary], state_dir(storage, scope_id)))
        for root in self.mirrors.values():
            clean_temp_files(root, self._locks)
        self._held = threading.local()
        # the copies' file signatures when last found equal; unchanged means nothing to compare
        self._consistent: list[tuple[str, str, int, int, int, int]] | None = None

    # -- comparing and carrying copies (always under the mirror lock) --------------------------

    @contextmanager
    def _mirror_lock(self) -> Iterator[None]:
        """The team's one lock; re-entrant within a thread (an update's find repairs too)."""
        if getattr(self._held, "depth", 0):
            self._held.depth += 1
            try:
                yield
            finally:
                self._held.depth -= 1
            return
        with file_lock(self._locks, self.scope.state_dir / "mirror"):
            self._held.depth = 1
            try:
                yield
            finally:
                self._held.depth = 0

    def _base_path(self, relative: str) -> Path:
        digest = hashlib.sha256(relative.encode()).hexdigest()[:24]
        return self.scope.state_dir / "mirror_base" / f"{digest}.md"

    def _signature(self) -> list[tuple[str, str, int, int, int, int]]:
        found = []
        for member, root in self.mirrors.items():
            for relative, path in memory_files(root, archive=True):
                try:
                    stat = path.stat()
                except FileNotFoundError:
                    continue
                found.append(
                    (
                        member,
                        relative,
                        stat.st_ino,
                        stat.st_mtime_ns,
                        stat.st_ctime_ns,
                        stat.st_size,
                    )
                )
        return found

    def _sync_file(self, relative: str, propagating: bool) -> tuple[list[str], bool]:
        """Make every copy of ``relative`` equal (see the module docstring).

        Returns the copies repaired (recorded in the history) and whether anything was written.
        """
        base_path = self._base_path(relative)
        base = read_text(base_path) if base_path.exists() else None
        texts: dict[str, str | None] = {}
        for member, root in self.mirrors.items():
            path = root / relative
            texts[member] = read_text(path, relative) if path.is_file() else None
        if all(text is None for text in texts.values()):
            base_path.unlink(missing_ok=True)
            return [], False
        # the edits: the primary's first (the change this operation made), then the others
        primary = self._primary_member()
        edits: list[str] = []
        for member in [primary, *self.mirrors]:
            text = texts[member]
            if text is not None and text != base and text not in edits:
                edits.append(text)
        merged = edits[0] if edits else base or ""
        for other in edits[1:]:
            merged = merge_copies(base or "", merged, other, relative, self._narrow)
        repaired: list[str] = []
        wrote = False
        for member, root in self.mirrors.items():
            seen = texts[member]
            if seen == merged:
                continue
            wrote = True
            _, new = edit_file(
                root / relative,
                self._locks,
                _carry(seen, merged, base, relative, self._narrow),
                name=f"{member}:{relative}",
            )
            if propagating and seen == base and new == merged:
                continue  # carrying the edit this operation made: not a repair
            repaired.append(f"{member}:{relative}")
            self.history.append(
                actor="repair",
                op="repair",
                entry_id="",
                path=f"{member}:{relative}",
                old=seen,
                new=new,
            )
        if merged != base:
            atomic_write(base_path, merged)
        return repaired, wrote

    def _narrow(self, words: list[str | None]) -> str | None:
        """The narrower of ``words`` in this team's audiences (its default: everyone)."""
        return narrower(words, AudienceBook(self.scope.state_dir))

    def _primary_member(self) -> str:
        return next(m for m, root in self.mirrors.items() if root == self.scope.root)

    def _repair_locked(self, propagating: bool = False) -> list[str]:
        repaired: list[str] = []
        for _ in range(_PASSES):
            signature = self._signature()
            if signature == self._consistent:
                break
            wrote = False
            for relative in sorted({entry[1] for entry in signature}):
                try:
                    done, written = self._sync_file(relative, propagating)
                except MemoryStoreError as exc:  # an unreadable copy: leave that file alone
                    skip_unreadable(self.scope, relative, exc)
                    continue
                repaired += done
                wrote = wrote or written
            if not wrote:  # every copy equal, read after the last write: nothing moved since
                self._consistent = signature
                break
        return repaired

    def repair(self) -> list[str]:
        """Make every copy equal, keeping every copy's edits; returns what was repaired."""
        with self._mirror_lock():
            return self._repair_locked()

    def prepare(self) -> None:
        self.repair()

    def _mirrored(self, operation: Callable[[], _T]) -> _T:
        """Run a write under the mirror lock: repair, the write, then carry it to every copy."""
        with self._mirror_lock():
            self._repair_locked()
            try:
                return operation()
            finally:
                self._consistent = None
                self._repair_locked(propagating=True)

    def as_one_write(self, operation: Callable[[], _T]) -> _T:
        return self._mirrored(operation)

    def write(
        self,
        relative: str,
        edit: Callable[[str], str | None],
        record: Callable[[], HistoryRecord | list[HistoryRecord]] | None,
        *,
        consent: WriteConsent | None = None,
    ) -> tuple[str, str]:
        return self._mirrored(
            lambda: super(TeamMemory, self).write(relative, edit, record, consent=consent)
        )

    def add_many_sync(
        self,
        relative: str,
        items: Sequence[NewEntry],
        *,
        actor: str,
        consent: WriteConsent | None = None,
    ) -> list[MemoryEntry]:
        return self._mirrored(
            lambda: super(TeamMemory, self).add_many_sync(
                relative, items, actor=actor, consent=consent
            )
        )

    # every read repairs first; every write runs inside one mirror lock
    def find(self, entry_id: str) -> MemoryEntry:
        self.repair()
        return super().find(entry_id)

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
        return self._mirrored(
            lambda: super(TeamMemory, self).add_sync(
                text,
                actor=actor,
                path=path,
                op_key=op_key,
                fields=fields,
                run=run,
                consent=consent,
            )
        )

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
        return self._mirrored(
            lambda: super(TeamMemory, self).append_unique_sync(
                text, actor=actor, path=path, fields=fields, run=run, consent=consent
            )
        )

    def update_sync(
        self,
        entry_id: str,
        text: str,
        *,
        actor: str,
        op_key: str | None = None,
        consent: WriteConsent | None = None,
    ) -> MemoryEntry:
        return self._mirrored(
            lambda: super(TeamMemory, self).update_sync(
                entry_id, text, actor=actor, op_key=op_key, consent=consent
            )
        )

    def delete_sync(self, entry_id: str, *, actor: str, op_key: str | None = None) -> MemoryEntry:
        return self._mirrored(
            lambda: super(TeamMemory, self).delete_sync(entry_id, actor=actor, op_key=op_key)
        )

    def restore_sync(self, entry_id: str, *, actor: str) -> MemoryEntry:
        return self._mirrored(lambda: super(TeamMemory, self).restore_sync(entry_id, actor=actor))

    def list_sync(self, limit: int = 50, only: MemoryFilter = LIVE) -> list[MemoryEntry]:
        self.repair()
        return super().list_sync(limit, only)

    def search_sync(self, query: str, limit: int = 5, only: MemoryFilter = LIVE) -> list[SearchHit]:
        self.repair()
        return super().search_sync(query, limit, only)
