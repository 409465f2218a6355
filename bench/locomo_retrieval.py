"""LoCoMo retrieval: does the memory search find the turns that answer a question?

For each conversation of the LoCoMo file, in a fresh temporary workspace, every turn is written
as an entry ``"<speaker> (<D Month YYYY>): <text>"`` in the daily file of its session's date
through the product's memory API (see ``bench/locomo.py``; image captions are not stored).
Each question is then searched, top 10, with the call the ``search_memories`` tool makes
(``FileMemory.search``), and the hits are mapped back to the turns' ``dia_id``s.

Scores, per question, then averaged over questions:

* Recall@k: the fraction of the question's evidence dia_ids that are among the top k hits.
  A question with three evidence turns of which one is found scores 1/3, not 0 or 1.
* MRR: 1 / the rank of the first hit that is evidence (0 when none is in the top 10).

Questions whose evidence is empty or names a dia_id the conversation does not have are skipped.
``cat1-4`` averages over categories 1-4 (single-hop, temporal, open-domain, multi-hop); ``all``
adds category 5 (adversarial). The output ends with exactly these two lines:

    cat1-4: R@5=0.xxx R@10=0.xxx MRR=0.xxx n=N
    all: R@5=0.xxx R@10=0.xxx MRR=0.xxx n=N

    python bench/locomo_retrieval.py [--data FILE] [--embedder none|default]
                                     [--backend file|mem0] [--index local|postgresql]

The default data is ``../shared/data/locomo-dev.json`` relative to the repository root.
``--embedder default`` sets ``memory.embedder`` to the local default embedder; a mindroom
without embedder support says so and exits.

``--backend mem0`` stores each turn (the same entry text) verbatim as one mem0 memory
(``infer=False``, no model) through the product's ``Mem0Memory``, in a fresh storage per
conversation, and searches with the same call; mem0 needs an embedder, so it uses the local
default one. Before the two final lines it prints, as ``#`` lines, mem0's add latency
(verbatim), the latency of an add with mem0's own extraction (``infer=True``: one model call,
answered at once by the scripted model of ``tests/support/scripted_model.py``, so what is
measured is mem0's own work around the call), mem0's search latency, and the file backend's
scores and search latency in the same run with the same embedder. ``--backend file`` prints its
search latency too. With an embedder, the keyword-only baseline (the file backend without one) is
measured in the same run and printed as ``# keyword-only ...`` lines. Latencies are wall times
of the product's async calls, in ms.

``--index postgresql`` also searches the file backend's memories in the PostgreSQL index
(``memory.search.index: postgresql``: full-text search and pgvector, a server of this run's own)
and prints its scores and search latency as ``# postgresql-index ...`` lines.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import json
import math
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from locomo import (
    BACKENDS,
    DEFAULT_DATA,
    EMBEDDERS,
    Conversation,
    answerable,
    bench_config,
    entry_text,
    load_conversations,
    opened,
    store,
)

from mindroom.config.schema import Config
from mindroom.memory.extraction import ChatLine
from mindroom.memory.mem0 import Mem0Memory
from tests.support.postgres import PostgresServer
from tests.support.scripted_model import ScriptedModel, last_user_text

TOP = 10
EXTRACTIONS = 20  # adds with mem0's extraction per conversation (after its questions)


@dataclass(frozen=True)
class Score:
    """One question's result."""

    category: int
    recall_5: float
    recall_10: float
    reciprocal_rank: float


@dataclass
class Timings:
    """Wall times (seconds) of one backend's calls over the whole run."""

    add: list[float] = field(default_factory=list)
    extract: list[float] = field(default_factory=list)
    extracted: int = 0  # memories those extractions stored (each should store one)
    search: list[float] = field(default_factory=list)


def score(ranked: list[str], evidence: tuple[str, ...], category: int) -> Score:
    """Score the dia_ids ``ranked`` (best first) against a question's ``evidence``."""
    wanted = set(evidence)
    first = next((rank for rank, dia in enumerate(ranked[:TOP], 1) if dia in wanted), None)
    return Score(
        category,
        len(wanted.intersection(ranked[:5])) / len(wanted),
        len(wanted.intersection(ranked[:TOP])) / len(wanted),
        1 / first if first else 0.0,
    )


def summary(label: str, scores: list[Score]) -> str:
    """``label: R@5=... R@10=... MRR=... n=N`` (means over questions; 0 when there are none)."""

    def mean(values: list[float]) -> float:
        return statistics.fmean(values) if values else 0.0

    return (
        f"{label}: R@5={mean([s.recall_5 for s in scores]):.3f} "
        f"R@10={mean([s.recall_10 for s in scores]):.3f} "
        f"MRR={mean([s.reciprocal_rank for s in scores]):.3f} n={len(scores)}"
    )


KEYWORD_ONLY = "keyword-only"  # the baseline's label: the file backend without an embedder
SHARED_INDEX = "postgresql-index"  # the file backend searched in PostgreSQL (--index)
_SERVERS: list[PostgresServer] = []


def postgres() -> PostgresServer:
    """A PostgreSQL with pgvector of this run's own, stopped at exit."""
    if not _SERVERS:
        folder = Path(tempfile.mkdtemp(prefix="mindroom-pg-"))  # the postgres user reaches it
        server = PostgresServer(folder).start()
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        atexit.register(server.stop)  # runs first
        _SERVERS.append(server)
    return _SERVERS[0]


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank ``p`` percentile (0 < p <= 1) of ``values``, in ms (0 when empty)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)] * 1000


def latency(label: str, values: list[float]) -> str:
    """``# label: p50=... ms p95=... ms n=N``."""
    return (
        f"# {label}: p50={percentile(values, 0.5):.1f} ms "
        f"p95={percentile(values, 0.95):.1f} ms n={len(values)}"
    )


def extraction_answer(body: dict[str, Any]) -> str:
    """The scripted model's answer to mem0's extraction prompt: one memory per user line of
    its "## New Messages" section (mem0 parses ``{"memory": [{"id", "text"}, ...]}``)."""
    prompt = last_user_text(body)
    new = prompt.split("## New Messages", 1)[-1].split("\n## ", 1)[0]
    texts = [line[6:] for line in new.splitlines() if line.startswith("user: ")]
    memories = [{"id": str(i), "text": "Noted: " + t} for i, t in enumerate(texts)]
    return json.dumps({"memory": memories})


async def run_conversation(
    conversation: Conversation, config: Config, timings: Timings
) -> list[Score]:
    """Store one conversation in a fresh storage and score each answerable question; on
    mem0, then time a few adds with mem0's own extraction in that scope."""
    with tempfile.TemporaryDirectory(prefix="locomo-") as tmp, opened(config, Path(tmp)) as memory:
        if isinstance(memory, Mem0Memory):
            await memory.list(1)  # opening mem0 (once per storage) is not part of an add
        dia_ids = await store(memory, conversation, timings.add)
        scores = []
        for question in answerable(conversation):
            start = time.perf_counter()
            hits = await memory.search(question.text, TOP)
            timings.search.append(time.perf_counter() - start)
            ranked = [dia_ids.get(hit.entry.id, "") for hit in hits]
            scores.append(score(ranked, question.evidence, question.category))
        if isinstance(memory, Mem0Memory):
            for turn in conversation.turns[:EXTRACTIONS]:
                start = time.perf_counter()
                line = ChatLine("user", entry_text(turn))
                stored = await asyncio.to_thread(memory.extract_sync, [line])
                timings.extract.append(time.perf_counter() - start)
                timings.extracted += len(stored)
        return scores


def _configs(embedder: str, backend: str, index: str, model_url: str) -> dict[str, Config]:
    """The memories measured in one run: ``backend`` and, beside it, the file backend with the
    same embedder, the keyword-only baseline and the same memory searched in PostgreSQL."""
    configs = {backend: bench_config(embedder, backend, model_url if backend != "file" else None)}
    if backend != "file":  # the file backend beside it, same embedder, same run
        configs["file"] = bench_config(embedder)
    if embedder != "none":  # the keyword-only baseline, measured in the same run
        configs[KEYWORD_ONLY] = bench_config("none")
    if index == "postgresql":  # the same memory searched in PostgreSQL, beside it
        configs[SHARED_INDEX] = bench_config(embedder, search_database=postgres().database())
    return configs


def _report_beside(name: str, scores: list[Score], timings: Timings) -> None:
    """The lines of a memory measured beside the one asked for: its latency and scores."""
    print(latency(f"{name} search", timings.search))
    print(f"# {name} {summary('cat1-4', [s for s in scores if 1 <= s.category <= 4])}")
    print(f"# {name} {summary('all', scores)}")


def main(data: Path, embedder: str | None, backend: str, index: str = "local") -> None:
    if backend == "mem0" and embedder == "none":
        raise SystemExit("--backend mem0 needs an embedder: drop --embedder none")
    embedder = embedder or ("default" if backend == "mem0" else "none")
    if not data.is_file():
        raise SystemExit(f"no LoCoMo data at {data}: pass --data FILE")
    with ScriptedModel() as model:
        model.set_handler(extraction_answer)
        configs = _configs(embedder, backend, index, model.base_url)
        scores: dict[str, list[Score]] = {name: [] for name in configs}
        timings = {name: Timings() for name in configs}
        for conversation in load_conversations(data):
            start = time.perf_counter()
            for name, config in configs.items():
                found = asyncio.run(run_conversation(conversation, config, timings[name]))
                scores[name].extend(found)
            print(
                f"# {conversation.sample_id}: {len(conversation.turns)} turns, "
                f"{len(found)} questions scored, {time.perf_counter() - start:.1f} s",
                flush=True,
            )
    if backend == "mem0":
        print(latency("mem0 add (verbatim, infer=False)", timings["mem0"].add))
        extract = latency(
            "mem0 add (infer=True, scripted model answering at once)", timings["mem0"].extract
        )
        print(f"{extract} stored={timings['mem0'].extracted}")
        print(latency("mem0 search", timings["mem0"].search))
        file_scores = scores["file"]
        print(f"# file {summary('cat1-4', [s for s in file_scores if 1 <= s.category <= 4])}")
        print(f"# file {summary('all', file_scores)}")
    print(latency(f"file search (embedder {embedder})", timings["file"].search))
    for name in (KEYWORD_ONLY, SHARED_INDEX):
        if name in scores:  # a baseline measured in the same run
            _report_beside(name, scores[name], timings[name])
    mine = scores[backend]
    print(summary("cat1-4", [s for s in mine if 1 <= s.category <= 4]))
    print(summary("all", mine))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a LoCoMo JSON file")
    parser.add_argument(
        "--embedder",
        choices=EMBEDDERS,
        default=None,
        help="none (keyword-only) or default (local); default: none for file, default for mem0",
    )
    parser.add_argument("--backend", choices=BACKENDS, default="file")
    parser.add_argument(
        "--index",
        choices=("local", "postgresql"),
        default="local",
        help="postgresql: also search the same memories in a PostgreSQL index (a server of "
        "its own, with pgvector)",
    )
    args = parser.parse_args()
    main(args.data, args.embedder, args.backend, args.index)
