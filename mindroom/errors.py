"""The exception tree of mindroom.

Every error mindroom raises on purpose derives from :class:`MindroomError`, so an edge (the CLI,
an event handler, a worker loop) can catch ours without catching programming errors::

    MindroomError
     ├── ConfigError       config.yaml cannot be read, parsed or validated
     ├── MatrixError       the homeserver refused or failed a request we need
     │    └── HomeserverError   the embedded Synapse could not start or answer
     ├── ModelError        a language model failed (unreachable, bad key, bad answer)
     ├── MemoryStoreError  a memory file or index operation was refused or failed
     │    └── MemoryAccessError  a category the agent's allowlist does not grant was asked for
     ├── AlreadyRunningError  another ``mindroom run`` holds this storage's run lock
     ├── NotRunningError   no ``mindroom run`` holds it, so nobody would answer a chat
     └── EmbedderError     an embedder could not be loaded or did not answer (memory search
                           then stays keyword-only; it never fails a turn)

Messages are written for the person running the bot: they say what failed and, where known,
what to do about it.
"""

from __future__ import annotations


class MindroomError(Exception):
    """Root of every error mindroom raises deliberately."""


class ConfigError(MindroomError):
    """The configuration is missing, malformed or invalid.

    The message names the file, the key path and the problem.
    """


class MatrixError(MindroomError):
    """A Matrix request that mindroom needs failed.

    ``errcode`` carries the Matrix error code (e.g. ``M_USER_IN_USE``) when the server sent one.
    """

    def __init__(self, message: str, errcode: str | None = None) -> None:
        super().__init__(message)
        self.errcode = errcode


class HomeserverError(MatrixError):
    """The embedded homeserver could not be started, reached or administered."""


class ModelError(MindroomError):
    """A language model could not produce an answer."""


class MemoryStoreError(MindroomError):
    """A memory operation was refused (bad path, unknown id) or failed."""


class ErasureBusy(MindroomError):
    """Another process sharing the database did not let an erasure run in time: nothing was
    erased (see :mod:`mindroom.cluster.erasure`)."""


class MemoryAccessError(MemoryStoreError):
    """A read or write named a category the agent may not use (``memory.allowlists``)."""


class AlreadyRunningError(MindroomError):
    """Another ``mindroom run`` runs for this storage; the message names its pid and the lock."""


class NotRunningError(MindroomError):
    """No ``mindroom run`` runs for this storage; the message says how to start one.

    ``mindroom chat`` exits with its own code (3) for it, apart from other errors (2).
    """


class EmbedderError(MindroomError):
    """An embedder could not be loaded (missing package, bad model path) or did not answer."""


class ClaimError(MindroomError):
    """A message could not be claimed in the ledger (its database failed): it must be heard
    again, not skipped (appservice mode refuses the transaction, so it is sent again)."""
