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

The default data is ``../shared/data/locomo-dev.json`` relative to the repository root.
``--embedder default`` sets ``memory.embedder`` to the local default embedder; a mindroom
without embedder support says so and exits.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from locomo import (
    DEFAULT_DATA,
    EMBEDDERS,
    Conversation,
    answerable,
    bench_config,
    load_conversations,
    open_memory,
    store,
)

from mindroom.config.schema import Config

TOP = 10


@dataclass(frozen=True)
class Score:
    """One question's result."""

    category: int
    recall_5: float
    recall_10: float
    reciprocal_rank: float


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


async def run_conversation(conversation: Conversation, config: Config) -> list[Score]:
    """Store one conversation in a fresh workspace and score each answerable question."""
    with tempfile.TemporaryDirectory(prefix="locomo-") as tmp:
        memory = open_memory(config, Path(tmp))
        try:
            dia_ids = await store(memory, conversation)
            scores = []
            for question in answerable(conversation):
                hits = await memory.search(question.text, TOP)
                ranked = [dia_ids.get(hit.entry.id, "") for hit in hits]
                scores.append(score(ranked, question.evidence, question.category))
            return scores
        finally:
            memory.close()


def main(data: Path, embedder: str) -> None:
    config = bench_config(embedder)
    if not data.is_file():
        raise SystemExit(f"no LoCoMo data at {data}: pass --data FILE")
    scores: list[Score] = []
    for conversation in load_conversations(data):
        start = time.perf_counter()
        found = asyncio.run(run_conversation(conversation, config))
        print(
            f"# {conversation.sample_id}: {len(conversation.turns)} turns, "
            f"{len(found)} questions scored, {time.perf_counter() - start:.1f} s",
            flush=True,
        )
        scores.extend(found)
    print(summary("cat1-4", [s for s in scores if 1 <= s.category <= 4]))
    print(summary("all", scores))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a LoCoMo JSON file")
    parser.add_argument("--embedder", choices=EMBEDDERS, default="none")
    args = parser.parse_args()
    main(args.data, args.embedder)
