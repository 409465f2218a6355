"""A big daily memory file: how long the first listing and the first search take.

Generates ``memory/2026-11-01.md`` of realistic mindroom entries (``--mb``, default 24: about
160,000 entries) in a fresh workspace, opens the file memory as the bot does, and times

* the first listing (``list_memories``: the newest entries first),
* the first search (``search_memories``, keyword-only: a fresh index has the file to index),
  and whether it waited for the whole file or searched what was indexed (catching up),
* how long the index took to catch up with the whole file, and a search after that.

    python bench/big_memory_file.py [--mb 24]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mindroom.memory.files.store import FileMemory  # noqa: E402
from mindroom.memory.scope import MemoryScope  # noqa: E402
from tests.support.big_memory import daily_entries  # noqa: E402

QUERY = "birthday gift for Mia"


def main(mb: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "workspace"
        daily = root / "memory" / "2026-11-01.md"
        daily.parent.mkdir(parents=True)
        daily.write_text(daily_entries(mb * 1_000_000))
        lines = daily.read_text().count("\n")
        print(f"daily file: {daily.stat().st_size / 1e6:.1f} MB, {lines} entries", flush=True)

        memory = FileMemory(MemoryScope("agent_bench", root, Path(tmp) / "state"))
        try:
            start = time.perf_counter()
            listed = memory.list_sync(20)
            first_list = time.perf_counter() - start
            print(f"first listing   {first_list:7.2f} s  ({len(listed)} entries)", flush=True)

            start = time.perf_counter()
            hits = memory.search_sync(QUERY, 5)
            first_search = time.perf_counter() - start
            catching_up = getattr(memory.index, "catching_up", False)
            state = "catching up: searched what was indexed" if catching_up else "index complete"
            print(f"first search    {first_search:7.2f} s  ({len(hits)} hits, {state})")

            start = time.perf_counter()
            memory.index.sync()  # wait for the whole file (the background pass, or this one)
            caught_up = first_search + time.perf_counter() - start
            print(f"index complete  {caught_up:7.2f} s after the first search began")
            start = time.perf_counter()
            hits = memory.search_sync(QUERY, 5)
            print(f"next search     {time.perf_counter() - start:7.2f} s  ({len(hits)} hits)")
        finally:
            memory.close()
    print(f"big_file_mb={mb} first_list_s={first_list:.2f} first_search_s={first_search:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=24)
    main(parser.parse_args().mb)
