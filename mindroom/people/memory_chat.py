"""``!memory list | forget | undo | remember``: a person reads and corrects, from the chat, what
the agents and teams of a room remember about them.

What is *about* a person is the map's own rule (:func:`mindroom.people.data.entries_about`): in
their private memory of a companion, everything; in a shared agent's or team's memory, the
entries that name their Matrix ID, hold their words, or were written in a conversation they
spoke in. Nobody else's facts are ever looked at for them, so another person's request finds
nothing and is answered exactly as "nothing found". An admin (``authorization.admins``) may name
the person (``!memory list @bob:example.org``); for anyone else a named person is answered as
if nothing were known about them.

* ``list [PAGE]``: in a direct chat with mindroom (``in_dm``), the entries with their ids, dates
  and where each was learned (:func:`learned_where`), :data:`PAGE_SIZE` a page; elsewhere only
  how many there are, and to ask in a direct message (texts name personal details).
* ``forget WORDS`` (or an entry id): the entries about the person whose text holds every word
  are listed (texts in a direct chat only; elsewhere only those the room may show, so no id or
  place of what was told where not everyone there reads is named) and recorded, by id, as the
  requester's *pending* forget in the ledger
  (:class:`~mindroom.store.ledger_tables.MemoryForgets`): nothing is deleted until ``forget
  confirm`` (or a reaction, :func:`confirm_forget`). A pending forget lasts
  :data:`FORGET_TTL_S` and survives a restart; a new ``forget`` replaces it.
* ``forget confirm``: deletes them by the ordinary delete path, the person named as the actor in
  the history (not the erasure of forget-me: the text stays restorable).
* ``undo``: restores the last confirmed forget within :data:`UNDO_S` (``memory restore``).
* ``remember TEXT``: stores a fact about the sender at once, with the sender's consent
  (:meth:`WriteConsent.person <mindroom.memory.policy.consent.WriteConsent>`): a personal detail
  about anyone else waits for that person, as every write does.

It does not decide who may read a room (the caller says ``in_dm``), and it sends nothing: it
answers text, and the caller records the message that carried a pending forget's list
(:func:`record_prompt`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from mindroom.authorization import is_authorized
from mindroom.config.schema import Config
from mindroom.errors import MemoryStoreError
from mindroom.memory.backend import MemoryBackend, keeps_files
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.audience import AudienceBook, describe, word_for
from mindroom.memory.policy.consent import ConsentPending, Person, WriteConsent
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.policy.view import AgentView
from mindroom.memory.registry import MemoryRegistry
from mindroom.people.data import entries_about
from mindroom.store.ledger_tables import ForgetRecord, MemoryForgets

logger = logging.getLogger(__name__)

PAGE_SIZE = 10
FORGET_TTL_S = 3600.0  # a pending forget waits an hour for its confirmation
UNDO_S = 86400.0  # a confirmed forget can be undone for a day
SHOWN_CHARS = 300  # an entry's text is cut here in a listing
MAX_WORDS_CHARS = 500  # longer forget input is not searched for
MAX_FACT_CHARS = 2000  # a longer remember is refused
FORGET_SHOWN = 50  # a forget's listing names this many entries, and how many more
ACTIONS = ("list", "forget", "undo", "remember")
ONLY_IN_DM = "send `!memory list` in a direct message with me to read them (they are personal)"
NOTHING = "I remember nothing about {who} here."
ONLY_HERE = (
    "Outside a direct message I look only at what everyone here may read: send `!memory "
    "forget WORDS` in a direct message with me to look at everything."
)


@dataclass(frozen=True)
class Found:
    """An entry about a person, in the memory of agent or team ``owner``."""

    owner: str
    memory: MemoryBackend
    entry: MemoryEntry
    date: dt.date | None


@dataclass(frozen=True)
class ChatAnswer:
    """The text answering a command; ``forget`` is the pending forget it lists, whose message
    the caller records once sent (:func:`record_prompt`)."""

    text: str
    forget: ForgetRecord | None = None


def learned_where(owner: str, memory: MemoryBackend, entry: MemoryEntry) -> str:
    """Where ``entry`` was learned, as a person reads it: the audience it records
    (:func:`mindroom.memory.policy.audience.describe`), in which agent's memory."""
    private = memory.scope.person_key is not None
    where = f"in your private memory of {owner}" if private else f"in {owner}'s memory"
    if not keeps_files(memory):
        return where
    told = describe(
        entry.fields.audience, AudienceBook(memory.scope.state_dir), "you" if private else None
    )
    return f"{where}, {told}"


def shown_to(
    config: Config, person: str, memory: MemoryBackend, entries: list[MemoryEntry]
) -> list[MemoryEntry]:
    """The entries of ``entries`` the person's own direct chat may show (the read gate, with
    the deployment's audience rule): what the person can list, forget and be told, so no
    command shows them what someone else said where they could not read it."""
    return shown_in(config, RoomAudience.private_to(person), memory, entries)


def shown_in(
    config: Config, room: RoomAudience, memory: MemoryBackend, entries: list[MemoryEntry]
) -> list[MemoryEntry]:
    """The entries of ``entries`` that ``room`` may show (the read gate, with the deployment's
    audience rule)."""
    if not keeps_files(memory):
        return entries
    view = AgentView(memory, CategoryAccess.everything(), room=room, policy=config.memory.audience)
    return [e for e in entries if not view.hidden(e)]


def is_action(argument: str) -> bool:
    """Whether ``!memory <argument>`` is one of this module's."""
    return argument.strip().split(" ", 1)[0].lower() in ACTIONS


def matches(text: str, words: str) -> bool:
    """Whether ``text`` holds every word of ``words`` (any case)."""
    folded = text.casefold()
    return all(word in folded for word in words.casefold().split())


def _subject(config: Config, sender: str, rest: str) -> tuple[str, str, bool]:
    """``(whom, the rest, allowed)``: a leading Matrix ID names whom a command is about; only
    an admin may name someone else (anyone else is answered as about a person with nothing)."""
    first, _, after = rest.strip().partition(" ")
    if first.startswith("@") and ":" in first:
        allowed = first == sender or is_authorized(sender, config.authorization.admins)
        return first, after.strip(), allowed
    return sender, rest.strip(), True


def _who(subject: str, sender: str) -> str:
    return "you" if subject == sender else subject


def _memories(
    config: Config,
    registry: MemoryRegistry,
    owners: Sequence[str],
    subject: str,
    asker: str | None = None,
) -> list[tuple[str, MemoryBackend]]:
    """The memories of the agents and teams ``owners`` as ``subject`` sees them: a shared one's,
    and their own of a private companion (asked by someone else, ``asker``, one the subject
    never talked to is not made for them)."""
    found: dict[str, tuple[str, MemoryBackend]] = {}
    for name in owners:
        memory: MemoryBackend | None = None
        if name in config.agents:
            instance = registry.private_instance(name, subject)
            absent = instance is not None and not instance.memory_root.exists()
            if absent and asker not in (None, subject):
                continue
            memory = registry.for_agent(name, subject)
        elif name in config.teams:
            memory = registry.for_team(list(config.teams[name].agents), subject)
        if memory is not None:
            found.setdefault(memory.scope_id, (name, memory))
    return list(found.values())


def _first_seen(memory: MemoryBackend) -> dict[str, float]:
    """When each entry id of ``memory`` was first written (its history; mem0 keeps none)."""
    history = getattr(memory, "history_of", None)
    seen: dict[str, float] = {}
    for record in history() if history is not None else []:
        seen.setdefault(record.id, record.time)
    return seen


def about(
    config: Config,
    registry: MemoryRegistry,
    owners: Sequence[str],
    subject: str,
    asker: str | None = None,
) -> list[Found]:
    """Every live entry about ``subject`` in the memories of ``owners``, asked by ``asker``
    (default: the subject; blocking)."""
    found = []
    for owner, memory in _memories(config, registry, owners, subject, asker):
        seen = _first_seen(memory)
        mine = entries_about(config, registry.storage, registry, subject, memory)
        for entry in shown_to(config, subject, memory, mine):
            when = seen.get(entry.id)
            date = entry.date or (dt.datetime.fromtimestamp(when).date() if when else None)
            found.append(Found(owner, memory, entry, date))
    return found


def _line(item: Found, *, text: bool) -> str:
    date = item.date.isoformat() if item.date else "undated"
    line = f"- `{item.entry.id}` ({date}, {learned_where(item.owner, item.memory, item.entry)})"
    if not text:
        return line
    words = " ".join(item.entry.text.split())
    if len(words) > SHOWN_CHARS:
        words = words[: SHOWN_CHARS - 1] + "…"
    return f"{line}: {words}"


def page_text(items: Sequence[Found], page: int, who: str, command: str) -> str:
    """Page ``page`` (1-based) of ``items`` about ``who``, and how to read the next (pure)."""
    pages = max(1, -(-len(items) // PAGE_SIZE))
    page = min(max(page, 1), pages)
    shown = items[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    lines = [f"**What I remember about {who}** ({len(items)}, page {page} of {pages})"]
    lines += [_line(item, text=True) for item in shown]
    if page < pages:
        lines += ["", f"Send `{command} {page + 1}` for the next page."]
    lines += ["", "`!memory forget WORDS` forgets an entry (after you confirm it)."]
    return "\n".join(lines)


def list_text(
    config: Config,
    registry: MemoryRegistry,
    owners: Sequence[str],
    sender: str,
    argument: str,
    *,
    in_dm: bool,
) -> str:
    """The answer to ``!memory list [@person] [PAGE]`` (blocking)."""
    subject, rest, allowed = _subject(config, sender, argument)
    who = _who(subject, sender)
    if rest and not rest.isdigit():
        return "Use `!memory list` or `!memory list PAGE` (a page number)."
    items = about(config, registry, owners, subject, sender) if allowed else []
    if not items:
        return NOTHING.format(who=who)
    if not in_dm:
        count = f"{len(items)} thing{'s' if len(items) != 1 else ''}"
        return f"I remember {count} about {who} here: {ONLY_IN_DM}."
    command = "!memory list" + (f" {subject}" if subject != sender else "")
    return page_text(items, int(rest or 1), who, command)


def about_me_text(
    config: Config,
    registry: MemoryRegistry,
    owner: str,
    memory: MemoryBackend,
    user_id: str,
    view: AgentView | None = None,
) -> str:
    """What the agents' listing tool answers: every entry of ``memory`` about ``user_id`` with
    its id, date and where it was learned (the entries ``!memory list`` finds, of those the
    turn's room may show: ``view``, the turn's view; blocking)."""
    seen = _first_seen(memory)
    items = []
    mine = entries_about(config, registry.storage, registry, user_id, memory)
    for entry in view.shown(mine) if view is not None else shown_to(config, user_id, memory, mine):
        when = seen.get(entry.id)
        date = entry.date or (dt.datetime.fromtimestamp(when).date() if when else None)
        items.append(Found(owner, memory, entry, date))
    if not items:
        return f"nothing is remembered about {user_id} in this memory"
    return "\n".join(_line(item, text=True) for item in items)


def _forget_matches(
    config: Config,
    registry: MemoryRegistry,
    owners: Sequence[str],
    subject: str,
    words: str,
    asker: str,
    where: RoomAudience | None = None,
) -> list[Found]:
    """The entries about ``subject`` that ``words`` names: by id, or holding every word; of
    those, only the ones room ``where`` may show (None: the subject's direct chat)."""
    items = about(config, registry, owners, subject, asker)
    if where is not None:
        items = [i for i in items if shown_in(config, where, i.memory, [i.entry])]
    by_id = [i for i in items if i.entry.id == words.strip()]
    return by_id or [i for i in items if matches(i.entry.text, words)]


async def answer(
    config: Config,
    registry: MemoryRegistry,
    forgets: MemoryForgets,
    owners: Sequence[str],
    sender: str,
    argument: str,
    *,
    room_id: str,
    in_dm: bool,
    people: Sequence[Person] = (),
    room: RoomAudience | None = None,
) -> ChatAnswer:
    """The answer to ``!memory <argument>`` (one of :data:`ACTIONS`) from ``sender`` in room
    ``room_id`` with the agents and teams ``owners``, whose people are ``people`` and whose
    readers are ``room`` (the audience of what ``remember`` stores)."""
    action, _, rest = argument.strip().partition(" ")
    action, rest = action.lower(), rest.strip()
    if action == "list":
        text = await asyncio.to_thread(
            partial(list_text, in_dm=in_dm), config, registry, owners, sender, rest
        )
        return ChatAnswer(text)
    if action == "forget":
        if rest.lower() == "confirm":
            return ChatAnswer(await confirm_forget(config, registry, forgets, sender, in_dm=in_dm))
        # outside a DM, only what this room may show (an unknown room: what anyone may read)
        where = None if in_dm else room or RoomAudience.shared()
        return await _forget(config, registry, forgets, owners, sender, rest, room_id, where)
    if action == "undo":
        return ChatAnswer(await undo_forget(config, registry, forgets, sender, in_dm=in_dm))
    return ChatAnswer(
        await asyncio.to_thread(remember, config, registry, owners, sender, rest, people, room)
    )


async def _forget(
    config: Config,
    registry: MemoryRegistry,
    forgets: MemoryForgets,
    owners: Sequence[str],
    sender: str,
    rest: str,
    room_id: str,
    where: RoomAudience | None,
) -> ChatAnswer:
    """``!memory forget WORDS`` in the sender's direct chat (``where`` None) or in room
    ``where``: there, only entries it may show are looked at, and listed without their texts;
    the answer says so whether or not others matched (it tells nothing of them)."""
    in_dm = where is None
    subject, words, allowed = _subject(config, sender, rest)
    if not words:
        return ChatAnswer(
            "Use `!memory forget WORDS`: I list what I remember about you with those words, "
            "and forget it once you confirm."
        )
    if len(words) > MAX_WORDS_CHARS:
        return ChatAnswer(f"That is too long to search for (over {MAX_WORDS_CHARS} characters).")
    who = _who(subject, sender)
    found = (
        await asyncio.to_thread(
            _forget_matches, config, registry, owners, subject, words, sender, where
        )
        if allowed
        else []
    )
    elsewhere = "" if in_dm else f"\n\n{ONLY_HERE}"
    if not found:
        return ChatAnswer(f"I remember nothing about {who} with those words here.{elsewhere}")
    entries = [(i.owner, i.memory.scope_id, i.entry.id) for i in found]
    record = await forgets.offer(sender, subject, entries, room_id, FORGET_TTL_S)
    minutes = int(FORGET_TTL_S // 60)
    lines = [f"**I would forget {len(found)} thing{'s' if len(found) != 1 else ''} about {who}**"]
    lines += [_line(i, text=in_dm) for i in found[:FORGET_SHOWN]]
    if len(found) > FORGET_SHOWN:
        lines.append(f"- and {len(found) - FORGET_SHOWN} more")
    lines += [
        "",
        f"Nothing is deleted yet: react ✅ to this message or send `!memory forget confirm` "
        f"within {minutes} minutes. `!memory undo` brings it back for a day after.",
    ]
    return ChatAnswer("\n".join(lines) + elsewhere, record)


async def record_prompt(
    forgets: MemoryForgets, said: ChatAnswer | None, event_id: str | None
) -> None:
    """Remember that message ``event_id`` (None: not posted) listed ``said``'s pending forget
    (a ✅ reaction to it confirms: :func:`confirm_forget` with ``prompt_event_id``)."""
    if said is not None and said.forget is not None and event_id is not None:
        await forgets.set_prompt(said.forget.requester, said.forget.created_at, event_id)


async def cancel_forget(
    config: Config, forgets: MemoryForgets, person: str, prompt_event_id: str
) -> str:
    """The pending forget the message ``prompt_event_id`` listed, dropped by ``person`` (a ❌
    reaction): nothing is deleted. Anyone else, or nothing pending: the same answer."""
    record = await forgets.by_prompt(prompt_event_id)
    if record is None or not _may_decide(config, record, person):
        return "Nothing is waiting for your confirmation to be forgotten."
    if not await forgets.cancel(record):
        return "Nothing is waiting for your confirmation to be forgotten."
    return "Nothing was forgotten: that request is dropped."


def _may_decide(config: Config, record: ForgetRecord, person: str) -> bool:
    """The requester, the person the entries are about, or an admin."""
    admins = config.authorization.admins
    return person in (record.requester, record.subject) or is_authorized(person, admins)


async def confirm_forget(
    config: Config,
    registry: MemoryRegistry,
    forgets: MemoryForgets,
    person: str,
    prompt_event_id: str | None = None,
    *,
    in_dm: bool = True,
) -> str:
    """Carry out a pending forget confirmed by ``person``: their own (``!memory forget
    confirm``), or the one the message ``prompt_event_id`` listed (a ✅ reaction to it), which
    only its requester, the person it is about or an admin may confirm. Deletes by the ordinary
    delete path with ``person`` as the actor (restorable: :func:`undo_forget`); answers what
    was done, texts only when ``in_dm``. Anyone else, or nothing pending: the same answer."""
    if prompt_event_id is not None:
        record = await forgets.by_prompt(prompt_event_id)
    else:
        record = await forgets.get(person, "pending")
    nothing = "Nothing is waiting for your confirmation to be forgotten."
    if record is None or not _may_decide(config, record, person):
        return nothing
    if not await forgets.confirm(record, UNDO_S):
        return nothing  # confirmed meanwhile (a command and a reaction), or replaced
    return await asyncio.to_thread(_carry_out, _FORGET, config, registry, record, person, in_dm)


def _reopen(
    config: Config, registry: MemoryRegistry, owner: str, subject: str, scope_id: str
) -> MemoryBackend | None:
    """The memory of ``owner`` as ``subject`` sees it, when it is still scope ``scope_id``."""
    found = {m.scope_id: m for _, m in _memories(config, registry, [owner], subject, "")}
    return found.get(scope_id)


async def undo_forget(
    config: Config,
    registry: MemoryRegistry,
    forgets: MemoryForgets,
    person: str,
    *,
    in_dm: bool = True,
) -> str:
    """Restore ``person``'s last confirmed forget, within :data:`UNDO_S` (``memory restore``,
    the history naming ``person``)."""
    record = await forgets.get(person, "done")
    if record is None or not await forgets.take_done(record):
        return "There is no forget of yours to undo (only the last one, for a day)."
    return await asyncio.to_thread(_carry_out, _UNDO, config, registry, record, person, in_dm)


def _delete_entry(memory: MemoryBackend, entry_id: str, actor: str) -> MemoryEntry:
    return memory.delete_sync(entry_id, actor=actor)


def _restore_entry(memory: MemoryBackend, entry_id: str, actor: str) -> MemoryEntry:
    if not keeps_files(memory):
        raise MemoryStoreError("mem0 cannot restore a deleted memory")
    return memory.restore_sync(entry_id, actor=actor)


@dataclass(frozen=True)
class _Change:
    """What a confirmed forget does to its entries (:data:`_FORGET`), or its undo
    (:data:`_UNDO`): how each entry is changed, and how the log and the answer say it."""

    change: Callable[[MemoryBackend, str, str], MemoryEntry]
    log: str  # a failure's log message: entry id, scope id, why
    done: str  # the answer's first word, before how many entries it changed
    failed: str  # names the entries it could not change
    closing: str | None = None  # the answer's last line


_FORGET = _Change(
    _delete_entry,
    "memory forget: %s in %s not deleted: %s",
    "Forgot",
    "Not found any more (changed or deleted meanwhile)",
    "`!memory undo` brings it back (for a day).",
)
_UNDO = _Change(
    _restore_entry, "memory undo: %s in %s not restored: %s", "Restored", "Could not be restored"
)


def _carry_out(
    how: _Change,
    config: Config,
    registry: MemoryRegistry,
    record: ForgetRecord,
    actor: str,
    in_dm: bool,
) -> str:
    """Change the entries of ``record`` as ``actor`` the way ``how`` says, and answer what
    was done, texts only when ``in_dm`` (blocking)."""
    changed, failed = [], []
    for owner, scope_id, entry_id in record.entries:
        memory = _reopen(config, registry, owner, record.subject, scope_id)
        try:
            if memory is None:
                raise MemoryStoreError(f"the memory of {owner} is not there any more")
            entry = how.change(memory, entry_id, actor)
            changed.append((entry.id, entry.text))
        except MemoryStoreError as exc:
            logger.info(how.log, entry_id, scope_id, exc)
            failed.append(entry_id)
    lines = [f"{how.done} {len(changed)} thing{'s' if len(changed) != 1 else ''}."]
    if in_dm:
        lines += [f"- `{entry_id}`: {text}" for entry_id, text in changed]
    if failed:
        lines.append(f"{how.failed}: {', '.join(failed)}.")
    if how.closing is not None:
        lines.append(how.closing)
    return "\n".join(lines)


def remember(
    config: Config,
    registry: MemoryRegistry,
    owners: Sequence[str],
    sender: str,
    text: str,
    people: Sequence[Person] = (),
    room: RoomAudience | None = None,
) -> str:
    """``!memory remember TEXT``: store a fact about ``sender`` in the memory here, on their
    word, with the audience of ``room`` (where it was said; None: the scope's default); in a
    shared memory it names them (so it is theirs to list and forget). A personal detail about
    someone else among ``people`` waits for that person (blocking)."""
    text = " ".join(text.split())
    if not text:
        return "Use `!memory remember TEXT`: I store it as something about you."
    if len(text) > MAX_FACT_CHARS:
        return f"That is too long to remember as one fact (over {MAX_FACT_CHARS} characters)."
    here = _memories(config, registry, owners, sender)
    if len(here) != 1:
        if not here:
            return "No agent with a memory is here."
        return "Several agents are here: send it in a direct message with the one to tell."
    owner, memory = here[0]
    stored = text if memory.scope.person_key is not None else f"{sender}: {text}"
    others = tuple(p for p in people if p.user_id != sender)
    consent = WriteConsent("person", Person(sender), others)
    try:
        if keeps_files(memory):  # where it was said is where it may be recalled
            book = AudienceBook(memory.scope.state_dir)
            told = EntryFields(audience=word_for(room, book) if room is not None else None)
            entry = memory.add_sync(stored, actor=sender, consent=consent, fields=told)
        else:
            entry = memory.add_sync(stored, actor=sender, consent=consent)
    except ConsentPending as held:  # "not stored yet: ... waits for ..."
        said = str(held)
        return f"{said[:1].upper()}{said[1:]}."
    except MemoryStoreError as exc:
        return f"Not stored: {exc}."
    return f"Remembered (`{entry.id}`, {learned_where(owner, memory, entry)})."
