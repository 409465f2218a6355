"""Search scores are printed so that they tell hits apart, never as a flat ``0.00``.

BM25 gives a term found in most entries a tiny weight (FTS5 clamps its idf to 1e-6), so every
hit of such a query used to print as ``0.00`` in ``mindroom memory search`` and in the
``search_memories`` tool. Scores print with three significant digits.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.adapters.agno.memory_tools import MemoryTools
from mindroom.cli.main import main
from mindroom.memory.files.store import FileMemory
from mindroom.memory.scope import MemoryScope
from tests.support.harness import REPO

# "tea" is in three of four entries: a common term, the case that printed 0.00. The entries
# differ in length, so BM25 ranks them apart.
TEXTS = [
    "Alice likes tea",
    "Bob drinks black tea with milk",
    "Carol drinks a big mug of strong tea every single morning before work",
    "Dave swims",
]
SCORE = re.compile(r"score (\S+)\)")


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[FileMemory]:
    root = tmp_path / "workspace"
    root.mkdir()
    mem = FileMemory(MemoryScope("agent_test", root, tmp_path / "state"))
    yield mem
    mem.close()


def _nonzero_and_distinct(printed: list[str]) -> None:
    values = [float(p) for p in printed]
    assert all(v > 0 for v in values), printed
    assert len(set(printed)) > 1, printed  # the hits are told apart
    assert values == sorted(values, reverse=True), printed


@pytest.mark.asyncio
async def test_search_memories_tool_prints_common_term_scores_as_nonzero_numbers(
    memory: FileMemory,
) -> None:
    tools = MemoryTools(memory)
    for text in TEXTS:
        assert (await tools.add_memory(text)).startswith("remembered")

    answer = await tools.search_memories("tea")

    printed = SCORE.findall(answer)
    assert len(printed) == 3, answer
    assert "0.00" not in printed
    _nonzero_and_distinct(printed)


def test_memory_search_cli_prints_common_term_scores_as_nonzero_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    shutil.copy(REPO / "config.yaml", config)
    shutil.copytree(REPO / "mind_template", tmp_path / "mind_template")
    for text in TEXTS:
        assert main(["memory", "add", "--config", str(config), "--agent", "general", text]) == 0
    capsys.readouterr()

    code = main(["memory", "search", "--config", str(config), "--agent", "general", "tea"])
    out = capsys.readouterr().out

    assert code == 0
    printed = [line.split()[0] for line in out.splitlines()]
    assert len(printed) == 3, out
    assert "0.00" not in printed
    _nonzero_and_distinct(printed)
