"""Audience: who could read the conversation an entry was learned in, and which rooms may show it.

**The rule.** A memory is shown in a room only when everyone who can read that room could read
the conversation it was learned in. What Alice told an agent in her DM is recalled in her DM
(and in no room anyone else reads); what a closed room of Alice and Bob taught it is recalled
there, in Alice's DM and in Bob's, never in a room Carol reads; what a public room taught it is
recalled anywhere.

Every entry written from a conversation (the flush, the memory tools, consolidation, which gives
a merge the narrower audience of its sources) carries an ``audience`` word in its marker
(:mod:`mindroom.memory.files.fields`):

``public``
    a room anyone can read: joinable without an invite (public, knock, a space's members), or
    readable from outside (``world_readable`` history).
``dm:@person:server``
    a closed room of that one person and mindroom's accounts: their direct chat.
``room:<key>``
    a closed room of several people (invite-only, history not readable from outside, encrypted
    or not). The readers it had then are in the scope's ``audiences.json`` (its state folder),
    under that key: ``{"room": ..., "kind": ..., "name": ..., "readers": [...]}``; a new key
    is recorded whenever the room's readers differ.

An entry without the word (a hand-written line, one written before audiences were recorded,
one added with the CLI or the dashboard) has its scope's default: everyone the agent talks to
in a shared agent's or team's memory, the person in their private memory. A person can set an
entry's audience (``mindroom memory set ID --audience ...``, the dashboard).

**How strict** (``memory.audience``):

``strict`` (the default)
    the rule above, with the readers the room had when the entry was learned.
``room``
    also in the very room it was learned in, whoever reads that room now (a team room's
    newcomer gets what the room taught the agent).
``shared``
    no audience condition: every entry everywhere the agent answers (a deployment whose people
    share everything, e.g. one family); the words are still recorded.

The gate (:func:`mindroom.memory.policy.gate.may_read`) applies the rule through
:attr:`~mindroom.memory.policy.gate.Reader.audiences`, the set of words the room may show
(:func:`allowed_words`), and the store's filter applies the same set in SQL, so a search never
ranks what the room may not show. A word this module cannot resolve (a key missing from
``audiences.json``) is in no room's set: such an entry is shown nowhere until a person sets its
audience.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from mindroom.atomic import atomic_write
from mindroom.errors import MemoryStoreError
from mindroom.memory.files.fields import AUDIENCE_RE
from mindroom.memory.files.restore import set_fields_sync
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.filters import MemoryFilter
from mindroom.memory.policy.gate import RoomAudience

logger = logging.getLogger(__name__)

AudiencePolicy = Literal["strict", "room", "shared"]
POLICIES: tuple[AudiencePolicy, ...] = ("strict", "room", "shared")
PUBLIC = "public"
BOOK_NAME = "audiences.json"
BACKFILL_MARK = "audience-backfill.json"  # {"done": ..., "left": ...}: see backfill()
KEEP_READ = 256  # books whose last reading is kept
_lock = threading.Lock()
_read: dict[Path, tuple[tuple[int, int, int], dict[str, Told]]] = {}


@dataclass(frozen=True)
class Told:
    """An audience resolved: who could read the conversation (``open``: anyone could)."""

    open: bool
    readers: frozenset[str]
    kind: str  # "public", "dm", "private" (closed, several people) or "encrypted"
    room_id: str | None = None
    name: str | None = None


PUBLIC_TOLD = Told(open=True, readers=frozenset(), kind="public")


def dm_word(person: str) -> str:
    """The audience word of ``person``'s direct chat."""
    return f"dm:{person}"


class AudienceBook:
    """A scope's ``audiences.json``: the closed rooms its entries were learned in, with the
    readers each had then (read fresh on every lookup: it is small, and a person may edit it)."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / BOOK_NAME

    def rooms(self) -> dict[str, Told]:
        """Every key recorded, resolved (an unreadable file reads as none: nothing resolves,
        so its entries are shown nowhere, never everywhere). Read again whenever the file
        changed (a person may edit it)."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return {}
        stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        with _lock:
            cached = _read.get(self.path)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        found = self._resolved()
        with _lock:
            _read[self.path] = (stamp, found)
            while len(_read) > KEEP_READ:
                del _read[next(iter(_read))]
        return found

    def _resolved(self) -> dict[str, Told]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            logger.warning(
                "%s is unreadable (%s): its rooms' entries are shown nowhere", self.path, exc
            )
            return {}
        found: dict[str, Told] = {}
        for key, value in raw.items() if isinstance(raw, dict) else ():
            told = _told(value)
            if isinstance(key, str) and key.startswith("room:") and told is not None:
                found[key] = told
        return found

    def resolve(self, word: str, rooms: dict[str, Told] | None = None) -> Told | None:
        """What ``word`` says (None: it cannot be resolved)."""
        if word == PUBLIC:
            return PUBLIC_TOLD
        if word.startswith("dm:"):
            return Told(open=False, readers=frozenset({word[3:]}), kind="dm")
        return (self.rooms() if rooms is None else rooms).get(word)

    def record(self, told: Told) -> str:
        """The word of a closed room of several people, its key recorded when new."""
        key = (
            "room:"
            + hashlib.sha256(
                "\n".join([told.room_id or "", *sorted(told.readers)]).encode()
            ).hexdigest()[:8]
        )
        with _lock:
            rooms = self._raw()
            if key not in rooms or _told(rooms[key]) != told:
                rooms[key] = {
                    "room": told.room_id,
                    "kind": told.kind,
                    "name": told.name,
                    "readers": sorted(told.readers),
                }
                self.path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(self.path, json.dumps(rooms, indent=2, sort_keys=True) + "\n")
        return key

    def drop_reader(self, person: str) -> int:
        """Take ``person`` out of every recorded room (forget-me: their Matrix ID goes; the
        entries' audiences only narrow). Returns how many rooms named them."""
        with _lock:
            rooms = self._raw()
            changed = 0
            for value in rooms.values():
                readers = value.get("readers") if isinstance(value, dict) else None
                if isinstance(readers, list) and person in readers:
                    readers.remove(person)
                    changed += 1
            if changed:
                atomic_write(self.path, json.dumps(rooms, indent=2, sort_keys=True) + "\n")
        return changed

    def _raw(self) -> dict[str, dict[str, object]]:
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise MemoryStoreError(
                f"{self.path} is not valid JSON ({exc}): fix or remove it to record audiences"
            ) from exc
        return raw if isinstance(raw, dict) else {}


def _told(value: object) -> Told | None:
    if not isinstance(value, dict):
        return None
    readers = value.get("readers")
    if not isinstance(readers, list) or not all(isinstance(r, str) for r in readers):
        return None
    room, name, kind = value.get("room"), value.get("name"), value.get("kind")
    return Told(
        open=False,
        readers=frozenset(readers),
        kind=kind if isinstance(kind, str) else "private",
        room_id=room if isinstance(room, str) else None,
        name=name if isinstance(name, str) else None,
    )


def told_in(room: RoomAudience) -> Told:
    """The audience of what is said in ``room`` now. A room whose rules were never seen is
    taken as closed to its people (the narrowest it can be), never as public."""
    if not room.closed and room.rules_known:
        return Told(open=True, readers=room.readers, kind="public", room_id=room.room_id)
    if room.only_person is not None or len(room.readers) == 1:
        return Told(open=False, readers=room.readers, kind="dm", room_id=room.room_id)
    kind = "encrypted" if room.encrypted else "private"
    return Told(open=False, readers=room.readers, kind=kind, room_id=room.room_id, name=room.name)


def word_for(room: RoomAudience, book: AudienceBook) -> str:
    """The audience word of an entry learned in ``room`` (recording a closed room's readers)."""
    told = told_in(room)
    if told.open:
        return PUBLIC
    if told.kind == "dm":
        return dm_word(next(iter(told.readers)))
    return book.record(told)


def covers(told: Told, room: RoomAudience) -> bool:
    """Whether everyone who can read ``room`` could read what was told (``told``)."""
    if told.open:
        return True
    return room.closed and room.readers <= told.readers


def allowed_words(
    room: RoomAudience | None,
    policy: AudiencePolicy,
    book: AudienceBook,
    owner: str | None = None,
) -> frozenset[str] | None:
    """The audience words ``room`` may show (``""``: an entry with none, the scope's default,
    which is the person ``owner`` in a private memory, everyone in a shared one); None: no
    condition (not shown in a room, or ``policy`` is ``shared``)."""
    if room is None or policy == "shared":
        return None
    words = {PUBLIC}
    default = PUBLIC_TOLD if owner is None else Told(False, frozenset({owner}), "dm")
    if covers(default, room):
        words.add("")
    if room.closed and len(room.readers) == 1:
        words.add(dm_word(next(iter(room.readers))))
    for key, told in book.rooms().items():
        learned_here = room.room_id is not None and told.room_id == room.room_id
        if covers(told, room) or (policy == "room" and learned_here):
            words.add(key)
    return frozenset(words)


def narrower(
    words: Iterable[str | None], book: AudienceBook, owner: str | None = None
) -> str | None:
    """The audience of an entry merged from entries of ``words``: who could read every one
    (None: every source had the scope's default)."""
    wanted = list(words)
    if all(w is None for w in wanted):
        return None
    default = PUBLIC_TOLD if owner is None else Told(False, frozenset({owner}), "dm")
    rooms = book.rooms()
    told: list[Told] = []
    for word in wanted:
        found = default if word is None else book.resolve(word, rooms)
        if found is None:  # unresolvable: nobody
            found = Told(False, frozenset(), "private")
        told.append(found)
    closed = [t for t in told if not t.open]
    if not closed:
        return PUBLIC
    readers = frozenset.intersection(*(t.readers for t in closed))
    rooms_of = {t.room_id for t in closed}
    if len(readers) == 1:
        return dm_word(next(iter(readers)))
    merged = Told(
        open=False,
        readers=readers,
        kind="private",
        room_id=rooms_of.pop() if len(rooms_of) == 1 else None,
        name=None,
    )
    return book.record(merged)


def describe(word: str | None, book: AudienceBook, owner: str | None = None) -> str:
    """Where an entry was learned, for a person (``!memory list``, the dashboard): "learned in
    ...", or how an entry without an audience came to be."""
    if word is None:
        if owner:
            return f"kept for {owner} alone"
        return "added by hand or from the command line (shown wherever the agent answers)"
    if word == PUBLIC:
        return "learned in a room anyone can read"
    if word.startswith("dm:"):
        return f"learned in a direct chat with {word[3:]}"
    told = book.resolve(word)
    if told is None:
        return (
            f"learned in a room no longer known ({word}: shown nowhere until its audience is set)"
        )
    what = "an encrypted room" if told.kind == "encrypted" else "a closed room"
    label = told.name or told.room_id or "unnamed"
    people = ", ".join(sorted(told.readers)) or "nobody"
    return f"learned in {what} ({label}; readers then: {people})"


def backfill(
    memory: FileMemory, room_of_run: Callable[[str], RoomAudience | None], *, actor: str
) -> int:
    """Give the audience of the room they were learned in to the entries mindroom wrote from a
    conversation before audiences were recorded (their history names the conversation, its
    ``run``); returns how many were given one (blocking). An entry whose conversation's room
    is not known now, or that a person wrote, keeps the scope's default.

    Once a pass leaves nothing to give (every such entry has its audience), the scope's
    :data:`BACKFILL_MARK` says so and a later pass reads no history: what mindroom writes
    now always carries its audience. A pass that left some (a room not known now, an entry
    changed meanwhile) records that, and the next pass tries them again."""
    mark = memory.scope.state_dir / BACKFILL_MARK
    if _backfill_done(mark):
        return 0
    given, left = _backfill(memory, room_of_run, actor=actor)
    try:
        mark.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(mark, json.dumps({"done": not left, "left": left}) + "\n")
    except OSError as exc:  # the next start reads the history again
        logger.warning("cannot write %s: %s", mark, exc)
    if given:
        logger.info(
            "%s: %d entries given the audience they were learned in", memory.scope_id, given
        )
    return given


def _backfill_done(mark: Path) -> bool:
    """Whether ``mark`` says a past pass left nothing to give (unreadable: not done)."""
    try:
        recorded = json.loads(mark.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as exc:
        logger.warning("%s is unreadable (%s): audiences are filled in again", mark, exc)
        return False
    return isinstance(recorded, dict) and recorded.get("done") is True


def _backfill(
    memory: FileMemory, room_of_run: Callable[[str], RoomAudience | None], *, actor: str
) -> tuple[int, int]:
    """One pass of :func:`backfill`: how many entries were given an audience, how many
    could not be given one now."""
    runs: dict[str, str] = {}
    for record in memory.history_of():
        run = (record.meta or {}).get("run")
        if record.op == "add" and record.id and isinstance(run, str) and run:
            runs.setdefault(record.id, run)
    if not runs:
        return 0, 0
    book = AudienceBook(memory.scope.state_dir)
    rooms: dict[str, RoomAudience | None] = {}
    given = left = 0
    for entry in memory.list_sync(100_000, MemoryFilter()):
        run = runs.get(entry.id)
        if entry.fields.audience is not None or run is None:
            continue
        if run not in rooms:
            rooms[run] = room_of_run(run)
        room = rooms[run]
        if room is None:  # not known now: the next start tries again
            left += 1
            continue
        fields = replace(entry.fields, audience=word_for(room, book))
        try:
            set_fields_sync(memory, entry.id, fields, actor=actor)
        except MemoryStoreError as exc:  # changed meanwhile: the next start tries again
            logger.info("audience of %s in %s not set: %s", entry.id, memory.scope_id, exc)
            left += 1
            continue
        given += 1
    return given, left


DEFAULT_WORD = "default"  # what a person writes to take an entry's audience word away


def chosen(value: str, book: AudienceBook, owner: str | None = None) -> str | None:
    """The audience word a person chose (``memory set --audience``, the dashboard): ``public``,
    ``dm:@person:server``, a ``room:<key>`` the scope recorded, or ``default`` (None: no word,
    the scope's default). ValueError says what is accepted, with the rooms recorded."""
    text = value.strip()
    if text == DEFAULT_WORD:
        return None
    if text == PUBLIC or (text.startswith("dm:") and AUDIENCE_RE.fullmatch(text)):
        return text
    rooms = book.rooms()
    if text in rooms:
        return text
    known = "; ".join(f"{key}: {describe(key, book, owner)}" for key in sorted(rooms))
    what = (
        f"no room {text!r} is recorded in {book.path}"
        if text.startswith("room:")
        else f"{text!r} is not an audience"
    )
    raise ValueError(
        f"{what}: give public, dm:@person:server, default (the scope's) or a recorded room "
        f"({known or 'none recorded yet'})"
    )
