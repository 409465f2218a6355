"""``!memory pending | confirm ID | reject ID``: a person answers a consent proposal in chat.

A proposal is looked for in the memories of the agents in the room, as the sender sees them:
each shared agent's, and the sender's own private memory of each private companion. Only the
person a proposal is about can confirm or reject it (its ``user_id``); another person's
proposal reads as not found, so its existence is not told either.
"""

from __future__ import annotations

from collections.abc import Sequence

from mindroom.config.schema import Config
from mindroom.errors import MemoryStoreError
from mindroom.memory.consent import ConsentQueue
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.store import FileMemory

USAGE = "Use `!memory pending`, `!memory confirm ID` or `!memory reject ID`."
MAX_PROPOSAL_ID_CHARS = 64  # ids are "p-" and 8 hex digits; longer input is not looked up


def _memories(
    config: Config, registry: MemoryRegistry, agents: Sequence[str], sender: str
) -> list[FileMemory]:
    found: dict[str, FileMemory] = {}
    for name in agents:
        if name not in config.agents:
            continue
        memory = registry.for_agent(name, sender)
        if isinstance(memory, FileMemory):
            found.setdefault(memory.scope_id, memory)
    return list(found.values())


def memory_command(
    config: Config, registry: MemoryRegistry, agents: Sequence[str], sender: str, argument: str
) -> str:
    """The answer to ``!memory <argument>`` from ``sender`` in a room with ``agents``
    (blocking: run it in a thread)."""
    action, _, rest = argument.strip().partition(" ")
    action = action.lower()
    memories = _memories(config, registry, agents, sender)
    if action in ("", "pending"):
        lines = []
        for memory in memories:
            queue = ConsentQueue(memory)
            try:
                for p in queue.pending(sender):
                    lines.append(f"- `{p.id}` ({p.field.replace('_', ' ')}): {p.text}")
            finally:
                queue.close()
        if not lines:
            return "Nothing is waiting for your confirmation."
        return "\n".join(["**Waiting for your confirmation**", *lines, "", USAGE])
    if action not in ("confirm", "reject") or not rest.strip():
        return USAGE
    if len(rest.strip()) > MAX_PROPOSAL_ID_CHARS:  # never echoed: it could be anything
        return (
            f"That is not a proposal ID ({len(rest.strip()):,} characters): they look like "
            f"`p-1a2b3c4d`, and `!memory pending` lists yours. Nothing was {action}ed."
        )
    for memory in memories:
        queue = ConsentQueue(memory)
        try:
            if queue.get(rest.strip()) is None:
                continue
            confirm = action == "confirm"
            try:
                proposal, _ = queue.decide(rest, confirm=confirm, actor=sender, user_id=sender)
            except MemoryStoreError as exc:
                return f"{exc}."
            return f"Stored: {proposal.text}" if confirm else f"Not stored: {proposal.text}"
        finally:
            queue.close()
    return f"No proposal {rest.strip()!r} is waiting for you."
