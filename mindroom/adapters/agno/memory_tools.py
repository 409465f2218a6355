"""The memory tools every agent with a memory backend gets, as an Agno toolkit.

Each tool works on one scope's memory (the one the turn belongs to), on either backend (the
markdown files or mem0), and returns text for the model. ``memory_search`` and ``memory_get``
are the names OpenClaw prompts use: ``memory_search`` is ``search_memories`` under another
name (one engine), ``memory_get`` reads a memory file (on mem0, ``MEMORY.md`` is the scope
rendered as markdown).

Errors come back as text that starts with ``error:`` and says what to do; they are never
raised into the bot.

Writes are idempotent within a turn: the runner wraps each turn in :func:`tool_turn` with a
key naming the turn (the message that started it and the agent). A write tool derives an
operation key from that turn key, its name and its normalized arguments, and the store answers
a call whose key its history already records with the entry written then. So a turn resumed
after a crash, which asks for the same writes again, writes each memory once.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Iterator

from agno.tools import Toolkit

from mindroom.errors import MemoryStoreError
from mindroom.memory.backend import MemoryBackend
from mindroom.memory.files.fields import EntryFields, check_fields, render_fields
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.mem0.memory import MEM0_PATH
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.consent import ConsentPending, Person, WriteConsent
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


def _consent() -> WriteConsent:
    """The consent a tool write carries: a model's, in the current turn (the store decides
    whether its text may be written, see :mod:`mindroom.memory.policy.consent`); outside a turn, a
    model's with no known speaker."""
    return _turn_consent.get() or WriteConsent.model()


def _fields(category: str | None, importance: int | None, pinned: bool) -> EntryFields:
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


def _show(entry: MemoryEntry) -> str:
    if entry.path == MEM0_PATH:  # a mem0 memory lives in no file
        return f"[{entry.id}] {entry.text}"
    category = f"[{entry.fields.category}] " if entry.fields.category else ""
    return f"[{entry.id}] ({entry.path}:{entry.start_line}) {category}{entry.text}"


def _dated(entry: MemoryEntry) -> str:
    """``"2024-03-12, "`` for an entry with a date (its daily file's, or one in its text)."""
    return f"{entry.date.isoformat()}, " if entry.date else ""


async def guard(action: Callable[[], Awaitable[str]]) -> str:
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


class MemoryTools(Toolkit):
    """add/search/list/get/update/delete memories and read memory files of one scope."""

    def __init__(
        self,
        memory: MemoryBackend,
        actor: str = "tool",
        access: CategoryAccess | None = None,
        relations: RelationSettings | None = None,
        sessions: bool = False,
    ) -> None:
        self.memory = memory
        self.actor = actor
        # every call goes through the agent's view: its allowlist, applied in the store
        self.view = AgentView(
            memory,
            access or CategoryAccess.everything(),
            count=True,
            relations=relations,
            sessions=sessions,
        )
        super().__init__(
            name="memory",
            tools=[
                self.add_memory,
                self.search_memories,
                self.list_memories,
                self.get_memory,
                self.update_memory,
                self.delete_memory,
                self.memory_search,
                self.memory_get,
            ],
        )

    async def add_memory(
        self,
        text: str,
        category: str | None = None,
        importance: int | None = None,
        pinned: bool = False,
    ) -> str:
        """Remember something durable about the user or the work (one fact per call).

        Args:
            text: The fact to remember, in the user's language.
            category: Where it belongs, e.g. profile, preferences, goals, tasks (default:
                general).
            importance: 1 (trivia) to 5 (essential); default 3.
            pinned: Keep it forever (it never expires).
        """

        async def act() -> str:
            fields = _fields(category, importance, pinned)
            words = fields_key(fields)  # none: the key a call without fields always had
            key = operation_key("add_memory", text, *([words] if words else []))
            run = _turn_run.get()
            entry = await self.view.add(
                text, actor=self.actor, op_key=key, fields=fields, run=run, consent=_consent()
            )
            return f"remembered {_show(entry)}"

        return await guard(act)

    async def search_memories(self, query: str, limit: int = 5) -> str:
        """Search your memory for entries matching the query, by words and by meaning.

        Args:
            query: What to look for.
            limit: How many results at most.
        """

        async def act() -> str:
            hits = await self.view.search(query, max(1, min(limit, 50)))
            note = CATCHING_UP if self.view.catching_up else ""
            if not hits:
                return f"no memories match {query!r}{note}"
            found = (f"{_show(h.entry)} ({_dated(h.entry)}score {h.score:.3g})" for h in hits)
            return "\n".join(found) + note

        return await guard(act)

    async def list_memories(self, limit: int = 20) -> str:
        """List memories: long-term ones first, then the daily logs, newest first.

        Args:
            limit: How many entries at most.
        """

        async def act() -> str:
            entries = await self.view.list(max(1, min(limit, 200)))
            return "\n".join(_show(e) for e in entries) or "no memories yet"

        return await guard(act)

    async def get_memory(self, id: str) -> str:  # noqa: A002 - the name the model sees
        """Show one memory by its id.

        Args:
            id: The memory id, as shown in brackets by the other tools.
        """

        async def act() -> str:
            return _show(await self.view.get(id))

        return await guard(act)

    async def update_memory(self, id: str, text: str) -> str:  # noqa: A002
        """Replace the text of a memory.

        Args:
            id: The memory id.
            text: The new text.
        """

        async def act() -> str:
            key = operation_key("update_memory", id, text)
            entry = await self.view.update(
                id, text, actor=self.actor, op_key=key, consent=_consent()
            )
            return f"updated {_show(entry)}"

        return await guard(act)

    async def delete_memory(self, id: str) -> str:  # noqa: A002
        """Forget a memory (it stays in the history and can be restored).

        Args:
            id: The memory id.
        """

        async def act() -> str:
            key = operation_key("delete_memory", id)
            entry = await self.view.delete(id, actor=self.actor, op_key=key)
            return f"deleted {_show(entry)}"

        return await guard(act)

    async def memory_search(self, query: str, limit: int = 5) -> str:
        """Search your memory for entries matching the query (the same search as
        search_memories).

        Args:
            query: What to look for.
            limit: How many results at most.
        """
        return await self.search_memories(query, limit)

    async def memory_get(self, path: str, from_line: int = 1, lines: int = 100) -> str:
        """Read lines of a memory file, e.g. "MEMORY.md" or "memory/2026-01-31.md", or of a
        past conversation a search found ("sessions/<session>.jsonl").

        Args:
            path: The file, relative to the memory folder.
            from_line: First line to read (1-based).
            lines: How many lines.
        """

        async def act() -> str:
            return await self.view.read_file(path, from_line, lines)

        return await guard(act)
