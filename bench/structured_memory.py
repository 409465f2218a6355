"""Structured memory at 10k entries: ``memory_query`` in bullets, relations, the
writing validator.

Writes a scope of ``--entries`` entries (daily files of about 300 entries, plus MEMORY.md) whose
markers carry random fields (a category of the default set, importance 1-5, a few pinned, a few
soft-deleted), opens it as the product does (``FileMemory``; keyword search unless
``--hybrid``), and measures:

- ``memory_query``: the tool's whole path (request validation, the allowlist, the fields
  filter in SQL, search, bullets within a 512-token budget) for queries of 2-5 corpus words,
  each with a category and an importance filter, as an agent asks them; timed query by query
  in turn with ``search``: the store's search of the same words with no filter but the
  live-entries one (``FileMemory.search_sync``, what ``search_memories`` runs), the baseline;
- ``relations``: ``--links`` new entries written one by one, each then linked to its
  neighbours (``link_entry``: its rarest words counted, neighbours searched, edges stored, the
  LINK recorded), milliseconds per edge created; the indexes following each write are not
  timed (the next search pays for them, link or not);
- ``validator``: the product's extraction turn (prompt, Agno, HTTP client, parser) run over the
  LoCoMo sessions of ``--data`` (``--conversations`` of them), answered by a scripted extractor
  that follows the prompt's form mechanically (``bench/scripted_extractor.py`` says what that
  measures and what it does not); the share of facts the validator takes as written.

``--hybrid`` gives the scope the local embedder (``mindroom[embeddings]``) and random stand-in
vectors (``bench/memory_search.py`` says why), so searches and links are hybrid, the query
embedded by the real model, as in a default install with the extra. Figures depend on the
machine; the ratio less so.

    python bench/structured_memory.py [--entries 10000] [--queries 200] [--links 100]
                                      [--conversations 4] [--data FILE] [--seed 7] [--hybrid]

The last line is ``memory_query_bullets_p50_ms=N edge_ms=N validator_pass=0.xx``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import DEFAULT_DATA  # noqa: E402
from memory_search import sentence, vocabulary  # noqa: E402

from mindroom.memory.files.facts import tagged  # noqa: E402
from mindroom.memory.files.fields import EntryFields  # noqa: E402
from mindroom.memory.files.markdown import new_entry_id, render_entry  # noqa: E402
from mindroom.memory.files.store import FileMemory  # noqa: E402
from mindroom.memory.files.writing import validate  # noqa: E402
from mindroom.memory.policy.access import CategoryAccess  # noqa: E402
from mindroom.memory.policy.filters import LIVE  # noqa: E402
from mindroom.memory.policy.view import AgentView  # noqa: E402
from mindroom.memory.scope import MemoryScope  # noqa: E402
from mindroom.memory.search.relations import RelationSettings, link_entry  # noqa: E402
from mindroom.memory.search.structured_query import Asker, parse_request, run_query  # noqa: E402

PER_FILE = 300
CATEGORIES = ["general", "profile", "preferences", "goals", "event", "activity", "tasks"]


def random_fields(rng: random.Random, day: dt.date) -> EntryFields:
    return EntryFields(
        category=rng.choice(CATEGORIES),
        importance=rng.randint(1, 5),
        pinned=rng.random() < 0.05,
        state="soft_deleted" if rng.random() < 0.03 else None,
        created=day,
    )


def write_scope(root: Path, entries: int, rng: random.Random, words: list[str]) -> None:
    """``entries`` entries with fields: a tenth in MEMORY.md, the rest in daily files."""
    (root / "memory").mkdir(parents=True)
    day = dt.date(2025, 1, 1)
    curated = entries // 10
    lines = [
        line
        for _ in range(curated)
        for line in render_entry(new_entry_id(), sentence(rng, words), random_fields(rng, day))
    ]
    (root / "MEMORY.md").write_text("\n".join(lines) + "\n")
    written = curated
    while written < entries:
        count = min(PER_FILE, entries - written)
        lines = [
            line
            for _ in range(count)
            for line in render_entry(new_entry_id(), sentence(rng, words), random_fields(rng, day))
        ]
        (root / "memory" / f"{day.isoformat()}.md").write_text("\n".join(lines) + "\n")
        written += count
        day += dt.timedelta(days=1)


def edge_timing(
    memory: FileMemory, rng: random.Random, words: list[str], count: int
) -> tuple[float, int]:
    """Milliseconds per edge of linking ``count`` new entries, and the edges. Each entry is
    written and the indexes follow the write (as the next search would make them, link or
    not: not timed; with ``--hybrid`` that includes embedding it); then the link is timed:
    its rarest words counted, its neighbours searched, the edges stored and the LINK recorded,
    as a tool's add does."""
    settings = RelationSettings()
    spent, edges = 0.0, 0
    for _ in range(count):
        entry = memory.add_sync(sentence(rng, words[:300]), actor="bench", path="notes.md")
        memory.index.sync()
        if memory.vectors is not None:  # the vector index follows the write too
            memory.vectors.sync()
            memory.vectors.vector_of(entry.id)  # (joins its matrix again, as a search would)
        started = time.perf_counter()
        edges += link_entry(memory, entry, settings, actor="bench")
        spent += time.perf_counter() - started
    return (spent * 1000 / edges if edges else float("nan")), edges


def validator_rate(data: Path, conversations: int) -> tuple[float, int, Counter[str]]:
    """The first-pass rate of the facts the real extraction turn returns (the scripted
    extractor answering, see bench/scripted_extractor.py) over LoCoMo sessions."""
    import asyncio

    from locomo import load_conversations
    from scripted_extractor import extract

    from mindroom.adapters.agno.extraction import extract_facts
    from mindroom.adapters.agno.models import build_model
    from mindroom.config.models_schema import OpenAIModel
    from mindroom.memory.extraction import ChatLine
    from tests.support.scripted_model import ScriptedModel

    reasons: Counter[str] = Counter()
    verdicts = []
    with ScriptedModel() as server:
        server.set_handler(extract)
        model = build_model(
            "bench",
            OpenAIModel(
                provider="openai", id="scripted", base_url=server.base_url, api_key="bench"
            ),
        )

        async def run() -> None:
            for conversation in load_conversations(data)[:conversations]:
                by_day: dict[dt.date, list[ChatLine]] = {}
                for turn in conversation.turns:
                    user = f"@{turn.speaker.lower()}:locomo"
                    line = ChatLine("user", f"{turn.speaker} ({user}): {turn.text}", user)
                    by_day.setdefault(turn.day, []).append(line)
                for lines in by_day.values():
                    for start in range(0, len(lines), 10):
                        facts = await extract_facts(
                            model,
                            lines[start : start + 10],
                            [],
                            no_reply_token="NO_REPLY",
                            max_chars=12000,
                            categories=CATEGORIES,
                        )
                        for fact in facts:
                            text, _, _ = tagged(fact)
                            verdict = validate(text)
                            verdicts.append(verdict.first_pass)
                            reasons.update(r.split(":")[0] for r in verdict.reasons)

        asyncio.run(run())
    return (sum(verdicts) / len(verdicts) if verdicts else 0.0), len(verdicts), reasons


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--links", type=int, default=100, help="new entries linked (edge_ms)")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON")
    parser.add_argument("--conversations", type=int, default=4, help="of --data, for the validator")
    parser.add_argument(
        "--hybrid",
        action="store_true",
        help="search as with the local embedder (needs mindroom[embeddings]; see above)",
    )
    args = parser.parse_args()
    embedder = None
    if args.hybrid:
        from mindroom.adapters.embeddings.select import shared_embedder

        embedder = shared_embedder(None, Path.cwd())
        if embedder is None:
            sys.exit(
                "--hybrid: install mindroom[embeddings] first (pip install -e '.[embeddings]')"
            )
        print(f"hybrid: {embedder.model_id} (random stand-in vectors, as bench/memory_search.py)")
    rng = random.Random(args.seed)
    words = vocabulary(rng)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "workspace"
        root.mkdir()
        write_scope(root, args.entries, rng, words)
        memory = FileMemory(MemoryScope("bench", root, Path(tmp) / "state"), embedder)
        try:
            started = time.perf_counter()
            memory.index.sync()
            print(
                f"entries: {memory.index.count()}  index built in "
                f"{time.perf_counter() - started:.2f} s"
            )
            if embedder is not None:
                from vector_search import seed_vectors

                dims = embedder.embed(["load the model"]).shape[1]
                seed_vectors(
                    memory.index, Path(tmp) / "state" / "vectors.db", embedder.model_id, dims
                )
                assert memory.vectors is not None
                memory.vectors.sync()
            view = AgentView(memory, CategoryAccess.everything())
            asker = Asker("bench", None, frozenset({"bench"}))
            query_ms: list[float] = []
            search_ms: list[float] = []
            answered = 0
            for _ in range(args.queries):
                text = " ".join(rng.choice(words[:400]) for _ in range(rng.randint(2, 5)))
                request = parse_request(
                    {
                        "query": text,
                        "categories": rng.sample(CATEGORIES, 2),
                        "filters": {"importance_min": rng.randint(1, 3)},
                        "top_k": 5,
                        "return": "bullets",
                        "budget_tokens": 512,
                    }
                )
                started = time.perf_counter()
                answer = run_query(view, request, asker)
                query_ms.append((time.perf_counter() - started) * 1000)
                answered += answer != "[]"
                started = time.perf_counter()
                memory.search_sync(text, 5, LIVE)
                search_ms.append((time.perf_counter() - started) * 1000)
            edge_ms, edges = edge_timing(memory, rng, words, args.links)
        finally:
            memory.close()
    rate, facts, reasons = validator_rate(args.data, args.conversations)
    q50, s50 = statistics.median(query_ms), statistics.median(search_ms)
    print(f"queries: {args.queries} ({answered} with results)")
    print(f"memory_query bullets: p50 {q50:.2f} ms  p95 {percentile(query_ms, 0.95):.2f} ms")
    print(f"store search:         p50 {s50:.2f} ms  p95 {percentile(search_ms, 0.95):.2f} ms")
    print(f"memory_query / search (p50): {q50 / s50:.2f}x   target: bullets < 150 ms")
    print(
        f"relations: {edges} edges for {args.links} new entries, {edge_ms:.2f} ms an edge "
        "(search and store; target <= 2 ms)"
    )
    trimmed = ", ".join(f"{k} {v}" for k, v in reasons.most_common()) or "none"
    print(
        f"validator: {facts} facts from the extraction turn (scripted extractor), first pass "
        f"{rate:.3f}; trimmed or rejected for: {trimmed}"
    )
    print(f"memory_query_bullets_p50_ms={q50:.1f} edge_ms={edge_ms:.2f} validator_pass={rate:.2f}")


if __name__ == "__main__":
    main()
