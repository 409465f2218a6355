"""MemoryTools: the agent's memory tools return text, and errors as text, never raise."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.memory.files import store as store_module
from mindroom.memory.files.markdown import hand_id
from mindroom.memory.files.store import FileMemory
from mindroom.memory.scope import MemoryScope
from mindroom.memory.tools import tool_turn

pytestmark = pytest.mark.asyncio

ID = re.compile(r"\[(m-[0-9a-f]{8})\]")
FILE_ID = re.compile(r"<!-- (m-[0-9a-f]{8})(?: [^<>]*)? -->")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[FileMemory]:
    root = tmp_path / "workspace"
    root.mkdir()
    mem = FileMemory(MemoryScope("agent_test", root, tmp_path / "state"))
    yield mem
    mem.close()


@pytest.fixture
def tools(memory: FileMemory) -> MemoryTools:
    return MemoryTools(memory)


def file_text(memory: FileMemory) -> str:
    path = memory.scope.entrypoint
    return path.read_text() if path.exists() else ""


async def test_add_search_update_delete_round_trip_through_the_tools(
    tools: MemoryTools, memory: FileMemory
) -> None:
    added = await tools.add_memory("The user's dog is named Pixel")
    assert added.startswith("remembered [m-")
    assert added.endswith("(MEMORY.md:1) The user's dog is named Pixel")
    entry_id = ID.search(added).group(1)
    written = memory.find(entry_id)
    assert file_text(memory) == (
        f"- The user's dog is named Pixel <!-- {entry_id} created={written.fields.created} -->\n"
    )

    found = await tools.search_memories("what is my dog called")
    assert found.startswith(f"[{entry_id}] (MEMORY.md:1) The user's dog is named Pixel (score ")

    assert await tools.get_memory(entry_id) == (
        f"[{entry_id}] (MEMORY.md:1) The user's dog is named Pixel"
    )

    updated = await tools.update_memory(entry_id, "The user's dog is named Pixel, a beagle")
    assert updated == f"updated [{entry_id}] (MEMORY.md:1) The user's dog is named Pixel, a beagle"
    now = memory.find(entry_id).fields
    assert now.updated is not None
    assert file_text(memory) == (
        f"- The user's dog is named Pixel, a beagle <!-- {entry_id} created={now.created}"
        f" updated={now.updated} -->\n"
    )

    deleted = await tools.delete_memory(entry_id)
    assert deleted.startswith(f"deleted [{entry_id}]")
    assert file_text(memory) == ""
    assert await tools.list_memories() == "no memories yet"
    assert await tools.search_memories("dog") == "no memories match 'dog'"


async def test_search_results_name_the_date_of_dated_entries(
    tools: MemoryTools, memory: FileMemory
) -> None:
    await memory.add("Flew to Lisbon on 12 March 2024", actor="t", path="topics/travel.md")
    await tools.add_memory("Lisbon has good pastries")
    await memory.add("Landed in Lisbon", actor="t", path="memory/2024-03-12.md")

    found = (await tools.search_memories("when was I in Lisbon in March 2024?", 10)).splitlines()

    assert len(found) == 3
    assert any(
        re.search(r"\) Flew to Lisbon on 12 March 2024 \(2024-03-12, score ", f) for f in found
    )
    assert any(re.search(r"\) Landed in Lisbon \(2024-03-12, score ", f) for f in found)
    assert any(re.search(r"\) Lisbon has good pastries \(score ", f) for f in found)


async def test_tools_record_their_actor_in_the_history(memory: FileMemory) -> None:
    tools = MemoryTools(memory, actor="agent:general")
    entry_id = ID.search(await tools.add_memory("likes jazz")).group(1)
    await tools.update_memory(entry_id, "likes bebop jazz")
    assert [(r.actor, r.op) for r in memory.history_of(entry_id)] == [
        ("agent:general", "add"),
        ("agent:general", "update"),
    ]


async def test_tools_work_on_hand_written_lines(tools: MemoryTools, memory: FileMemory) -> None:
    memory.scope.entrypoint.write_text("# Notes\n- buy milk\n- call mum\n")
    listed = await tools.list_memories()
    assert listed.splitlines() == [
        f"[{hand_id('MEMORY.md', 'buy milk')}] (MEMORY.md:2) buy milk",
        f"[{hand_id('MEMORY.md', 'call mum')}] (MEMORY.md:3) call mum",
    ]
    result = await tools.update_memory(hand_id("MEMORY.md", "buy milk"), "buy oat milk")
    assert result.startswith("updated [h-")
    assert file_text(memory) == "# Notes\n- buy oat milk\n- call mum\n"


async def test_memory_get_returns_numbered_lines(tools: MemoryTools, memory: FileMemory) -> None:
    memory.scope.entrypoint.write_text("# Notes\n- one\n- two\n- three\n")
    assert await tools.memory_get("MEMORY.md", 2, 2) == (
        "MEMORY.md (lines 2-3 of 4):\n    2  - one\n    3  - two\n(1 more lines after this)"
    )


async def test_list_limits_are_clamped(tools: MemoryTools) -> None:
    for n in range(3):
        await tools.add_memory(f"fact {n}")
    assert len((await tools.list_memories(limit=0)).splitlines()) == 1
    assert len((await tools.search_memories("fact", limit=-5)).splitlines()) == 1


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda t: t.get_memory("m-deadbeef"), "error: no memory with id 'm-deadbeef'"),
        (lambda t: t.update_memory("m-deadbeef", "x"), "error: no memory with id 'm-deadbeef'"),
        (lambda t: t.delete_memory("m-deadbeef"), "error: no memory with id 'm-deadbeef'"),
        (lambda t: t.add_memory("   "), "error: cannot store an empty memory"),
        (lambda t: t.memory_get("../../etc/passwd.md"), "error: '../../etc/passwd.md' leaves"),
        (lambda t: t.memory_get("/etc/passwd"), "error: '/etc/passwd' is absolute"),
        (lambda t: t.memory_get("~/x.md"), "error: '~/x.md' is absolute"),
        (lambda t: t.memory_get("notes.txt"), "error: 'notes.txt' is not a markdown"),
        (lambda t: t.memory_get("topics/none.md"), "error: no memory file 'topics/none.md'"),
    ],
)
async def test_errors_come_back_as_text_starting_with_error(
    tools: MemoryTools, memory: FileMemory, call, message: str
) -> None:
    await tools.add_memory("an existing memory")
    before = file_text(memory)

    result = await call(tools)

    assert isinstance(result, str)
    assert result.startswith(message)
    assert file_text(memory) == before


async def test_updating_to_empty_text_is_an_error_and_keeps_the_file(
    tools: MemoryTools, memory: FileMemory
) -> None:
    entry_id = ID.search(await tools.add_memory("keep this")).group(1)
    before = file_text(memory)
    result = await tools.update_memory(entry_id, "\n  \n")
    assert result.startswith("error: cannot store an empty memory")
    assert file_text(memory) == before


async def test_an_unexpected_failure_comes_back_as_error_text(
    tools: MemoryTools, memory: FileMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(memory, "add_sync", boom)
    result = await tools.add_memory("anything")
    assert result == "error: the memory operation failed (RuntimeError: disk on fire)"


# -- a resumed turn writes nothing twice --------------------------------------------------------


async def test_a_turn_repeated_with_the_same_turn_key_writes_each_memory_once(
    memory: FileMemory,
) -> None:
    facts = [f"fact number {n} about the project" for n in range(60)]
    with tool_turn("$event1|mind"):
        for fact in facts:
            assert (await MemoryTools(memory).add_memory(fact)).startswith("remembered")
    first = FILE_ID.findall(file_text(memory))

    # the resumed turn, in a new process: a fresh store on the same files and history
    again = FileMemory(memory.scope)
    try:
        with tool_turn("$event1|mind"):
            answers = [await MemoryTools(again).add_memory(fact) for fact in facts]
    finally:
        again.close()

    assert len(first) == 60
    assert FILE_ID.findall(file_text(memory)) == first  # 60 entries, not 120
    assert [ID.search(a).group(1) for a in answers] == first  # answered with the same entries
    with tool_turn("$event2|mind"):  # control: another turn's identical fact is written
        await MemoryTools(memory).add_memory(facts[0])
    assert len(FILE_ID.findall(file_text(memory))) == 61


async def test_repeated_update_and_delete_in_one_turn_answer_like_the_first_time(
    memory: FileMemory,
) -> None:
    tools = MemoryTools(memory)
    entry = memory.add_sync("Standup at nine", actor="t")
    with tool_turn("$e|mind"):
        first_update = await tools.update_memory(entry.id, "Standup at ten")
        repeated_update = await tools.update_memory(entry.id, "Standup at ten")
        first_delete = await tools.delete_memory(entry.id)
        repeated_delete = await tools.delete_memory(entry.id)

    assert first_update.startswith("updated")
    assert repeated_update == first_update
    assert first_delete.startswith("deleted")
    assert repeated_delete.startswith("deleted")  # not "error: no memory with id"
    assert [r.op for r in memory.history_of(entry.id)] == ["add", "update", "delete"]


async def test_a_write_cut_off_after_its_history_record_is_written_once_by_the_resumed_turn(
    memory: FileMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_edit = store_module.edit_file

    def crash_after_the_record(path, lock_dir, edit, **kwargs):  # noqa: ANN001
        kwargs["before_write"]("", "")  # the history record is written...
        raise OSError("killed")  # ... and the process dies before the file changes

    monkeypatch.setattr(store_module, "edit_file", crash_after_the_record)
    with tool_turn("$event3|mind"):
        assert (await MemoryTools(memory).add_memory("Parking in lot B")).startswith("error:")
    assert file_text(memory) == ""
    monkeypatch.setattr(store_module, "edit_file", real_edit)

    with tool_turn("$event3|mind"):  # resumed
        await MemoryTools(memory).add_memory("Parking in lot B")
        await MemoryTools(memory).add_memory("Parking in lot B")

    ids = FILE_ID.findall(file_text(memory))
    assert len(ids) == 1
    records = memory.history_of()
    assert [r.op for r in records] == ["add", "abort", "add"]  # the cut-off write is marked
    assert records[2].id == ids[0]
