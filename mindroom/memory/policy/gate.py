"""The read gate: whether a reader may see a memory entry, and whether a turn may use a
person's private memory where it answers. Pure: plain dataclasses in, a bool out; no I/O.

Every path that shows memory text to a model asks :func:`may_read` about the entry **as it is
stored now** (never about what a history record or a search row remembers of it): recall and
its sections (long-term memory, recent and related entries, linked entries, open conflicts),
the memory tools, ``memory_query``, insights and procedural steps, and the delta header, which
looks each changed entry up by id (:mod:`mindroom.memory.search.delta`). The store's SQL filter
(:meth:`Reader.filter`, a :class:`~mindroom.memory.policy.filters.MemoryFilter`) is the same rule
written for the index, so a search never even ranks what the gate would refuse; a test checks
the two against each other.

The rule is an allow-list: an entry is shown only when every condition grants it.

* **state**: only a live entry. An entry expired by TTL, archived, deleted or not found is
  never shown (its text may not come back after a person removed it).
* **category**: on the reader's allowlist (``memory.allowlists`` of the config of the
  moment); an entry that names no category is in ``memory.categories.default``, the one
  documented default. A reader without an allowlist reads every category.
* **type**: one of the conversational types (:data:`CONVERSATIONAL_TYPES`), or a type the
  read asked for on purpose (``memory_query`` naming ``procedural``, a read by id). An
  unknown type is refused.

Where a person's **private** memory may be used at all is decided once per turn, by
:func:`private_memory_allowed` over the room's :class:`RoomAudience` (see
:func:`mindroom.pipeline.turns.plan_turn`): only where nobody but that person (and mindroom's own
accounts) can read the answer. A turn that may not use it gets no private memory at all: no
recall, no tools, no delta header, no learning.

**audience**: where the text would be shown. A read in a room carries the audience words
that room may show (:attr:`Reader.audiences`, from
:func:`mindroom.memory.policy.audience.allowed_words`): an entry is shown only when its
``audience`` word is among them, that is when everyone who can read the room could read the
conversation it was learned in. A read outside any room (the CLI, the dashboard, a person's
own page) has no such condition.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from mindroom.memory.files.fields import DEFAULT_CATEGORY
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.policy.filters import MemoryFilter

CONVERSATIONAL_TYPES = frozenset({"semantic", "episodic", "insight"})
"""Types every read may show; ``procedural`` steps only a deliberate read returns."""


class EntryState(enum.Enum):
    """Where an entry is now."""

    LIVE = "live"  # in its memory file, active
    EXPIRED = "expired"  # soft-deleted by TTL, waiting for its purge day
    ARCHIVED = "archived"  # moved to the archive (merged, or archived by consolidation)
    DELETED = "deleted"  # not in the files nor the archive (or unreadable)


@dataclass(frozen=True)
class StoredEntry:
    """The fields of an entry that access depends on, as it is stored now."""

    category: str | None  # None: none written (the default category)
    type: str  # the entry's type, its file's default applied
    state: EntryState
    audience: str = ""  # its audience word ('': none written, the scope's default)

    @classmethod
    def of(cls, entry: MemoryEntry, state: EntryState | None = None) -> StoredEntry:
        """``entry`` as read from a file (``state``: where it was found; default: its
        memory file, live unless TTL expired it)."""
        fields = entry.fields
        if state is None:
            state = EntryState.EXPIRED if fields.soft_deleted else EntryState.LIVE
        return cls(fields.category, fields.type_in(entry.path), state, fields.audience or "")


@dataclass(frozen=True)
class Reader:
    """Who reads: an agent or team (``owner``; None: a person with their files), the
    categories the config of the moment grants it (None: every one), the types this read
    asked for on purpose, the person the turn is for, and the audience words of the room the
    text would be shown in (None: not shown in a room)."""

    owner: str | None
    categories: frozenset[str] | None
    default_category: str = DEFAULT_CATEGORY
    deliberate: frozenset[str] = frozenset()  # e.g. {"procedural"}: asked for by name
    requester: str | None = None
    audiences: frozenset[str] | None = None  # the words the room may show; None: no room

    @property
    def types(self) -> frozenset[str]:
        """The types this read may show."""
        return CONVERSATIONAL_TYPES | self.deliberate

    def filter(self, **conditions: object) -> MemoryFilter:
        """:func:`may_read` as the store's filter (live entries of granted categories and
        types), narrowed by ``conditions`` (:class:`MemoryFilter` fields)."""
        base = MemoryFilter(
            categories=self.categories,
            default_category=self.default_category,
            types=self.types,
            audiences=self.audiences,
        )
        return replace(base, **conditions)  # type: ignore[arg-type]


def may_read(reader: Reader, entry: StoredEntry) -> bool:
    """Whether ``reader`` may be shown ``entry`` (see the module docstring for the rule)."""
    if entry.state is not EntryState.LIVE:
        return False
    category = entry.category or reader.default_category
    if reader.categories is not None and category not in reader.categories:
        return False
    if not heard_where_read(reader, entry):
        return False
    return entry.type in reader.types


def heard_where_read(reader: Reader, entry: StoredEntry) -> bool:
    """Whether the room ``reader`` reads in may show what was learned where ``entry`` was
    (its audience condition alone, whatever its state). A read, change or delete by id asks
    this first, so an entry told elsewhere is answered as one that does not exist: not even
    that it expired or is in a category the agent may not use is said."""
    return reader.audiences is None or entry.audience in reader.audiences


def readable(reader: Reader, entries: list[MemoryEntry]) -> list[MemoryEntry]:
    """The entries of ``entries`` (read from the memory files now) ``reader`` may see."""
    return [e for e in entries if may_read(reader, StoredEntry.of(e))]


@dataclass(frozen=True)
class RoomAudience:
    """Who can read a room's messages now, as far as memory access needs to know.

    ``readers``: the people joined or invited (not mindroom's accounts). ``closed``: nobody
    else can read it (it is invite-only and its history is not readable from outside), so
    ``readers`` are all its readers; an open room can be read by anyone. ``only_person``: the
    one person who, with mindroom's accounts, is all that can read it (their DM); None: others
    can, or it is not known.
    """

    only_person: str | None = None
    readers: frozenset[str] = field(default=frozenset())
    closed: bool = False
    room_id: str | None = None
    encrypted: bool = False
    name: str | None = None
    # False: the room's join rule and history visibility were never seen. Read as open (it
    # shows only what anyone may read), while what is learned there is kept for its people
    # alone (mindroom.memory.policy.audience.told_in): unknown is never the wider answer.
    rules_known: bool = True

    @classmethod
    def private_to(cls, person: str, room_id: str | None = None) -> RoomAudience:
        """A room only ``person`` (and mindroom's accounts) can read: their DM."""
        return cls(only_person=person, readers=frozenset({person}), closed=True, room_id=room_id)

    @classmethod
    def shared(
        cls,
        readers: frozenset[str] = frozenset(),
        *,
        closed: bool = False,
        room_id: str | None = None,
        encrypted: bool = False,
        name: str | None = None,
        rules_known: bool = True,
    ) -> RoomAudience:
        """A room other people can read (or one whose readers are not known: not closed)."""
        return cls(None, readers, closed, room_id, encrypted, name, rules_known)


def private_memory_allowed(person: str, audience: RoomAudience) -> bool:
    """Whether a turn for ``person`` may use ``person``'s private memory where it answers
    (recall, the memory tools, the delta header, learning): only in a room nobody else can
    read, however the turn got there (a mention, the router, a hand-off)."""
    return audience.only_person is not None and audience.only_person == person
