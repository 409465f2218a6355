"""Past conversations as a memory source: what indexing costs a reply, and search.

In one process, with the scripted model answering at once (so the figures are mindroom's own
work: recall, Agno, the model over HTTP, session writes):

- ``reply``: ``--turns`` agent turns in ``--sessions`` conversations, alternately with
  ``memory.sources: [memory]`` (the baseline) and ``[memory, sessions]``, where each turn is
  followed by the session index's delta sync *awaited inline* (:class:`TranscriptIndexer`
  with the default threshold). In the bot the sync runs after the reply is posted, in the
  background, so this is an upper bound of what it adds to a reply. Also timed: one sync alone
  (read the session from Agno's store, add the new messages) and a session's final sync.
- ``search``: ``--indexed`` conversations of about 10 messages each (random words of a Zipf-
  like vocabulary, as ``bench/memory_search.py`` writes memories) in one scope's index, plus
  200 memory entries, searched ``--queries`` times through the agent's view, with past
  conversations as a source and without (the baseline, the memory files alone).

    python bench/session_index.py [--sessions 10] [--turns 120] [--indexed 1000]
                                  [--queries 200] [--seed 7]

The last line is ``reply_overhead_ms=N search_p50_ms=N`` (target: under 5 ms added to a
reply).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from memory_search import sentence, vocabulary  # noqa: E402

from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest  # noqa: E402
from mindroom.config import parse_config  # noqa: E402
from mindroom.memory.files.store import FileMemory  # noqa: E402
from mindroom.memory.policy.access import CategoryAccess  # noqa: E402
from mindroom.memory.policy.view import AgentView  # noqa: E402
from mindroom.memory.registry import MemoryRegistry  # noqa: E402
from mindroom.memory.search.session_index import TranscriptMessage  # noqa: E402
from mindroom.memory.search.session_source import close_all, index_transcript  # noqa: E402
from mindroom.sessions.transcripts import TranscriptIndexer  # noqa: E402
from tests.support.harness import config_text  # noqa: E402
from tests.support.scripted_model import ScriptedModel  # noqa: E402

PERSON = "@ada:example.org"


def config(base_url: str, sessions: bool) -> str:
    doc = json.loads(config_text(base_url, {"general": {"rooms": []}}))
    doc["memory"]["sources"] = ["memory", "sessions"] if sessions else ["memory"]
    return json.dumps(doc)


def ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


async def replies(root: Path, model: ScriptedModel, sessions: int, turns: int) -> float:
    """The reply figures; returns the milliseconds the sync added to a reply (median)."""
    off = parse_config(config(model.base_url, False), "bench")
    on = parse_config(config(model.base_url, True), "bench")
    current = [off]
    memories = MemoryRegistry(on, root, config_dir=root)
    runtime = AgentRuntime(on, root / "mindroom_data", memories)
    indexer = TranscriptIndexer(lambda: current[0], runtime, memories)
    times: dict[bool, list[float]] = {False: [], True: []}
    syncs: list[float] = []
    try:
        await runtime.run_turn(TurnRequest("general", "warm-up", PERSON, "hello"))  # imports
        for turn in range(turns):
            with_index = turn % 2 == 1  # alternate, so drift hits both alike
            current[0] = on if with_index else off
            runtime.set_config(current[0])
            session = f"general:!bench:{'on' if with_index else 'off'}-{turn % sessions}"
            start = time.perf_counter()
            await runtime.run_turn(
                TurnRequest("general", session, PERSON, f"turn {turn}: tell me about kayaks")
            )
            if with_index:
                begun = time.perf_counter()
                if await indexer.turn_finished("general", session, None):
                    syncs.append(time.perf_counter() - begun)
            times[with_index].append(time.perf_counter() - start)
        final = []
        for n in range(sessions):
            begun = time.perf_counter()
            await indexer.sync("general", f"general:!bench:on-{n}", None, final=True)
            final.append(time.perf_counter() - begun)
    finally:
        await runtime.close()
        memories.close()
        close_all()
    overhead = ms(times[True]) - ms(times[False])
    print(
        f"reply: {turns} turns in {sessions} conversations, threshold "
        f"{on.memory.session_index_messages} messages"
    )
    print(f"  sources [memory]:           median {ms(times[False]):7.2f} ms")
    print(
        f"  sources [memory, sessions]: median {ms(times[True]):7.2f} ms  "
        f"(the sync awaited inline: an upper bound)"
    )
    print(f"  added: {overhead:+.2f} ms  ratio {ms(times[True]) / ms(times[False]):.3f}x")
    if syncs:
        print(f"  one delta sync: median {ms(syncs):.2f} ms ({len(syncs)} syncs)")
    print(f"  a session's final sync: median {ms(final):.2f} ms")
    return overhead


def search(root: Path, indexed: int, queries: int, rng: random.Random) -> float:
    """The search figures; returns the p50 with past conversations, in milliseconds."""
    from mindroom.memory.scope import MemoryScope

    words = vocabulary(rng)
    workspace = root / "scope"
    (workspace / "memory").mkdir(parents=True)
    memory = FileMemory(MemoryScope("agent_bench", workspace, root / "state"))
    try:
        for _ in range(200):
            memory.add_sync(sentence(rng, words), actor="bench")
        begun = time.perf_counter()
        for n in range(indexed):
            messages = [
                TranscriptMessage(
                    "user" if i % 2 == 0 else "assistant",
                    sentence(rng, words),
                    PERSON if i % 2 == 0 else None,
                    1.7e9 + n * 60 + i,
                )
                for i in range(rng.randint(8, 12))
            ]
            index_transcript(memory, f"general:!room{n}:$thread", messages, min_new=1)
        built = time.perf_counter() - begun
        plain = AgentView(memory, CategoryAccess.everything())
        both = AgentView(memory, CategoryAccess.everything(), sessions=True)
        asked = [" ".join(rng.sample(words[:400], rng.randint(2, 4))) for _ in range(queries)]
        plain.search_sync(asked[0], 5)  # warm both
        both.search_sync(asked[0], 5)
        timed: dict[str, list[float]] = {"memory": [], "sessions": []}
        found = 0
        for query in asked:
            for name, view in (("memory", plain), ("sessions", both)):
                begun = time.perf_counter()
                hits = view.search_sync(query, 5)
                timed[name].append(time.perf_counter() - begun)
                if name == "sessions":
                    found += any(h.entry.path.startswith("sessions/") for h in hits)
    finally:
        memory.close()
        close_all()
    p50 = ms(timed["sessions"])
    print(
        f"search: {indexed} indexed conversations (built in {built:.1f} s), {queries} queries "
        f"({found} found a conversation)"
    )
    print(f"  memory files alone:       p50 {ms(timed['memory']):6.2f} ms")
    print(f"  with past conversations:  p50 {p50:6.2f} ms  ratio {p50 / ms(timed['memory']):.2f}x")
    return p50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--turns", type=int, default=120)
    parser.add_argument("--indexed", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel() as model:
        model.set_handler(lambda request: "Kayaks are light boats.")
        root = Path(tmp)
        (root / "replies").mkdir()
        overhead = asyncio.run(
            replies(root / "replies", model, max(1, args.sessions), max(2, args.turns))
        )
        p50 = search(
            root / "search", max(1, args.indexed), max(1, args.queries), random.Random(args.seed)
        )
    print(f"reply_overhead_ms={overhead:.2f} search_p50_ms={p50:.2f}")


if __name__ == "__main__":
    main()
