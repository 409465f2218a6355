"""An entry's structured fields, as written in its id marker. Pure functions, no I/O.

A mindroom entry's first line ends in its id marker; the fields follow the id inside the same
comment, as ``key=value`` words (``pinned`` alone is a flag)::

    - Alice prefers tea <!-- m-1a2b3c4d category=preferences importance=4 pinned -->
    - Alice moved to Lyon <!-- m-0f0f0f0f category=profile created=2026-11-02 updated=2026-11-20 -->

Keys (every one optional; what is not written takes its default):

``category``
    a name from ``memory.categories`` (lowercase letters, digits, ``_`` and ``-``).
    Default: ``memory.categories.default`` (``general``).
``importance``
    1 (trivia) to 5 (essential). Default 3.
``pinned``
    never expires (TTL), always kept. Default: not pinned.
``type``
    ``semantic`` (a lasting fact), ``episodic`` (what happened), ``insight`` (an observation
    about the person, written by the background insight pass) or ``procedural`` (numbered
    steps). Default: ``procedural`` in the ``procedural`` category, ``episodic`` in a daily file
    (``memory/YYYY-MM-DD.md``), else ``semantic``.
``state``
    ``active`` or ``soft_deleted`` (expired by TTL; kept until ``purge``). Default ``active``.
``purge``
    the day a soft-deleted entry is removed for good.
``created``, ``updated``
    days (``YYYY-MM-DD``) the entry was written and last changed.
``audience``
    who could read the conversation it was learned in (:mod:`mindroom.memory.policy.audience`):
    ``public`` (a room anyone can join or read), ``dm:@person:server`` (that person's direct
    chat) or ``room:<8 hex digits>`` (a closed room; its readers then are in the scope's
    ``audiences.json``). Default: the scope's (everyone the agent talks to, in a shared
    agent's memory; the person, in their private memory).

A word that is not one of these, or a value that does not parse (``importance=high``), is
kept as written when the entry is rewritten and otherwise ignored (the default applies), so a
typo never loses a line or a word. Hand-written lines have no marker: every default applies.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from dataclasses import dataclass, field, replace

ENTRY_TYPES = ("semantic", "episodic", "insight", "procedural")
STATES = ("active", "soft_deleted")
DEFAULT_CATEGORY = "general"
DEFAULT_IMPORTANCE = 3
CATEGORY_RE = re.compile(r"[a-z][a-z0-9_-]{0,39}")
# one word of the marker: no whitespace, and never "<" or ">" (so never "<!--" or "-->")
FIELD_WORD = r"[^\s<>]+"
_DAILY_RE = re.compile(r"(?:^|/)memory/\d{4}-\d{2}-\d{2}\.md$")
AUDIENCE_RE = re.compile(r"public|dm:@[^\s<>:]+:[^\s<>]+|room:[0-9a-f]{8}")
_ORDER = (
    "category",
    "importance",
    "pinned",
    "type",
    "state",
    "purge",
    "created",
    "updated",
    "audience",
)


@dataclass(frozen=True)
class EntryFields:
    """What an entry's marker says; None: not written (the default applies)."""

    category: str | None = None
    importance: int | None = None
    pinned: bool = False
    type: str | None = None
    state: str | None = None
    purge: dt.date | None = None
    created: dt.date | None = None
    updated: dt.date | None = None
    audience: str | None = None
    extra: tuple[str, ...] = field(default=())  # words not understood, kept verbatim

    @property
    def soft_deleted(self) -> bool:
        """Whether TTL expired the entry (it waits for its purge day, hidden from retrieval)."""
        return self.state == "soft_deleted"

    def category_or(self, default: str = DEFAULT_CATEGORY) -> str:
        """The category, ``default`` when none is written."""
        return self.category or default

    @property
    def importance_or_default(self) -> int:
        """The importance, 3 when none is written."""
        return self.importance if self.importance is not None else DEFAULT_IMPORTANCE

    def type_in(self, path: str) -> str:
        """The type, else the default of an entry in file ``path`` (``procedural`` in the
        ``procedural`` category)."""
        if self.type is not None:
            return self.type
        if self.category == "procedural":
            return "procedural"
        return "episodic" if is_daily_path(path) else "semantic"


NO_FIELDS = EntryFields()


def is_daily_path(path: str) -> bool:
    """Whether ``path`` is a daily file (``memory/YYYY-MM-DD.md``), whose name is its day."""
    return _DAILY_RE.search(path) is not None


def _date(value: str | None) -> dt.date | None:
    if value is None or not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        return None


@functools.lru_cache(maxsize=4096)  # markers repeat; EntryFields is immutable
def parse_fields(words: str) -> EntryFields:
    """The fields of the words after the id in a marker (see the module docstring)."""
    values: dict[str, str] = {}  # the first good value of each key
    pinned = False
    extra: list[str] = []
    for word in words.split():
        key, sep, value = word.partition("=")
        if key in values or (key == "pinned" and "pinned" in values):
            extra.append(word)
        elif not sep and key == "pinned":
            values["pinned"], pinned = "yes", True
        elif sep and _valid(key, value):
            values[key] = value
            pinned = pinned or (key == "pinned" and value.lower() in _YES)
        else:
            extra.append(word)
    importance = values.get("importance")
    return EntryFields(
        category=values.get("category"),
        importance=int(importance) if importance else None,
        pinned=pinned,
        type=values.get("type"),
        state=values.get("state"),
        purge=_date(values.get("purge")),
        created=_date(values.get("created")),
        updated=_date(values.get("updated")),
        audience=values.get("audience"),
        extra=tuple(extra),
    )


_YES = ("yes", "true", "1")
_NO = ("no", "false", "0")


def _valid(key: str, value: str) -> bool:
    """Whether ``key=value`` is a field with a good value (else it is kept as an extra word)."""
    if key == "category":
        return CATEGORY_RE.fullmatch(value) is not None
    if key == "importance":
        return value in ("1", "2", "3", "4", "5")
    if key == "pinned":
        return value.lower() in _YES + _NO
    if key == "type":
        return value in ENTRY_TYPES
    if key == "state":
        return value in STATES
    if key == "audience":
        return AUDIENCE_RE.fullmatch(value) is not None
    return key in ("purge", "created", "updated") and _date(value) is not None


def render_fields(fields: EntryFields) -> str:
    """The words of ``fields`` in a marker, each written key once, in a fixed order; "" when
    nothing is written."""
    words: list[str] = []
    for key in _ORDER:
        value = getattr(fields, key)
        if key == "pinned":
            if value:
                words.append("pinned")
        elif value is not None:
            text = value.isoformat() if isinstance(value, dt.date) else str(value)
            words.append(f"{key}={text}")
    words.extend(fields.extra)
    return " ".join(words)


def check_fields(fields: EntryFields) -> EntryFields:
    """``fields`` when every value is one the marker can hold; ValueError naming the first that
    is not (for fields a caller sets, not ones read from a file)."""
    if fields.category is not None and not CATEGORY_RE.fullmatch(fields.category):
        raise ValueError(
            f"category {fields.category!r} is not a category name (lowercase letters, digits,"
            " '_' or '-', starting with a letter)"
        )
    if fields.importance is not None and not 1 <= fields.importance <= 5:
        raise ValueError(f"importance must be 1 to 5, not {fields.importance}")
    if fields.type is not None and fields.type not in ENTRY_TYPES:
        raise ValueError(f"type must be one of {', '.join(ENTRY_TYPES)}, not {fields.type!r}")
    if fields.state is not None and fields.state not in STATES:
        raise ValueError(f"state must be one of {', '.join(STATES)}, not {fields.state!r}")
    if fields.audience is not None and not AUDIENCE_RE.fullmatch(fields.audience):
        raise ValueError(
            f"audience {fields.audience!r} is not one: public, dm:@person:server or room:<key>"
        )
    for word in fields.extra:
        if not re.fullmatch(FIELD_WORD, word):
            raise ValueError(f"{word!r} cannot be written in a marker")
    return fields


def merged_fields(
    keep: EntryFields, other: EntryFields, today: dt.date | None = None
) -> EntryFields:
    """The fields of an entry that merges ``keep`` and ``other``: ``keep``'s category and type,
    the higher importance, pinned if either was, live, written ``today``."""
    importances = [f.importance for f in (keep, other) if f.importance is not None]
    return EntryFields(
        category=keep.category or other.category,
        importance=max(importances) if importances else None,
        pinned=keep.pinned or other.pinned,
        type=keep.type,
        created=today or dt.date.today(),
    )


def dated_fields(fields: EntryFields, relative: str) -> EntryFields:
    """``fields`` with the day written noted, unless the file's name is its day."""
    if fields.created is not None or is_daily_path(relative):
        return fields
    return replace(fields, created=dt.date.today())


def history_meta(fields: EntryFields, run: str | None = None) -> dict[str, str] | None:
    """A history record's meta: the entry's fields and the conversation it came from."""
    meta = {"fields": render_fields(fields), "run": run or ""}
    return {key: value for key, value in meta.items() if value} or None
