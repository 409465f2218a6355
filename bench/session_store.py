"""Saving and loading an Agno session: a SQLite file against PostgreSQL, in one run.

A session save or load should take under 100 ms. This starts its own
PostgreSQL (Debian's binaries, a throwaway cluster) and times, through mindroom's own session
stores (the ones turns use), what the end of a turn saves (``upsert_run`` of its run, then
``upsert_session``) and ``get_session`` (the session with its runs) of a conversation of
``--runs`` runs (each a question and an answer of about 400 characters), alternating the two
databases call by call so drift hits both alike.

    python bench/session_store.py [--runs 20] [--rounds 200]

The last line is ``sqlite_save_p50_ms=N sqlite_load_p50_ms=N pg_save_p50_ms=N
pg_load_p50_ms=N``.
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

from agno.db.base import SessionType  # noqa: E402
from agno.models.message import Message  # noqa: E402
from agno.run.agent import RunOutput  # noqa: E402
from agno.run.base import RunStatus  # noqa: E402
from agno.session import AgentSession  # noqa: E402

from mindroom.adapters.agno.session_stores import SessionStores  # noqa: E402
from tests.support.postgres import PostgresServer  # noqa: E402


def conversation(runs: int) -> AgentSession:
    said = "a sentence of about forty characters. " * 10
    return AgentSession(
        session_id="bench",
        agent_id="general",
        created_at=1,
        updated_at=1,
        runs=[
            RunOutput(
                run_id=f"r{i}",
                agent_id="general",
                session_id="bench",
                status=RunStatus.completed,
                messages=[
                    Message(role="user", content=f"question {i}: {said}"),
                    Message(role="assistant", content=f"answer {i}: {said}"),
                ],
            )
            for i in range(runs)
        ],
    )


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def main(runs: int, rounds: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server = PostgresServer(Path(tempfile.mkdtemp(prefix="mindroom-pg-bench-"))).start()
        try:
            stores = {
                "sqlite": SessionStores(4, None, root),
                "pg": SessionStores(4, server.database(), root),
            }
            path = root / "mindroom_data" / "sessions" / "general.db"
            dbs = {
                k: s.get(path, per_person=False, session_table="agent_sessions")
                for k, s in stores.items()
            }
            session = conversation(runs)
            for db in dbs.values():  # the conversation so far: its runs are rows of their own
                await db.upsert_session(session)
                for index, run in enumerate(session.runs or []):
                    await db.upsert_run(run, "bench", run_index=index)
            last = (session.runs or [])[-1]
            times: dict[str, list[float]] = {
                f"{key}_{op}": [] for key in dbs for op in ("save", "load")
            }
            for i in range(rounds + 5):
                for key, db in dbs.items():
                    start = time.perf_counter()  # what a turn's end saves: its run, the session
                    await db.upsert_run(last, "bench", run_index=runs - 1)
                    await db.upsert_session(session)
                    saved = time.perf_counter() - start
                    start = time.perf_counter()
                    loaded = await db.get_session("bench", SessionType.AGENT)
                    load = time.perf_counter() - start
                    assert isinstance(loaded, AgentSession)
                    assert len(loaded.runs or []) == runs
                    if i >= 5:  # warm-up: tables made, connections open
                        times[f"{key}_save"].append(saved)
                        times[f"{key}_load"].append(load)
            for store in stores.values():
                await store.close()
        finally:
            server.stop()
    for name, values in times.items():
        print(
            f"{name:<12} p50 {p(values, 0.5):7.2f} ms   p95 {p(values, 0.95):7.2f} ms   "
            f"(n={len(values)}, {runs} runs)"
        )
    return {name: statistics.median(values) * 1000 for name, values in times.items()}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=200)
    options = parser.parse_args()
    found = asyncio.run(main(max(1, options.runs), max(1, options.rounds)))
    print(" ".join(f"{k}_p50_ms={v:.1f}" for k, v in found.items()))
