"""The process's descriptor budget: how many private instances stay open, and running out.

Every person who talks to a private companion has a session database, a memory index and its
vectors open while they are among the recently active; each is an SQLite database with its
``-wal`` and ``-shm`` files, so about :data:`FDS_PER_PRIVATE_INSTANCE` descriptors (and one
aiosqlite thread) per person. :func:`private_instance_limit` turns the configured cap into the
number the process can afford under its ``RLIMIT_NOFILE``; the least recently used instances
beyond it are closed and reopen on their next use (see
:class:`mindroom.memory.registry.MemoryRegistry` and
:class:`mindroom.adapters.agno.session_stores.SessionStores`).

:func:`exhaustion_message` tells running out of descriptors from any other failure, so a turn
that could not open a file says so instead of blaming the model. Pure standard library: no
I/O beyond reading the process's own limit.
"""

from __future__ import annotations

import errno
import os
import resource

FDS_PER_PRIVATE_INSTANCE = 9  # session db, keyword index, vectors: each with -wal and -shm
_SHARE_OF_LIMIT = 2  # private instances may use at most 1/2 of the limit; sockets need the rest
_MIN_OPEN = 2

_EXHAUSTED_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE})
_EXHAUSTED_TEXT = "too many open files"
_SQLITE_OPEN_TEXT = "unable to open database file"  # SQLite's only word for EMFILE
_NEAR_LIMIT = 16  # descriptors left that count as "ran out" when SQLite could not open


def descriptor_limit() -> int | None:
    """The process's soft ``RLIMIT_NOFILE``; None when unlimited."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def private_instance_limit(configured: int) -> int:
    """How many private instances may be open at once: ``configured``, or fewer if the
    process's descriptor limit cannot hold that many beside everything else."""
    limit = descriptor_limit()
    if limit is None:
        return configured
    affordable = limit // _SHARE_OF_LIMIT // FDS_PER_PRIVATE_INSTANCE
    return max(_MIN_OPEN, min(configured, affordable))


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception it was raised from or wraps (SQLAlchemy's ``orig``)."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        orig = getattr(current, "orig", None)
        todo.extend(
            [
                current.__cause__,
                current.__context__,
                orig if isinstance(orig, BaseException) else None,
            ]
        )
    return seen


def open_descriptors() -> int | None:
    """How many descriptors the process has open now (None where /proc is not available)."""
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError as exc:
        # listing needs a descriptor too: refused for lack of one, the process is at its limit
        return descriptor_limit() if exc.errno in _EXHAUSTED_ERRNOS else None


def exhaustion_message(failure: BaseException | str) -> str | None:
    """A message for a failure to open a file for lack of descriptors; None for anything else.

    ``failure`` is an exception (its whole chain is examined) or the error text a library
    returned instead of raising (Agno reports a failed run as text, e.g. "Connection error."
    when no socket could be made). A failure is taken as running out when it says so (EMFILE,
    "too many open files") or when the process is at its limit right now. SQLite's "unable
    to open database file" away from the limit is a database that could not be opened
    (permissions, disk): reported as such, still never as a model failure.
    """
    if isinstance(failure, str):
        texts = [failure]
    else:
        chain = _chain(failure)
        if any(isinstance(e, OSError) and e.errno in _EXHAUSTED_ERRNOS for e in chain):
            texts = [_EXHAUSTED_TEXT]
        else:
            texts = [str(e) for e in chain]
    lowered = " ".join(texts).lower()
    limit, count = descriptor_limit(), open_descriptors()
    at_limit = limit is not None and count is not None and count >= limit - _NEAR_LIMIT
    if not at_limit and _EXHAUSTED_TEXT not in lowered:
        if _SQLITE_OPEN_TEXT not in lowered:
            return None
        return (
            "mindroom could not open a database file (check permissions and free disk space; "
            f"{count} of {limit} descriptors open): {_SQLITE_OPEN_TEXT}"
        )
    limit_text = f" (limit {limit})" if limit is not None else ""
    detail = texts[0].strip() if texts[0] != _EXHAUSTED_TEXT else ""
    return (
        f"mindroom ran out of open files{limit_text} and could not answer"
        f"{f' ({detail})' if detail else ''}. "
        "Raise the limit (ulimit -n) or lower memory.max_open_private_instances."
    )
