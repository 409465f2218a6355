"""A CLI read brings a scope's search indexes up to its files first, saying so on stderr.

Every ``mindroom memory recall`` or ``memory search`` is a new process. The indexes it reads are
persisted beside the scope (``index.db``, ``vectors.db`` under its state folder), so a later
call only re-reads the files that changed and embeds the entries that have no vector yet (none,
usually). The first call, or one after many entries were written by hand, embeds them here and
now, before it searches, with a progress bar on stderr::

    indexing 680 entries for agent_general: [##########          ] 340/680

updated in place when stderr is a terminal, else a plain line at the start, at each quarter
and at the end. stdout carries only the answer, which scripts parse.

The running bot does not do this: a turn never waits for a big embedding (it searches by
keywords meanwhile, see :mod:`mindroom.memory.search.hybrid`); a person asking from the command
line would rather wait once for the full answer than get a keyword-only one.
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from mindroom.errors import EmbedderError
from mindroom.memory.backend import MemoryBackend, keeps_files

BAR = 20


class ProgressBar:
    """``indexing N entries for SCOPE: [###   ] k/N`` on ``stream``."""

    def __init__(self, scope_id: str, stream: TextIO) -> None:
        self.scope_id = scope_id
        self.stream = stream
        self.live = stream.isatty()
        self._quarter = -1

    def __call__(self, done: int, total: int) -> None:
        filled = BAR * done // total if total else BAR
        line = (
            f"indexing {total} {'entry' if total == 1 else 'entries'} for {self.scope_id}: "
            f"[{'#' * filled}{' ' * (BAR - filled)}] {done}/{total}"
        )
        if self.live:
            self.stream.write(f"\r{line}" + ("\n" if done >= total else ""))
        else:
            quarter = 4 * done // total if total else 4
            if quarter == self._quarter:
                return
            self._quarter = quarter
            self.stream.write(f"{line}\n")
        self.stream.flush()


def build_search_indexes(memories: list[MemoryBackend | None], stream: TextIO | None = None) -> int:
    """Bring the keyword and vector indexes of each file memory of ``memories`` up to its files,
    embedding what has no vector with a progress bar on ``stream`` (default stderr); returns how
    many entries were embedded. A memory without a working embedder is left to the search,
    which says it is keyword-only."""
    stream = stream or sys.stderr
    embedded = 0
    for memory in memories:
        if not keeps_files(memory):
            continue
        memory.prepare()
        weights = memory.search_weights
        if weights is not None and weights.vector <= 0:
            memory.index.sync()
            continue
        try:
            vectors = memory.vectors
            if vectors is None:
                memory.index.sync()
                continue
            embedded += vectors.sync(progress=ProgressBar(memory.scope_id, stream))
        except EmbedderError:
            memory.index.sync()  # the search reports the embedder and answers by keywords
    return embedded


def quiet_blas() -> None:
    """One BLAS thread for this process (unless the environment says otherwise): a CLI read
    multiplies small matrices, and OpenBLAS's idle threads spinning beside them cost it about
    ten times the CPU of the work itself (0.44 s against 0.04 s for a query's embedding, 2 cores).
    Only effective before numpy is first imported."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
