"""Facts deleted from a scope, and whether a text states one (a tombstone filter).

A person who deletes a fact expects no recall path to bring it back. The memory files lose the
entry, but the fact lives on in text derived from the same conversation: the transcripts that
"Past conversations" searches hold the message the fact came from, usually worded differently
("my locker is zq7731x9, remember it" became "Alice's locker code is zq7731x9"). So the recall
of derived text asks :func:`states_deleted_fact` of every hit, against the facts deleted from
that scope *as the history says now* (:func:`deleted_facts`): a ``delete`` record holds the old
text; a later ``restore`` (or ``abort``) of the entry undoes it; a ``forget`` holds no text
(forget-me erased the text everywhere). Every delete path (``/me``, the dashboard, the CLI, the
memory tools, a hand edit seen by the watcher) writes the same record, so every one is covered.
A ``delete`` written by the lifecycle's purge of an expired entry is not a person's deletion and
hides nothing.

The rule, deliberately simple and not fitted to any data set (:func:`distinctive`):

- a Matrix ID in the fact (``@bob2:example.org``) is never evidence: it names the person, and
  the same person is talked about everywhere;
- **codes** (a token with a digit, at least 3 characters: a number, a code, a date) are the
  secret itself and survive any paraphrase verbatim: a text holding any of the fact's codes
  states it;
- otherwise the fact's **content words** (4 letters or more, not a stop word, not capitalised:
  a capitalised word is a name, of the person or a place) are compared by a crude stem: a text
  holding at least half of them states it (a paraphrase keeps most content words, rarely all;
  one shared word is chance);
- a fact with neither (``"Alice is here"``) is matched by its exact text only.

It errs toward hiding: a past conversation that shares a deleted fact's code is not shown.
What it does not do: rewrite the stores (:func:`mindroom.people.data.redact_deleted_fact` does
that for the exact text), or judge memory entries (the read gate does; a live entry is shown
on ``/me`` and can be deleted there).
"""

from __future__ import annotations

import math
import os
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from mindroom.memory.files.history import History, HistoryRecord
from mindroom.memory.search.query import STOP_WORDS

MIN_CODE = 3  # a shorter number ("2", "10") is everywhere
MIN_WORD = 4
PURGE = "purge"  # meta["why"] of the lifecycle's delete of an expired entry

_TOKEN = re.compile(r"\w+")
_MATRIX_ID = re.compile(r"[@!#][\w.=/+-]+:[\w.-]+(?::\d+)?")  # a person (or room) named
_SIBILANTS = ("s", "x", "z", "ch", "sh")


@dataclass(frozen=True)
class DeletedFact:
    """A deleted fact and what makes a text state it (see :func:`distinctive`)."""

    text: str
    codes: frozenset[str]
    words: frozenset[str]

    @property
    def folded(self) -> str:
        """The fact's exact text, case folded ('' when blank)."""
        return self.text.strip().casefold()


@dataclass(frozen=True)
class _Read:
    """A text read once for every fact: case folded, its tokens and their stems."""

    folded: str
    tokens: frozenset[str]
    stems: frozenset[str]

    @classmethod
    def of(cls, text: str) -> _Read:
        folded = text.casefold()
        tokens = frozenset(_TOKEN.findall(folded))
        return cls(folded, tokens, frozenset(stem(token) for token in tokens))


def stem(word: str) -> str:
    """A crude stem (lowercase, one common English suffix cut when 3 letters stay), so "takes"
    and "take", "allergies" and "allergy" meet."""
    word = word.lower()
    if len(word) < MIN_WORD:
        return word
    if word.endswith("ies"):
        return word[:-3] + "y"
    if word.endswith("es") and word[:-2].endswith(_SIBILANTS):
        return word[:-2]
    for suffix in ("ing", "ed", "s"):
        if word.endswith(suffix) and not word.endswith("ss") and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def distinctive(text: str) -> DeletedFact:
    """The codes and content words of a fact (see the module's rule)."""
    codes, words = set(), set()
    for token in _TOKEN.findall(_MATRIX_ID.sub(" ", text)):
        if any(c.isdigit() for c in token):
            if len(token) >= MIN_CODE:
                codes.add(token.lower())
        elif len(token) >= MIN_WORD and token.lower() not in STOP_WORDS and token.islower():
            words.add(stem(token))
    return DeletedFact(text, frozenset(codes), frozenset(words))


def states(text: str, fact: DeletedFact) -> bool:
    """Whether ``text`` states the deleted ``fact`` (pure; see the module's rule)."""
    return _states(_Read.of(text), fact)


def _states(read: _Read, fact: DeletedFact) -> bool:
    if fact.folded and fact.folded in read.folded:
        return True
    if fact.codes:
        return not fact.codes.isdisjoint(read.tokens)
    if fact.words:
        return len(fact.words & read.stems) >= math.ceil(len(fact.words) / 2)
    return False


@dataclass(frozen=True)
class DeletedFacts:
    """The facts deleted from a scope, indexed for checking many texts: every fact's codes in
    one set, so a check costs a set intersection and a substring test per fact."""

    facts: tuple[DeletedFact, ...] = ()
    codes: frozenset[str] = frozenset()
    worded: tuple[DeletedFact, ...] = ()  # the facts without codes, with content words
    texts: tuple[str, ...] = ()  # every fact's exact text, folded

    @classmethod
    def of(cls, facts: Iterable[DeletedFact]) -> DeletedFacts:
        kept = tuple(facts)
        return cls(
            kept,
            frozenset(code for fact in kept for code in fact.codes),
            tuple(fact for fact in kept if fact.words and not fact.codes),
            tuple(fact.folded for fact in kept if fact.folded),
        )

    def __len__(self) -> int:
        return len(self.facts)

    def stated_in(self, text: str) -> bool:
        """Whether ``text`` states any of the facts (as :func:`states` of each would say)."""
        if not self.facts:
            return False
        read = _Read.of(text)
        if not self.codes.isdisjoint(read.tokens):
            return True
        if any(folded in read.folded for folded in self.texts):
            return True
        return any(_states(read, fact) for fact in self.worded)


def states_deleted_fact(text: str, facts: DeletedFacts) -> bool:
    """Whether ``text`` states any of the deleted ``facts``."""
    return facts.stated_in(text)


def deleted_facts(records: Iterable[HistoryRecord]) -> DeletedFacts:
    """The facts deleted and not brought back, from a scope's history records, oldest first
    (pure). A ``restore``, ``add`` or ``update`` that writes a deleted text again brings it
    back (a hand-written line is restored under a new id); an ``abort`` or ``forget`` of the
    id ends its deletion (the delete did not happen; forget-me erased the text)."""
    deleted: dict[str, str] = {}
    ids_of: dict[str, set[str]] = {}  # a deleted text: the ids it was deleted under
    for record in records:
        if record.op == "delete":
            why = (record.meta or {}).get("why")
            if record.old and record.old.strip() and why != PURGE:
                deleted[record.id] = record.old
                ids_of.setdefault(record.old.strip(), set()).add(record.id)
            continue
        if record.op in ("restore", "abort", "forget", "add", "update"):
            deleted.pop(record.id, None)
        if record.op in ("restore", "add", "update") and record.new:
            again = record.new.strip()
            for entry_id in ids_of.pop(again, set()):
                if deleted.get(entry_id, "").strip() == again:
                    del deleted[entry_id]
    return DeletedFacts.of(distinctive(text) for text in deleted.values())


_cache: dict[Path, tuple[tuple[int, int], DeletedFacts]] = {}
_cache_lock = threading.Lock()


def deleted_from(history: History) -> DeletedFacts:
    """The facts deleted from the scope of ``history``, read again whenever the file changed
    (blocking: run in a worker thread)."""
    try:
        status = os.stat(history.path)
    except FileNotFoundError:
        return DeletedFacts()
    key = (status.st_size, status.st_mtime_ns)
    with _cache_lock:
        cached = _cache.get(history.path)
    if cached is not None and cached[0] == key:
        return cached[1]
    facts = deleted_facts(history.records())
    with _cache_lock:
        _cache[history.path] = (key, facts)
    return facts
