"""Which categories an agent may read and write (``memory.allowlists``), checked in the store.

:class:`CategoryAccess` is computed from the config of the moment (a reload changes it for the
next call: it is never cached across turns) for one agent or team. Every read path turns it
into the read gate's :class:`~mindroom.memory.policy.gate.Reader` (:meth:`CategoryAccess.reader`):
:func:`~mindroom.memory.policy.gate.may_read` decides each entry as it is stored now, and its store
filter (a :class:`~mindroom.memory.policy.filters.MemoryFilter`) keeps a search from ranking what
the
gate would refuse (the tools, recall, ``mindroom memory ... --agent``); every write path asks
:meth:`CategoryAccess.writable` before the file changes. A request that names a category
outside the allowlist is refused with a :class:`MemoryAccessError` that names the agent, the
category and what it may use; a filter can only narrow the allowlist, never widen it.

An agent without an allowlist may use every category, including ones only a person wrote in
a marker; one with an allowlist sees only entries whose category (``memory.categories.default``
for entries that name none) is on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from mindroom.config.schema import Config
from mindroom.errors import MemoryAccessError
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.policy.filters import MemoryFilter
from mindroom.memory.policy.gate import Reader


@dataclass(frozen=True)
class CategoryRule:
    """How a category reaches a conversation: ``context`` ``all`` or ``rag`` (at most
    ``rag_length`` entries a turn)."""

    name: str
    context: str
    rag_length: int


@dataclass(frozen=True)
class CategoryAccess:
    """What ``owner`` (an agent or team; None: a person with the files) may use."""

    owner: str | None
    allowed: frozenset[str] | None  # None: every category
    default: str
    rules: tuple[CategoryRule, ...]

    @classmethod
    def of(cls, config: Config, owner: str | None) -> CategoryAccess:
        """The access ``config`` gives ``owner`` now."""
        categories = config.memory.categories
        listed = config.memory.allowlists.get(owner) if owner is not None else None
        return cls(
            owner=owner,
            allowed=frozenset(listed) if listed is not None else None,
            default=categories.default,
            rules=tuple(
                CategoryRule(c.name, c.context, c.rag_length) for c in categories.by_name.values()
            ),
        )

    @classmethod
    def of_team(cls, config: Config, team: str, members: Iterable[str]) -> CategoryAccess:
        """A team's access: its own allowlist, else only what every member may use (a team
        with one restricted member never widens what that member sees)."""
        if team in config.memory.allowlists:
            return cls.of(config, team)
        allowed: frozenset[str] | None = None
        for member in members:
            own = cls.of(config, member).allowed
            if own is not None:
                allowed = own if allowed is None else allowed & own
        return replace(cls.of(config, team), allowed=allowed)

    @classmethod
    def for_owner(
        cls, config: Config, owner: str | None, members: Iterable[str] | None = None
    ) -> CategoryAccess:
        """:meth:`of` an agent, or :meth:`of_team` when ``members`` are given."""
        if members is None or owner is None:
            return cls.of(config, owner)
        return cls.of_team(config, owner, members)

    @classmethod
    def everything(cls) -> CategoryAccess:
        """Every category, the default ones (tests, tools with no config at hand)."""
        return cls.of(Config(), None)

    @property
    def known(self) -> list[str]:
        """The configured categories, system first."""
        return [rule.name for rule in self.rules]

    def rule(self, category: str) -> CategoryRule | None:
        """The configured rule of ``category`` (None: a category only a marker names)."""
        return next((rule for rule in self.rules if rule.name == category), None)

    def _who(self) -> str:
        return f"agent {self.owner!r}" if self.owner else "this memory"

    def _refuse(self, category: str, verb: str) -> MemoryAccessError:
        allowed = ", ".join(sorted(self.allowed or ())) or "none"
        return MemoryAccessError(
            f"{self._who()} may not {verb} memories in category {category!r} "
            f"(memory.allowlists.{self.owner} allows: {allowed})"
        )

    def may(self, category: str) -> bool:
        """Whether the allowlist grants ``category``."""
        return self.allowed is None or category in self.allowed

    def writable(self, category: str | None) -> str | None:
        """``category`` (None: the default) checked for a write: a configured category the
        allowlist grants; raises :class:`MemoryAccessError` otherwise."""
        name = category if category is not None else self.default
        if self.rule(name) is None:
            raise MemoryAccessError(
                f"unknown memory category {name!r} (configured: {', '.join(self.known)}; "
                "add one under memory.categories.custom)"
            )
        if not self.may(name):
            raise self._refuse(name, "write")
        return category

    def readable(self, requested: Iterable[str] | None) -> frozenset[str] | None:
        """The categories a read may see: ``requested`` (every one must be granted, else
        :class:`MemoryAccessError`), or all the allowlist grants when None."""
        if requested is None:
            return self.allowed
        wanted = frozenset(requested)
        for name in sorted(wanted):
            if not self.may(name):
                raise self._refuse(name, "read")
        return wanted

    def reader(
        self,
        deliberate: Iterable[str] = (),
        requester: str | None = None,
        audiences: frozenset[str] | None = None,
    ) -> Reader:
        """This access as the read gate's :class:`~mindroom.memory.policy.gate.Reader`, with the
        types a read asks for on purpose (``deliberate``) and the audience words of the room
        the text is shown in (``audiences``; None: not shown in a room)."""
        return Reader(
            owner=self.owner,
            categories=self.allowed,
            default_category=self.default,
            deliberate=frozenset(deliberate),
            requester=requester,
            audiences=audiences,
        )

    def only(
        self,
        requested: Iterable[str] | None = None,
        deliberate: Iterable[str] = (),
        audiences: frozenset[str] | None = None,
        **conditions: object,
    ) -> MemoryFilter:
        """The store filter of a read (the gate's, :meth:`Reader.filter`): ``requested``
        categories (checked), the types asked for on purpose, the room's audience words, and
        ``conditions`` (:class:`MemoryFilter` fields)."""
        reader = self.reader(deliberate, audiences=audiences)
        return reader.filter(categories=self.readable(requested), **conditions)

    def sees(self, entry: MemoryEntry) -> bool:
        """Whether this agent may read ``entry`` (its category is granted)."""
        return self.may(entry.fields.category_or(self.default))

    def check_entry(self, entry: MemoryEntry, verb: str) -> MemoryEntry:
        """``entry`` if this agent may ``verb`` it, else :class:`MemoryAccessError`."""
        if not self.sees(entry):
            raise self._refuse(entry.fields.category_or(self.default), verb)
        return entry
