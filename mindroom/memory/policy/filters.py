"""Which entries a read may see: one filter, applied inside the store (SQL and vector mask).

A :class:`MemoryFilter` is built once per request from what the caller asked for *and* what
the agent may see (its category allowlist), and the same object filters the keyword index
(:meth:`MemoryFilter.where`, SQL over the index's field columns), the vector index and the
entries read straight from files (:meth:`MemoryFilter.holds`). The two forms agree on every
entry (a test checks them against each other), so no path can show what another would hide.
Soft-deleted entries are never seen unless a filter asks for them (restore, export).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from mindroom.memory.files.fields import DEFAULT_CATEGORY
from mindroom.memory.files.markdown import MemoryEntry

_NONE = "1 = 0"  # no entry (a boolean in SQLite and PostgreSQL alike)


@dataclass(frozen=True)
class Where:
    """An SQL condition over the index's ``entries`` table: `` AND ...`` and its arguments."""

    sql: str
    args: tuple[object, ...]


@dataclass(frozen=True)
class MemoryFilter:
    """Conditions an entry must meet; None (or empty ``exclude_types``): no condition.

    ``categories`` compares each entry's category with ``default_category`` standing in for
    entries that name none. ``ids`` keeps only those entries (provenance filters, computed from
    the history), plus every hand-written one when ``hand_written`` is True.
    """

    categories: frozenset[str] | None = None
    default_category: str = DEFAULT_CATEGORY
    pinned: bool | None = None
    importance_min: int | None = None
    importance_max: int | None = None
    updated_after: dt.date | None = None
    updated_before: dt.date | None = None
    types: frozenset[str] | None = None
    exclude_types: frozenset[str] = frozenset()
    soft_deleted: bool = False  # True: only soft-deleted entries; False: only live ones
    ids: frozenset[str] | None = None
    hand_written: bool = False
    audiences: frozenset[str] | None = None  # audience words ('' for none written) to keep

    def where(self) -> Where:
        """This filter as SQL over the index (see :mod:`mindroom.memory.search.index`)."""
        sql: list[str] = []
        args: list[object] = []

        def among(column: str, values: frozenset[str], negate: bool = False) -> None:
            marks = ", ".join("?" * len(values))
            sql.append(f"{column} {'NOT ' if negate else ''}IN ({marks})" if values else _NONE)
            args.extend(sorted(values))

        sql.append("state = ?")
        args.append("soft_deleted" if self.soft_deleted else "active")
        if self.categories is not None and not self.categories:
            sql.append(_NONE)
        elif self.categories is not None:
            args.append(self.default_category)  # the CASE's "?" comes before the list's
            among("(CASE WHEN category = '' THEN ? ELSE category END)", self.categories)
        for value, condition in (
            (None if self.pinned is None else int(self.pinned), "pinned = ?"),
            (self.importance_min, "importance >= ?"),
            (self.importance_max, "importance <= ?"),
            (_iso(self.updated_after), "updated != '' AND updated > ?"),
            (_iso(self.updated_before), "updated != '' AND updated < ?"),
        ):
            if value is not None:
                sql.append(condition)
                args.append(value)
        if self.types is not None:
            among("type", self.types)
        if self.exclude_types:
            among("type", self.exclude_types, negate=True)
        if self.audiences is not None:
            among("audience", self.audiences)
        if self.ids is not None:
            marks = ", ".join("?" * len(self.ids))
            inside = f"entry_id IN ({marks})" if self.ids else _NONE
            sql.append(f"({inside} OR entry_id LIKE 'h-%')" if self.hand_written else inside)
            args.extend(sorted(self.ids))
        return Where("".join(f" AND {part}" for part in sql), tuple(args))

    def holds(self, entry: MemoryEntry) -> bool:
        """Whether ``entry`` meets every condition (as :meth:`where` decides in SQL)."""
        fields = entry.fields
        if fields.soft_deleted != self.soft_deleted:
            return False
        if not (self._fields_hold(entry) and self._day_holds(entry)):
            return False
        kind = fields.type_in(entry.path)
        if self.types is not None and kind not in self.types:
            return False
        if kind in self.exclude_types:
            return False
        if self.audiences is not None and (fields.audience or "") not in self.audiences:
            return False
        if self.ids is not None:
            return entry.id in self.ids or (self.hand_written and entry.hand_written)
        return True

    def _fields_hold(self, entry: MemoryEntry) -> bool:
        """Whether ``entry``'s category, pin and importance meet the filter."""
        fields = entry.fields
        category = fields.category_or(self.default_category)
        importance = fields.importance_or_default
        return (
            (self.categories is None or category in self.categories)
            and (self.pinned is None or fields.pinned == self.pinned)
            and (self.importance_min is None or importance >= self.importance_min)
            and (self.importance_max is None or importance <= self.importance_max)
        )

    def _day_holds(self, entry: MemoryEntry) -> bool:
        """Whether ``entry``'s day (updated, else created, else its file's date) is within
        the filter's dates; an entry without a day meets no date condition."""
        if self.updated_after is None and self.updated_before is None:
            return True
        day = entry.fields.updated or entry.fields.created or entry.date
        return (
            day is not None
            and (self.updated_after is None or day > self.updated_after)
            and (self.updated_before is None or day < self.updated_before)
        )


def _iso(day: dt.date | None) -> str | None:
    return None if day is None else day.isoformat()


LIVE = MemoryFilter()
