"""Memory flush overhead: turn latency while the worker flushes 200 dirty sessions, vs idle.

In one process, with the scripted model answering instantly: creates ``--sessions`` finished
conversations (real Agno sessions in SQLite), then measures the latency of ``--turns`` agent
turns (recall, Agno, the model over HTTP, session writes: the bot's side of a reply) first with
the flush worker idle, then while it flushes every dirty session in the background. Prints both
medians, their ratio (target at most 1.1) and the flush throughput. Before each session the
worker lets running turns go first for at most a bounded time, so a busy bot still flushes.

    python bench/flush_overhead.py [--sessions 200] [--turns 60]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest  # noqa: E402
from mindroom.config import parse_config  # noqa: E402
from mindroom.memory.flush.loop import FlushWorker  # noqa: E402
from mindroom.memory.registry import MemoryRegistry  # noqa: E402
from tests.support.harness import config_text  # noqa: E402
from tests.support.scripted_model import ScriptedModel, all_text, system_text  # noqa: E402


def handler(request: dict) -> str:
    if "You maintain the long-term memory" in system_text(request):
        said = all_text(request).split("Conversation:\n", 1)[-1].split("\n\nDurable facts")[0]
        return "- " + said.rsplit("fact", 1)[-1][:40].strip() if "fact" in said else "NO_REPLY"
    return "ok"


async def turns(runtime: AgentRuntime, n: int, tag: str) -> list[float]:
    times = []
    for i in range(n):
        start = time.perf_counter()
        await runtime.run_turn(TurnRequest("general", f"live-{tag}-{i}", "@u:x", "hello there"))
        times.append(time.perf_counter() - start)
    return times


async def main(sessions: int, n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel() as model:
        model.set_handler(handler)
        root = Path(tmp)
        flush = {
            "auto_flush": {
                "enabled": True,
                "idle_seconds": 0,
                "batch": {
                    "max_sessions_per_cycle": sessions,
                    "max_sessions_per_agent_per_cycle": sessions,
                },
            }
        }
        config = parse_config(
            config_text(model.base_url, {"general": {"rooms": ["r"]}}, memory=flush), "bench"
        )
        registry = MemoryRegistry(config, root)
        runtime = AgentRuntime(config, root / "mindroom_data", registry)
        worker = FlushWorker(config, runtime, registry, root / "mindroom_data")
        for i in range(sessions):
            await runtime.run_turn(
                TurnRequest("general", f"s{i}", "@u:x", f"remember this fact number {i}")
            )
            await worker.turn_finished("general", f"s{i}", None)

        await turns(runtime, 5, "warm")
        idle = await turns(runtime, n, "idle")

        flushing = asyncio.create_task(worker.cycle())
        busy = await turns(runtime, n, "busy")  # the worker is running the whole time
        started = time.perf_counter()
        results = await flushing
        elapsed = time.perf_counter() - started  # what was left once the turns stopped
        flushed = len([r for r in results if not r.error])
        await worker.aclose()
        await runtime.close()
        registry.close()

    med_idle, med_busy = statistics.median(idle), statistics.median(busy)
    print(f"turn latency, worker idle      median {med_idle * 1000:7.1f} ms (n={n})")
    print(f"turn latency, worker flushing  median {med_busy * 1000:7.1f} ms (n={n})")
    print(f"ratio                          {med_busy / med_idle:7.2f}x (target at most 1.1)")
    print(
        f"flush throughput               {flushed / elapsed:7.1f} sessions/s "
        f"({flushed} sessions in {elapsed:.1f} s once the turns stopped)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=60)
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.turns))
