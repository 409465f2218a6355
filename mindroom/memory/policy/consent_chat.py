"""``!memory pending | confirm ID | reject ID``: a person answers a consent proposal in chat.

A proposal is looked for in the memories the sender can reach from here, as they see them:
every shared agent's, and the sender's own private memory of each private companion in the
room. Who may see, confirm or reject one is decided by
:meth:`~mindroom.memory.policy.consent.ConsentQueue.may_answer` alone (the person it is about, or an
admin from ``authorization.admins``); anyone else is answered exactly as if it did not exist,
so its existence is not told either. The list (``!memory pending``) names what is known about
a person, so it is answered only in a direct chat with them (``in_dm``, which the caller
judges from the room); elsewhere it says to ask there, and a decision made elsewhere is
answered without the proposal's text.

A proposal is also *offered* to its person, in their direct chat with the agent whose memory
holds it, as a message of its own (:func:`offer_text`) that a reaction answers
(:mod:`mindroom.pipeline.prompts` posts it and hears the reaction; :func:`proposals_to_offer`
and :func:`answer_offer` are its memory side): the same decision as ``!memory confirm`` /
``!memory reject``, through :meth:`ConsentQueue.decide`.
"""

from __future__ import annotations

from collections.abc import Sequence

from mindroom.config.schema import Config
from mindroom.errors import MemoryStoreError
from mindroom.memory.backend import MemoryBackend
from mindroom.memory.policy.consent import PROPOSAL_DAYS, ConsentQueue, Proposal, db_path
from mindroom.memory.registry import MemoryRegistry

USAGE = "Use `!memory pending`, `!memory confirm ID` or `!memory reject ID`."
# an unknown word also hears of the commands that read and correct memory (mindroom.people)
WORDS = (
    f"{USAGE[:-1]}; `!memory list`, `!memory forget WORDS`, `!memory undo` or "
    "`!memory remember TEXT`."
)
MAX_PROPOSAL_ID_CHARS = 64  # ids are "p-" and 8 hex digits; longer input is not looked up
ONLY_IN_DM = (
    "I list what waits for your confirmation only in a direct message with me (it names "
    "personal details): send `!memory pending` there."
)


def _memories(
    config: Config, registry: MemoryRegistry, agents: Sequence[str], sender: str
) -> list[MemoryBackend]:
    """Every shared agent's memory, and the sender's own of the private agents in the room
    (opening another private companion would make its folder for the sender)."""
    found: dict[str, MemoryBackend] = {}
    names = [*agents, *(n for n in config.agents if n not in agents)]
    for name in names:
        if name not in config.agents:
            continue
        if config.agents[name].private is not None and name not in agents:
            continue
        memory = registry.for_agent(name, sender)
        if memory is not None:  # proposals of either backend
            found.setdefault(memory.scope_id, memory)
    return list(found.values())


def memory_command(
    config: Config,
    registry: MemoryRegistry,
    agents: Sequence[str],
    sender: str,
    argument: str,
    *,
    in_dm: bool = False,
) -> str:
    """The answer to ``!memory <argument>`` from ``sender`` in a room with ``agents``;
    ``in_dm``: the room is a direct chat of the sender with mindroom alone (blocking: run it
    in a thread)."""
    action, _, rest = argument.strip().partition(" ")
    action = action.lower()
    admins = config.authorization.admins
    if action in ("", "pending"):
        if not in_dm:
            return ONLY_IN_DM
        return _pending(config, registry, agents, sender, admins)
    if action not in ("confirm", "reject") or not rest.strip():
        return WORDS if action not in ("confirm", "reject") else USAGE
    proposal_id = rest.strip()
    if len(proposal_id) > MAX_PROPOSAL_ID_CHARS:  # never echoed: it could be anything
        return (
            f"That is not a proposal ID ({len(proposal_id):,} characters): they look like "
            f"`p-1a2b3c4d`, and `!memory pending` lists yours. Nothing was {action}ed."
        )
    for memory in _memories(config, registry, agents, sender):
        queue = ConsentQueue(memory)
        try:
            found = queue.get(proposal_id)
            if found is None or not queue.may_answer(found, sender, admins):
                continue
            confirm = action == "confirm"
            try:
                proposal, _ = queue.decide(
                    proposal_id, confirm=confirm, actor=sender, user_id=sender, admins=admins
                )
            except MemoryStoreError as exc:
                return f"{exc}."
            said = f": {proposal.text}" if in_dm else f" ({proposal.id})"
            return f"Stored{said}" if confirm else f"Not stored{said}"
        finally:
            queue.close()
    return f"No proposal {proposal_id!r} is waiting for you."


def _pending(
    config: Config,
    registry: MemoryRegistry,
    agents: Sequence[str],
    sender: str,
    admins: Sequence[str],
) -> str:
    lines = []
    for memory in _memories(config, registry, agents, sender):
        queue = ConsentQueue(memory)
        try:
            for p in queue.waiting_for(sender, admins):
                about = f", about {p.user_id}" if p.user_id and p.user_id != sender else ""
                lines.append(f"- `{p.id}` ({p.field.replace('_', ' ')}{about}): {p.text}")
        finally:
            queue.close()
    if not lines:
        return "Nothing is waiting for your confirmation."
    return "\n".join(["**Waiting for your confirmation**", *lines, "", USAGE])


def proposals_to_offer(
    config: Config, registry: MemoryRegistry, agent: str, person: str
) -> list[Proposal]:
    """The pending proposals in ``agent``'s memory (as ``person`` reaches it) that are about
    ``person``: the ones to offer in their direct chat with ``agent``. Those only an admin may
    answer (about nobody known) are not offered to anyone (blocking)."""
    if agent not in config.agents:
        return []
    memory = registry.existing_for_agent(agent, person)  # never a folder made by looking
    if memory is None or not db_path(memory.scope.state_dir).exists():  # nor a database
        return []
    queue = ConsentQueue(memory)
    try:
        return queue.waiting_for(person)  # no admins: only what is about the person
    finally:
        queue.close()


def offer_text(proposal: Proposal) -> str:
    """The message that offers ``proposal`` to its person (in their direct chat)."""
    field = proposal.field.replace("_", " ")
    return (
        f"I was asked to remember this about you, and your {field} is a personal detail, "
        f"so I store it only if you agree:\n\n> {proposal.text}\n\n"
        f"React ✅ to store it or ❌ to drop it (or send `!memory confirm {proposal.id}` "
        f"or `!memory reject {proposal.id}`). Unanswered, it is dropped in {PROPOSAL_DAYS} days."
    )


def answer_offer(
    config: Config,
    registry: MemoryRegistry,
    agent: str,
    person: str,
    proposal_id: str,
    *,
    confirm: bool,
    actor: str,
) -> str:
    """``actor`` (the person, or an admin) answered the offer of ``proposal_id`` in
    ``agent``'s memory about ``person``: confirmed (stored) or rejected, as ``!memory
    confirm`` / ``reject`` would; what happened, in a sentence (blocking)."""
    memory = registry.for_agent(agent, person) if agent in config.agents else None
    if memory is None:
        return f"No proposal {proposal_id!r} is waiting for you."
    queue = ConsentQueue(memory)
    try:
        proposal, _ = queue.decide(
            proposal_id,
            confirm=confirm,
            actor=actor,
            user_id=actor,
            admins=config.authorization.admins,
        )
    except MemoryStoreError as exc:
        return f"Nothing done: {exc}."
    finally:
        queue.close()
    return f"Stored: {proposal.text}" if confirm else f"Not stored: {proposal.text}"
