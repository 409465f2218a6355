"""A person settles what consolidation recorded (``mindroom memory conflicts`` and ``resolve``).

Three ways, as the consolidation RFC has them:

* keep one: the other entry leaves live memory (a mindroom entry is archived with a pointer to
  the one kept; a line the person wrote is deleted, its text kept by the history, since the
  person chose it);
* keep both: nothing changes, the pair is marked settled and is not raised again;
* edit: the entry given (by default the first of the pair) gets the new text and the other
  leaves as above.

A proposed merge (kind ``merge``) can also be accepted as proposed (its text into the entry it
names as kept). Every change goes through the memory's write protocol and history, actor
``cli`` (or the person who settled it in chat); ``mindroom memory restore`` brings back what
left. Blocking: call it from a thread.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from mindroom.errors import MemoryStoreError
from mindroom.memory.files.archive import archive_entry_sync
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.consolidate.records import Conflict, ConsolidationRecords


@dataclass(frozen=True)
class Side:
    """One entry of a recorded pair: as recorded, and as it is now (None: gone)."""

    id: str
    recorded: str
    now: MemoryEntry | None


def sides(memory: FileMemory, conflict: Conflict) -> tuple[Side, Side]:
    """The two entries of ``conflict``, the first being the one a proposed merge keeps."""
    meta = conflict.metadata
    ids = [meta.get("a", {}).get("id"), meta.get("b", {}).get("id")]
    if set(ids) != {conflict.memory_id, conflict.conflicting_memory_id}:
        ids = [conflict.memory_id, conflict.conflicting_memory_id]
    texts = {
        side.get("id"): side.get("text", "") for side in (meta.get("a", {}), meta.get("b", {}))
    }
    found = []
    for entry_id in ids:
        current = memory.lookup(entry_id)
        found.append(Side(entry_id, str(texts.get(entry_id, "")), current))
    return found[0], found[1]


def _leave(
    memory: FileMemory, side: Side, kept: str, conflict: Conflict, today: dt.date, actor: str
) -> str:
    """Take ``side`` out of live memory; what was done."""
    if side.now is None:
        return f"{side.id} was already gone"
    if side.now.hand_written:
        memory.delete_sync(side.id, actor=actor)
        return f"{side.id} deleted (restore brings it back)"
    why = f"{conflict.kind} {conflict.id} settled: kept {kept}"
    if not archive_entry_sync(memory, side.now, into=kept, why=why, actor=actor, today=today):
        raise MemoryStoreError(f"{side.id} changed while it was being archived; run it again")
    return f"{side.id} archived"


def resolve(
    memory: FileMemory,
    records: ConsolidationRecords,
    conflict_id: str,
    *,
    keep: str | None = None,
    keep_both: bool = False,
    text: str | None = None,
    accept: bool = False,
    today: dt.date | None = None,
    actor: str = "cli",
) -> str:
    """Settle ``conflict_id`` one way (see the module docstring); returns what was done.

    Raises :class:`MemoryStoreError` for an unknown or settled id, a ``keep`` that is not one
    of the pair, a kept entry that is gone, or not exactly one way chosen.
    """
    today = today or dt.date.today()
    conflict = records.get(conflict_id.strip())
    if conflict is None:
        raise MemoryStoreError(
            f"no conflict {conflict_id!r} in {memory.scope_id}: `mindroom memory conflicts` "
            "lists them"
        )
    if conflict.status != "open":
        raise MemoryStoreError(f"{conflict.id} is already settled: {conflict.resolution}")
    chosen = [keep is not None and text is None, keep_both, text is not None, accept]
    if sum(chosen) != 1:
        raise MemoryStoreError(
            "choose one way: --keep ID, --keep-both, --edit TEXT (with --keep ID to say which "
            "entry gets it) or --accept (a proposed merge)"
        )
    first, second = sides(memory, conflict)
    if keep_both:
        done = f"kept both {first.id} and {second.id}"
    else:
        if accept:
            if conflict.kind != "merge":
                raise MemoryStoreError(f"{conflict.id} is a conflict, not a proposed merge")
            text = str(conflict.metadata.get("text") or "")
            keep = first.id
        keep = keep.strip() if keep else first.id
        if keep not in (first.id, second.id):
            raise MemoryStoreError(f"{keep} is not one of {conflict.id}'s: {first.id}, {second.id}")
        kept, other = (first, second) if keep == first.id else (second, first)
        if kept.now is None:
            raise MemoryStoreError(
                f"{kept.id} is no longer in memory (archived or deleted); restore it first "
                f"(`mindroom memory restore {kept.id}`) or keep the other"
            )
        kept_id, done = kept.id, f"kept {kept.id}"
        if text is not None and text.strip() != kept.now.text:
            kept_id = memory.update_sync(kept.id, text, actor=actor).id  # h- ids follow text
            done = f"{kept_id} now says {text.strip()!r}"
        done += "; " + _leave(memory, other, kept_id, conflict, today, actor)
    records.resolve(conflict.id, done)
    return done
