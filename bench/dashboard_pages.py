"""The dashboard's pages with a big memory: how long each takes to render.

One scope holds ``--entries`` entries (a tenth in MEMORY.md, the rest in daily files of 300,
random words of a Zipf-like vocabulary as ``bench/memory_search.py`` writes them) and a
history of as many records; the dashboard runs in this process on a loopback port, over a
bot stand-in that has the real memory registry (no homeserver: the pages read the config, the
memory and the ledger). Each page is fetched ``--rounds`` times over HTTP after one warm-up
(the warm-up of the scope page builds the search index once: reported apart, as ``cold``).
The baseline, measured in the same run, is a static file from the same server: what HTTP and
the access checks cost alone.

    python bench/dashboard_pages.py [--entries 10000] [--rounds 20] [--seed 7]

The last line is ``max_page_p50_ms=N`` (target: every page under 300 ms with 10k entries).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import aiohttp  # noqa: E402
from memory_search import sentence, vocabulary  # noqa: E402
from structured_memory import write_scope  # noqa: E402

from mindroom.config.load import load_config  # noqa: E402
from mindroom.config.schema import Config  # noqa: E402
from mindroom.dashboard.server import Dashboard  # noqa: E402
from mindroom.memory.files.history import HistoryRecord  # noqa: E402
from mindroom.memory.files.markdown import parse_entries  # noqa: E402
from mindroom.memory.registry import MemoryRegistry  # noqa: E402

CONFIG = """\
models:
  default: {provider: openai, id: none, base_url: "http://127.0.0.1:9/v1", api_key: x}
agents:
  general: {role: Helps., rooms: [lobby]}
memory:
  embedder: none
  maintenance: {enabled: false}
"""


@dataclass
class Host:
    """The bot as the dashboard reads it, without a homeserver."""

    config: Config
    memories: MemoryRegistry
    router: Any = None
    agents: dict[str, Any] = field(default_factory=dict)
    room_ids: dict[str, str] = field(default_factory=dict)

    def room_agents(self, room_id: str) -> list[str]:
        return []


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_history(state: Path, root: Path, rng: random.Random, words: list[str]) -> list[str]:
    """A history record per entry (its add), and the entry ids."""
    ids: list[str] = []
    lines = []
    for path in sorted(root.rglob("*.md")):
        relative = path.relative_to(root).as_posix()
        for entry in parse_entries(path.read_text(), relative):
            ids.append(entry.id)
            record = HistoryRecord(
                rng.random() * 1e9, "tool", "add", entry.id, relative, None, entry.text
            )
            lines.append(json.dumps(asdict(record)))
    state.mkdir(parents=True, exist_ok=True)
    (state / "history.jsonl").write_text("\n".join(lines) + "\n")
    return ids


async def timed(session: aiohttp.ClientSession, path: str) -> float:
    start = time.perf_counter()
    async with session.get(path) as answer:
        await answer.read()
        assert answer.status == 200, (path, answer.status)
    return (time.perf_counter() - start) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    words = vocabulary(rng)
    with tempfile.TemporaryDirectory() as tmp:
        storage = Path(tmp)
        (storage / "config.yaml").write_text(CONFIG)
        config = load_config(storage / "config.yaml")
        root = storage / "agents" / "general" / "workspace"
        write_scope(root, args.entries, rng, words)
        ids = write_history(
            storage / "mindroom_data" / "memory" / "agent_general", root, rng, words
        )
        registry = MemoryRegistry(config, storage, storage)
        host = Host(config, registry)
        dash = Dashboard(host, storage / "config.yaml", storage / "mindroom_data", free_port())
        assert await dash.start()
        jar = aiohttp.CookieJar(unsafe=True)
        base = f"http://127.0.0.1:{dash.port}"
        try:
            async with aiohttp.ClientSession(base, cookie_jar=jar) as session:
                await session.get(f"/?token={dash.token}")
                cold = await timed(session, "/memory/s/agent_general")
                async with session.get(f"/memory/s/agent_general?q={words[0]}") as answer:
                    shown = (await answer.text()).count("/e/")
                assert shown > 0, "the search found nothing: the bench would time empty pages"
                pages: dict[str, Any] = {
                    "static file (baseline)": lambda: "/static/style.css",
                    "status": lambda: "/",
                    "status data (live)": lambda: "/api/status",
                    "agents": lambda: "/agents",
                    "memory settings": lambda: "/memory/settings",
                    "memory scopes": lambda: "/memory",
                    "scope listing": lambda: "/memory/s/agent_general",
                    "scope search": lambda: f"/memory/s/agent_general?q={sentence(rng, words)}",
                    "entry + history": lambda: f"/memory/s/agent_general/e/{rng.choice(ids)}",
                    "deleted entries": lambda: "/memory/s/agent_general/deleted",
                }
                results = {}
                for name, path in pages.items():
                    await timed(session, path())  # warm-up
                    results[name] = [await timed(session, path()) for _ in range(args.rounds)]
        finally:
            await dash.stop()
            registry.close()
    print(
        f"{args.entries} entries and {len(ids)} history records in one scope; "
        f"{args.rounds} rounds per page"
    )
    print(f"scope listing, cold (builds the search index): {cold:8.1f} ms")
    floor = statistics.median(results["static file (baseline)"])
    for name, times in results.items():
        p50, p95 = statistics.median(times), statistics.quantiles(times, n=20)[-1]
        print(f"{name:24s} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms   {p50 / floor:6.1f}x baseline")
    worst = max(statistics.median(t) for n, t in results.items() if "baseline" not in n)
    print(f"max_page_p50_ms={worst:.1f}")


if __name__ == "__main__":
    asyncio.run(main())
