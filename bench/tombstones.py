"""What hiding deleted facts from past conversations costs.

Writes a history of ``--records`` records (one in ``--delete-every`` a deletion) and a
transcript of ``--messages`` messages in a fresh scope, then times

* reading the deleted facts from the history (each time the history changed: every write),
* the same read again with the history unchanged (cached: a stat),
* a past-conversations search with and without the deleted facts to check.

    python bench/tombstones.py [--records 10000] [--delete-every 10] [--messages 5000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mindroom.memory.files.store import FileMemory  # noqa: E402
from mindroom.memory.files.tombstones import DeletedFacts, _cache, deleted_from  # noqa: E402
from mindroom.memory.scope import MemoryScope  # noqa: E402
from mindroom.memory.search.session_index import TranscriptMessage  # noqa: E402
from mindroom.memory.search.session_source import (  # noqa: E402
    close_all,
    index_transcript,
    search_sessions,
)


def ms(start: float) -> str:
    return f"{(time.perf_counter() - start) * 1000:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--delete-every", type=int, default=10)
    parser.add_argument("--messages", type=int, default=5_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "workspace"
        root.mkdir()
        memory = FileMemory(MemoryScope("agent_bench", root, Path(tmp) / "state"))
        history = memory.history
        for n in range(args.records):
            op = "delete" if n % args.delete_every == 0 else "add"
            text = f"Bench person's locker number {n} is code{n:06d}x"
            history.append(
                actor="bench",
                op=op,
                entry_id=f"m-{n:08x}",
                path="MEMORY.md",
                old=text if op == "delete" else None,
                new=None if op == "delete" else text,
                durable=False,
            )
        said = [
            TranscriptMessage(
                "user" if n % 2 == 0 else "assistant",
                f"my locker number {n} is code{n:06d}x, and the weather is fine",
                "@bench:x",
                1e9 + n,
            )
            for n in range(args.messages)
        ]
        index_transcript(memory, "s1", said, min_new=1)
        start = time.perf_counter()
        facts = deleted_from(history)
        print(f"read {len(facts)} deleted facts from {args.records} records: {ms(start)}")
        start = time.perf_counter()
        deleted_from(history)
        print(f"again, history unchanged: {ms(start)}")
        for label in ("with", "without"):
            if label == "without":
                _cache[history.path] = (_cache[history.path][0], DeletedFacts())
            start = time.perf_counter()
            for _ in range(20):
                hits = search_sessions(memory, "locker weather", 5)
            print(f"search {label} the check: {ms(start)} for 20 ({len(hits)} hits)")
        close_all()


if __name__ == "__main__":
    main()
