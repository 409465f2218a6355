"""The ``mind`` companion's template: its guidance is not memory, a person's own lines are.

Template prose lives in HTML comments, which :mod:`mindroom.memory.files.markdown` never reads as
entries (headings never were).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.memory.files.store import FileMemory
from mindroom.memory.private import scaffold
from mindroom.memory.scope import MemoryScope
from tests.support.harness import REPO

TEMPLATES = [REPO / "mind_template", REPO / "mindroom" / "config" / "starter" / "mind_template"]


@pytest.fixture(params=TEMPLATES, ids=["repository", "starter"])
def scaffolded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FileMemory]:
    root = tmp_path / "mind"
    copied = scaffold(request.param, root, tmp_path / "state" / "scaffold.json")
    assert "MEMORY.md" in copied
    memory = FileMemory(MemoryScope("private_test", root, tmp_path / "state"))
    yield memory
    memory.close()


@pytest.mark.asyncio
async def test_a_freshly_scaffolded_private_memory_lists_no_memories(
    scaffolded: FileMemory,
) -> None:
    assert await MemoryTools(scaffolded).list_memories() == "no memories yet"
    assert await scaffolded.list(200) == []


@pytest.mark.asyncio
async def test_a_hand_written_line_in_the_scaffolded_file_is_a_memory(
    scaffolded: FileMemory,
) -> None:
    path = scaffolded.scope.entrypoint
    text = path.read_text(encoding="utf-8")
    heading = "## Who you are\n"
    assert heading in text
    path.write_text(text.replace(heading, heading + "\n- I am a night owl\n"), encoding="utf-8")

    entries = await scaffolded.list(200)

    assert [entry.text for entry in entries] == ["I am a night owl"]
    assert "I am a night owl" in await MemoryTools(scaffolded).list_memories()
