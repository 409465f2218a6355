"""The memory tools' calls, without Agno: :class:`ScopeTools` does what each tool does on one
scope (through the agent's view) and answers text for the model; around it, the turn a tool
call belongs to, the operation key that makes a write idempotent, the consent a write carries,
how an entry is shown to the model, and the guard that turns every failure into text.

Errors come back as text that starts with ``error:`` and says what to do; they are never
raised into the bot.

Writes are idempotent within a turn: the runner wraps each turn in :func:`tool_turn` with a
key naming the turn (the message that started it and the agent). A write tool derives an
operation key from that turn key, its name and its normalized arguments, and the store answers
a call whose key its history already records with the entry written then. So a turn resumed
after a crash, which asks for the same writes again, writes each memory once.

The tools as the model sees them (names, arguments, descriptions) are the Agno toolkit of
:mod:`mindroom.adapters.agno.memory_tools`, which hands each call to :class:`ScopeTools`.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator

from mindroom.errors import MemoryStoreError
from mindroom.memory.backend import MemoryBackend
from mindroom.memory.files.fields import EntryFields, check_fields, render_fields
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.mem0.memory import MEM0_PATH
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.audience import AudiencePolicy
from mindroom.memory.policy.consent import ConsentPending, Person, WriteConsent
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.policy.view import AgentView
from mindroom.memory.search.relations import RelationSettings
from mindroom.redact import redact_text

logger = logging.getLogger(__name__)

# said with a search's results while a big memory file is still being indexed
CATCHING_UP = (
    "\n(The memory index is still catching up with a big file: these results come from "
    "what is indexed so far. Search again in a minute for the rest.)"
)


_turn_key: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "mindroom_tool_turn", default=None
)


_turn_run: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "mindroom_tool_run", default=None
)
_turn_consent: contextvars.ContextVar[WriteConsent | None] = contextvars.ContextVar(
    "mindroom_tool_consent", default=None
)


@contextlib.contextmanager
def tool_turn(
    key: str, run: str | None = None, user: str | None = None, people: Iterable[Person] = ()
) -> Iterator[None]:
    """Run a turn's tool calls under ``key`` (e.g. ``"<trigger event id>|<agent>"``), in
    conversation ``run`` (its session id, recorded with what the tools write), started by
    ``user`` among ``people`` (the room's people, with their display names): whom a sensitive
    fact is about is judged from them (:func:`mindroom.memory.policy.consent.subject_of`).

    The same key on a resumed turn makes its memory writes repeat nothing.
    """
    token = _turn_key.set(key)
    run_token = _turn_run.set(run)
    consent_token = _turn_consent.set(WriteConsent.model(user, people))
    try:
        yield
    finally:
        _turn_consent.reset(consent_token)
        _turn_run.reset(run_token)
        _turn_key.reset(token)


def operation_key(tool: str, *arguments: str) -> str | None:
    """The idempotency key of a write tool call in the current turn (None outside a turn)."""
    turn = _turn_key.get()
    if turn is None:
        return None
    normalized = [" ".join(argument.split()) for argument in arguments]
    data = json.dumps([turn, tool, normalized], ensure_ascii=False).encode()
    return "op-" + hashlib.sha256(data).hexdigest()[:32]


def turn_consent() -> WriteConsent:
    """The consent a tool write carries: a model's, in the current turn (the store decides
    whether its text may be written, see :mod:`mindroom.memory.policy.consent`); outside a turn, a
    model's with no known speaker."""
    return _turn_consent.get() or WriteConsent.model()


def tool_fields(category: str | None, importance: int | None, pinned: bool) -> EntryFields:
    """The fields a tool call asks for, or a MemoryStoreError saying what is wrong."""
    try:
        return check_fields(
            EntryFields(category=category or None, importance=importance, pinned=bool(pinned))
        )
    except ValueError as exc:
        raise MemoryStoreError(str(exc)) from None


def fields_key(fields: EntryFields) -> str:
    """The fields as a part of an operation key ("" for none: keys stay as they were)."""
    return render_fields(fields)


def shown(entry: MemoryEntry) -> str:
    if entry.path == MEM0_PATH:  # a mem0 memory lives in no file
        return f"[{entry.id}] {entry.text}"
    category = f"[{entry.fields.category}] " if entry.fields.category else ""
    return f"[{entry.id}] ({entry.path}:{entry.start_line}) {category}{entry.text}"


def dated(entry: MemoryEntry) -> str:
    """``"2024-03-12, "`` for an entry with a date (its daily file's, or one in its text)."""
    return f"{entry.date.isoformat()}, " if entry.date else ""


async def guard(action: Callable[[], Awaitable[str]]) -> str:
    """The text of ``action``, or of its failure: a write that waits for consent says so, a
    refused one starts with ``error:``, and anything else is logged and told without the
    storage's paths."""
    try:
        return await action()
    except ConsentPending as held:  # not an error: the write waits for its subject
        return redact_text(str(held))
    except MemoryStoreError as exc:
        return redact_text(f"error: {exc}")
    except Exception as exc:  # a tool is an edge: the model gets text, the bot keeps running
        logger.exception("memory tool failed")
        # an OSError's text names the absolute path of the storage: never show it
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return redact_text(f"error: the memory operation failed ({type(exc).__name__}: {reason})")


class ScopeTools:
    """The memory tools' calls on one scope, through an agent's view (its allowlist applied in
    the store); each answers text for the model (:func:`guard`)."""

    def __init__(
        self,
        memory: MemoryBackend,
        actor: str = "tool",
        access: CategoryAccess | None = None,
        relations: RelationSettings | None = None,
        sessions: bool = False,
        room: RoomAudience | None = None,
        policy: AudiencePolicy = "strict",
    ) -> None:
        self.memory = memory
        self.actor = actor
        self.view = AgentView(
            memory,
            access or CategoryAccess.everything(),
            count=True,
            relations=relations,
            sessions=sessions,
            room=room,
            policy=policy,
        )

    async def add(
        self, text: str, category: str | None, importance: int | None, pinned: bool
    ) -> str:
        """Remember ``text`` with the fields asked for, once per turn and arguments."""

        async def act() -> str:
            fields = tool_fields(category, importance, pinned)
            words = fields_key(fields)  # none: the key a call without fields always had
            key = operation_key("add_memory", text, *([words] if words else []))
            run = _turn_run.get()
            entry = await self.view.add(
                text, actor=self.actor, op_key=key, fields=fields, run=run, consent=turn_consent()
            )
            return f"remembered {shown(entry)}"

        return await guard(act)

    async def search(self, query: str, limit: int) -> str:
        """The best entries for ``query`` (1 to 50), dated and scored."""

        async def act() -> str:
            hits = await self.view.search(query, max(1, min(limit, 50)))
            note = CATCHING_UP if self.view.catching_up else ""
            if not hits:
                return f"no memories match {query!r}{note}"
            found = (f"{shown(h.entry)} ({dated(h.entry)}score {h.score:.3g})" for h in hits)
            return "\n".join(found) + note

        return await guard(act)

    async def list(self, limit: int) -> str:
        """Entries in the store's listing order (1 to 200)."""

        async def act() -> str:
            entries = await self.view.list(max(1, min(limit, 200)))
            return "\n".join(shown(e) for e in entries) or "no memories yet"

        return await guard(act)

    async def get(self, entry_id: str) -> str:
        """One entry by its id."""

        async def act() -> str:
            return shown(await self.view.get(entry_id))

        return await guard(act)

    async def update(self, entry_id: str, text: str) -> str:
        """Replace the text of an entry, once per turn and arguments."""

        async def act() -> str:
            key = operation_key("update_memory", entry_id, text)
            entry = await self.view.update(
                entry_id, text, actor=self.actor, op_key=key, consent=turn_consent()
            )
            return f"updated {shown(entry)}"

        return await guard(act)

    async def delete(self, entry_id: str) -> str:
        """Forget an entry (its history keeps it), once per turn and id."""

        async def act() -> str:
            key = operation_key("delete_memory", entry_id)
            entry = await self.view.delete(entry_id, actor=self.actor, op_key=key)
            return f"deleted {shown(entry)}"

        return await guard(act)

    async def read_file(self, path: str, from_line: int, lines: int) -> str:
        """Numbered lines of a memory file (or of a past conversation)."""

        async def act() -> str:
            return await self.view.read_file(path, from_line, lines)

        return await guard(act)
