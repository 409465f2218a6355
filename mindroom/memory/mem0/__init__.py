"""The ``mem0`` memory backend: a scope's memories kept by the mem0 library (``mindroom[mem0]``).

mem0 keeps its own behaviour (semantic retrieval before each answer, automatic extraction
after turns) in local Chroma collections under ``mindroom_data/mem0/``. Each scope is a mem0
``user_id`` namespace (``agent_<name>``, ``team_<a>+<b>``, a private companion's scope per
requester), and every read, write and id lookup is checked against it here: mem0 itself looks
ids up across namespaces, so ownership is this package's job.

``mem0`` and ``chromadb`` are imported only inside :mod:`mindroom.memory.mem0.engine`, lazily,
never at start-up.
"""

from mindroom.memory.mem0.memory import Mem0Memory

__all__ = ["Mem0Memory"]
