"""Descriptors and threads while many people talk to a private companion, one after another.

In one process, with the scripted model answering instantly: ``--people`` distinct requesters
each have one real turn with a private agent (recall over their own memory index, Agno reading
and writing their own session database, the model over HTTP). Prints the process's open
descriptors and threads at the baseline (after one warm-up person) and after every ``--every``
people, against ``memory.max_open_private_instances`` (``--cap``, default the config default).

    python bench/private_instances.py [--people 1000] [--every 100] [--cap N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest  # noqa: E402
from mindroom.config import parse_config  # noqa: E402
from mindroom.memory.registry import MemoryRegistry  # noqa: E402
from tests.support.harness import config_text  # noqa: E402
from tests.support.scripted_model import ScriptedModel  # noqa: E402


def descriptors() -> int:
    return len(os.listdir("/proc/self/fd")) - 1  # minus the one listdir uses


async def run(people: int, every: int, cap: int | None) -> None:
    os.environ["AGNO_TELEMETRY"] = "false"
    memory: dict[str, object] = {"auto_flush": {"enabled": False}}
    if cap is not None:
        memory["max_open_private_instances"] = cap
    with ScriptedModel() as model, tempfile.TemporaryDirectory() as tmp:
        model.set_handler(lambda request: "noted")
        text = config_text(
            model.base_url, {"mind": {"rooms": ["r"], "private": {"per": "user"}}}, memory=memory
        )
        config = parse_config(text, "config.yaml")
        registry = MemoryRegistry(config, Path(tmp))
        runtime = AgentRuntime(config, Path(tmp) / "mindroom_data", registry)
        try:
            await runtime.run_turn(TurnRequest("mind", "warmup", "@warmup:localhost", "hi"))
            print(f"open private instances allowed: {registry.private_capacity()}")
            print(f"baseline: {descriptors()} descriptors, {threading.active_count()} threads")
            for i in range(1, people + 1):
                user = f"@person{i}:localhost"
                result = await runtime.run_turn(TurnRequest("mind", f"s{i}", user, "hello"))
                if not result.ok:
                    raise SystemExit(f"person {i} got an error: {result.error}")
                if i % every == 0:
                    print(
                        f"after {i} people: {descriptors()} descriptors,"
                        f" {threading.active_count()} threads"
                    )
        finally:
            await runtime.close()
            registry.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--people", type=int, default=1000)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--cap", type=int, default=None)
    args = parser.parse_args()
    asyncio.run(run(args.people, args.every, args.cap))


if __name__ == "__main__":
    main()
