"""Past conversations as a memory source (``memory.sources: [memory, sessions]``).

When ``sessions`` is a source, the user and assistant text of a scope's conversations is kept
in that scope's session index (``<state dir>/transcripts.db``, see
:mod:`mindroom.memory.search.session_index`), searched beside the memory files and read with
``memory_get`` under synthetic paths ``sessions/<session>.jsonl``. The scope is the
conversation's own: a private companion's conversations with a person are in that person's
private scope, so they are searchable only there, like the rest of their memory.

The index is derived: its source is the conversation store (Agno's sessions), and it is
synced by delta: :func:`index_transcript` adds only messages past the index's cursor, once
``min_new`` of them wait or the session ended (``final``), so a reply does not pay for it on
every turn. Open indexes are kept (a few dozen, least recently used closed).

A stretch that states a fact deleted from the scope is never returned, and reads hidden with
``memory_get`` (:mod:`mindroom.memory.files.tombstones`): the message a fact came from is usually
worded differently from the fact, so the exact-text redaction of a delete misses it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

from mindroom.errors import MemoryStoreError
from mindroom.memory.files.store import FileMemory
from mindroom.memory.files.tombstones import DeletedFacts, deleted_from, states_deleted_fact
from mindroom.memory.search.budget import budgeted_section
from mindroom.memory.search.index import SearchHit, query_terms
from mindroom.memory.search.session_index import SessionIndex, TranscriptMessage, is_transcript_path

SOURCE = "sessions"
KEEP_OPEN = 32
HIDDEN_SLACK = 8  # extra hits searched when some may be hidden (they state a deleted fact)
HIDDEN_LINE = "(hidden: this message states a fact that was deleted from memory)"
_NUMBERED = re.compile(r"^(\s*\d+  )(.*)$")

logger = logging.getLogger(__name__)

_open: OrderedDict[Path, SessionIndex] = OrderedDict()
_lock = threading.Lock()


def index_path(memory: FileMemory) -> Path:
    """Where a scope's session index lives."""
    return memory.scope.state_dir / "transcripts.db"


def _index(memory: FileMemory, create: bool) -> SessionIndex | None:
    path = index_path(memory)
    with _lock:
        index = _open.get(path)
        if index is not None:
            _open.move_to_end(path)
            return index
        if not create and not path.exists():
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        index = _open[path] = SessionIndex(path)
        while len(_open) > KEEP_OPEN:
            _, old = _open.popitem(last=False)
            old.close()
        return index


def close_all() -> None:
    """Close every open session index (shutdown, tests)."""
    with _lock:
        for index in _open.values():
            index.close()
        _open.clear()


def index_transcript(
    memory: FileMemory,
    session_id: str,
    messages: Sequence[TranscriptMessage],
    *,
    min_new: int,
    final: bool = False,
    audience: str | None = None,
) -> int:
    """Add the messages of ``session_id`` past the index's cursor, when at least ``min_new``
    wait (or any do and the session ended: ``final``); returns how many lines were added.
    ``audience``: who could read the conversation (its audience word), kept with it."""
    index = _index(memory, create=True)
    assert index is not None
    cursor = index.indexed(session_id)
    waiting = len(messages) - cursor
    if waiting <= 0 or (waiting < min_new and not final):
        return 0
    return index.append(session_id, messages[cursor:], start=cursor, audience=audience)


def session_audience(memory: FileMemory, session_id: str) -> str | None:
    """The audience word recorded with ``session_id``'s indexed lines (None: none yet)."""
    index = _index(memory, create=False)
    return None if index is None else index.audience(session_id)


def search_sessions(
    memory: FileMemory, query: str, limit: int, audiences: frozenset[str] | None = None
) -> list[SearchHit]:
    """The best ``limit`` stretches of the scope's past conversations for ``query``, of
    conversations whose audience is among ``audiences`` (the words the room it is shown in
    may show; None: every one); none that states a fact deleted from the scope
    (:mod:`mindroom.memory.files.tombstones`)."""
    index = _index(memory, create=False)
    if index is None or limit <= 0:
        return []
    deleted = deleted_from(memory.history)
    if not deleted:
        return index.search(query, limit, audiences=audiences)
    # the hidden ones leave room for the next best
    hits = index.search(query, limit + HIDDEN_SLACK, audiences=audiences)
    kept = [hit for hit in hits if not states_deleted_fact(hit.entry.text, deleted)]
    if len(kept) < len(hits):
        logger.info(
            "%s: %d past conversation(s) hidden: they state a deleted fact",
            memory.scope_id,
            len(hits) - len(kept),
        )
    return kept[:limit]


def read_transcript(
    memory: FileMemory,
    path: str,
    from_line: int,
    lines: int,
    audiences: frozenset[str] | None = None,
) -> str:
    """Numbered lines of a past conversation of the scope, as ``memory_get`` reads files
    (only one whose audience is among ``audiences``: None, every one); a line that states a
    fact deleted from the scope reads as :data:`HIDDEN_LINE`."""
    index = _index(memory, create=False)
    if index is None:
        raise MemoryStoreError(f"no session transcript {path!r}")
    text = index.read(path, from_line, lines, audiences)
    deleted = deleted_from(memory.history)
    if not deleted:
        return text
    head, *body = text.split("\n")
    return "\n".join([head, *(_hidden(line, deleted) for line in body)])


def _hidden(line: str, deleted: DeletedFacts) -> str:
    found = _NUMBERED.match(line)
    if found is None or not states_deleted_fact(found.group(2), deleted):
        return line
    return f"{found.group(1)}{HIDDEN_LINE}"


def merged(
    memory_hits: list[SearchHit], session_hits: list[SearchHit], limit: int
) -> list[SearchHit]:
    """Memory and conversation hits in one list, best score first (memory first on a tie)."""
    ranked = sorted(
        [(h.score, 1, n, h) for n, h in enumerate(memory_hits)]
        + [(h.score, 0, n, h) for n, h in enumerate(session_hits)],
        key=lambda item: (-item[0], -item[1], item[2]),
    )
    return [item[3] for item in ranked[:limit]]


RECALL_HITS = 2  # stretches of past conversations a turn's recall shows at most
RECALL_MIN_SCORE = 0.5  # a hit this strong (normalized BM25) is relevant...
RECALL_MIN_TERMS = 2  # ...and so is one holding this many of the message's words,
RECALL_MIN_SHARE = 0.5  # and at least this share of them
RECALL_CHARS = 400  # each, cut to this


def relevant(hit: SearchHit, terms: list[str]) -> bool:
    """Whether a past conversation is relevant enough to enter a turn's prompt: BM25 alone
    says little in a small index (every term is in every row), so a hit also counts when it
    holds most of the message's words (at least two: one shared word is chit-chat)."""
    if hit.score >= RECALL_MIN_SCORE:
        return True
    text = hit.entry.text.lower()
    held = sum(1 for term in terms if term in text)
    return held >= RECALL_MIN_TERMS and held >= RECALL_MIN_SHARE * len(terms)


def recall_section(
    memory: FileMemory, query: str, budget: list[int], audiences: frozenset[str] | None = None
) -> str:
    """The "Past conversations" section of a turn's recall ('' when none is relevant enough),
    of the conversations whose audience is among ``audiences`` (None: every one); ``budget``
    (a one-item list) is the characters left, and is spent."""
    terms = [term.lower() for term in query_terms(query)]
    hits = search_sessions(memory, query, RECALL_HITS, audiences)
    found = [h for h in hits if relevant(h, terms)]
    title = "### Past conversations (read more with memory_get)"
    return budgeted_section(title, (_recall_line(hit) for hit in found), budget)


def _recall_line(hit: SearchHit) -> str:
    entry = hit.entry
    text = " / ".join(entry.text.splitlines())
    if len(text) > RECALL_CHARS:
        text = text[: RECALL_CHARS - 3] + "..."
    return f"- ({entry.path}:{entry.start_line}-{entry.end_line}) {text}"


__all__ = [
    "SOURCE",
    "close_all",
    "index_path",
    "index_transcript",
    "is_transcript_path",
    "merged",
    "read_transcript",
    "recall_section",
    "search_sessions",
]
