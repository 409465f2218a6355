"""The read gate: every path that shows memory text to a model decides on the entry
as it is stored now, through one policy (:mod:`mindroom.memory.policy.gate`).

A table: every read path x five cases, on real files. ``planner`` may read ``general`` and
``tasks``; each case plants an entry before the thread's first turn and changes it after (so
the delta header has a record of it), then the path is read:

* ``allowed``: a ``tasks`` entry, updated: shown by every path (the positive control);
* ``forbidden``: a ``health`` entry, updated: shown by none;
* ``moved``: a ``tasks`` entry updated, then moved to ``health``: shown by none;
* ``procedural``: procedural steps (in ``tasks``), updated: shown only by ``get_memory``, a
  read by id (deliberate, like ``memory_query`` naming ``procedural``);
* ``deleted``: a ``tasks`` entry, deleted: its text shown by none.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable

import pytest

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.config.schema import Config
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.restore import set_fields_sync
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.insights import CATEGORY as INSIGHT_CATEGORY
from mindroom.memory.jobs.insights import InsightSettings, look_for_insights
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.view import AgentView
from mindroom.memory.search.recall import RecallSettings, build_recall
from mindroom.memory.search.structured_query import Asker, QueryRequest, run_query

THREAD = "thread-1"
WORD = "zorblax"  # in every planted entry: every search finds them all


def planner_access() -> CategoryAccess:
    config = Config.model_validate(
        {"memory": {"categories": {"custom": [{"name": "health"}]}, "allowlists": {}}}
    )
    base = CategoryAccess.of(config, None)
    return CategoryAccess("planner", frozenset({"general", "tasks"}), base.default, base.rules)


def _recall(memory: FileMemory, *, thread: str | None = None) -> str:
    return build_recall(
        memory,
        f"what about {WORD}",
        RecallSettings(),
        now=dt.datetime(2026, 11, 25, 12),
        thread=thread,
        access=planner_access(),
    )


def recall(memory: FileMemory, entry_id: str) -> str:
    return _recall(memory)


def delta_header(memory: FileMemory, entry_id: str) -> str:
    block = _recall(memory, thread=THREAD)
    return block.split("Your memory", 1)[0]  # the header alone (it comes first)


def _tools(memory: FileMemory) -> MemoryTools:
    return MemoryTools(memory, access=planner_access())


def search_tool(memory: FileMemory, entry_id: str) -> str:
    return asyncio.run(_tools(memory).search_memories(WORD, 20))


def list_tool(memory: FileMemory, entry_id: str) -> str:
    return asyncio.run(_tools(memory).list_memories(200))


def get_tool(memory: FileMemory, entry_id: str) -> str:
    return asyncio.run(_tools(memory).get_memory(entry_id))


def read_file_tool(memory: FileMemory, entry_id: str) -> str:
    return asyncio.run(_tools(memory).memory_get("MEMORY.md"))


def memory_query(memory: FileMemory, entry_id: str) -> str:
    view = AgentView(memory, planner_access())
    request = QueryRequest(query=WORD, top_k=20)
    return run_query(view, request, Asker("planner", None, frozenset({"planner"})))


PATHS: dict[str, Callable[[FileMemory, str], str]] = {
    "recall": recall,
    "delta header": delta_header,
    "search_memories": search_tool,
    "list_memories": list_tool,
    "get_memory": get_tool,
    "memory_get": read_file_tool,
    "memory_query": memory_query,
}


def plant(memory: FileMemory, case: str) -> tuple[str, str]:
    """The case's entry before the thread's first turn, and its change after: (id, the text
    that must or must not be shown)."""
    if case == "procedural":
        text = f"1. Open the {WORD} valve 2. Close it again (procedural-mark)"
        fields = EntryFields(category="tasks", type="procedural")
    else:
        category = "health" if case == "forbidden" else "tasks"
        text = f"Alice {WORD} {case}-mark"
        fields = EntryFields(category=category)
    entry = memory.add_sync(text, actor="cli", fields=fields)
    _recall(memory, thread=THREAD)  # the thread's first turn: its revision starts here
    if case == "deleted":
        memory.delete_sync(entry.id, actor="cli")
        return entry.id, f"{case}-mark"
    changed = text.replace("mark", "mark-now")
    if case == "procedural":
        changed = f"1. Open the {WORD} valve 2. Close it slowly (procedural-mark-now)"
    memory.update_sync(entry.id, changed, actor="cli")
    if case == "moved":
        set_fields_sync(memory, entry.id, EntryFields(category="health"), actor="cli")
    return entry.id, f"{case}-mark"


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("case", ["allowed", "forbidden", "moved", "procedural", "deleted"])
def test_every_read_path_shows_only_what_the_gate_grants_on_the_entry_as_stored_now(
    file_memory: FileMemory, path: str, case: str
) -> None:
    entry_id, mark = plant(file_memory, case)
    shown = PATHS[path](file_memory, entry_id)
    deliberate = case == "procedural" and path == "get_memory"
    if case == "allowed" or deliberate:  # the positive control: the path shows what it may
        assert f"{mark}-now" in shown, shown
    else:
        assert mark not in shown, shown


def test_the_delta_header_names_an_allowed_update_and_hides_a_health_update(
    file_memory: FileMemory,
) -> None:
    health = file_memory.add_sync(
        "Alice takes insulin", actor="cli", fields=EntryFields(category="health")
    )
    task = file_memory.add_sync(
        "Alice must renew her passport", actor="cli", fields=EntryFields(category="tasks")
    )
    _recall(file_memory, thread=THREAD)
    file_memory.update_sync(health.id, "Alice takes insulin twice a day", actor="cli")
    file_memory.update_sync(task.id, "Alice must renew her passport by May", actor="cli")
    header = delta_header(file_memory, task.id)
    assert "- ↑updated: [tasks] Alice must renew her passport by May" in header  # control
    assert "insulin" not in header
    assert "[general]" not in header  # no category is guessed from a record


def test_a_deleted_entry_is_counted_never_quoted_in_the_delta_header(
    file_memory: FileMemory,
) -> None:
    gone = file_memory.add_sync("Alice owes Bob 40 euros", actor="cli")
    kept = file_memory.add_sync("Alice owes Carol a book", actor="cli")
    _recall(file_memory, thread=THREAD)
    file_memory.delete_sync(gone.id, actor="cli")
    file_memory.update_sync(kept.id, "Alice owes Carol two books", actor="cli")
    header = delta_header(file_memory, kept.id)
    assert "Alice owes Carol two books" in header  # control: the header is there
    assert "40 euros" not in header
    assert "Bob" not in header


def test_the_insight_pass_is_shown_only_entries_the_agent_may_read(
    file_memory: FileMemory,
) -> None:
    """The insight pass (a model call after a flush) shows the model recent entries: the gate
    decides them too."""
    file_memory.add_sync("Alice takes insulin", actor="cli", fields=EntryFields(category="health"))
    file_memory.add_sync(
        "Alice must renew her passport", actor="cli", fields=EntryFields(category="tasks")
    )
    planner = planner_access()
    allowed = planner.allowed | {INSIGHT_CATEGORY}  # the pass runs for agents granted it
    access = CategoryAccess(planner.owner, allowed, planner.default, planner.rules)
    prompts: list[str] = []

    async def ask(instructions: str, prompt: str) -> str:  # the model: records its prompt
        prompts.append(prompt)
        return "{}"

    view = AgentView(file_memory, access)
    asyncio.run(look_for_insights(view, "@alice:localhost", ["hi"], ask, InsightSettings(True)))
    assert len(prompts) == 1
    assert "renew her passport" in prompts[0]  # the control
    assert "insulin" not in prompts[0]
