"""``mindroom memory import`` of a big export: how long 3,000 entries take.

Writes a synthetic export in the markdown export format (``# Memories of agent_general``, a
``## <file>`` heading per file, mindroom entries with random fields: category, importance, a
few pinned, created days; some hand-written lines): ``--entries`` entries spread over
``MEMORY.md`` and daily files of ``--per-file`` entries. The texts are sentences of random
words of a made-up vocabulary (seeded), tuned to no dataset. Then imports it into a fresh
storage through the real CLI path, a subprocess ``python -m mindroom memory import FILE
--agent general`` with the repository's ``config.yaml``, timed from start to exit, and counts
the entries the memory files hold afterwards.

``--code DIR`` runs another checkout's mindroom (its folder goes first on ``PYTHONPATH``), to
compare with the code before a change; ``--timeout S`` stops an import that takes longer (the
figure is then ``> S``).

    python bench/memory_import.py [--entries 3000] [--per-file 100] [--seed 7]
                                  [--code DIR] [--timeout 600]

The last line is ``import_entries=N import_s=F`` (``import_s=>S`` when it was stopped).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CATEGORIES = ("general", "preferences", "health", "tasks", "profile", "procedural")
_ENTRY_RE = re.compile(r"^(?:- .* <!-- m-[0-9a-f]{8}[^>]*-->|- (?!.*<!--).+)$")


def vocabulary(rng: random.Random, size: int = 4000) -> list[str]:
    """Made-up words (letters drawn at random), so no dataset shapes the texts."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(3, 9))) for _ in range(size)]


def entry_lines(rng: random.Random, words: list[str], n: int, daily: bool) -> list[str]:
    """One entry: mostly mindroom entries with fields, every 15th a hand-written line."""
    text = " ".join(rng.choices(words, k=rng.randint(5, 16))).capitalize() + f" ({n})"
    if n % 15 == 0:
        return [f"- {text}"]
    fields = [f"category={rng.choice(CATEGORIES)}", f"importance={rng.randint(1, 5)}"]
    if n % 11 == 0:
        fields.append("pinned")
    if not daily:
        fields.append(f"created=2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}")
    lines = [f"- {text} <!-- m-{rng.getrandbits(32):08x} {' '.join(fields)} -->"]
    if n % 9 == 0:
        lines.append("  " + " ".join(rng.choices(words, k=8)))
    return lines


def export_document(entries: int, per_file: int, seed: int) -> tuple[str, int]:
    """The export text and how many files it names."""
    rng = random.Random(seed)
    words = vocabulary(rng)
    lines = ["# Memories of agent_general"]
    files = 0
    for start in range(0, entries, per_file):
        day = start // per_file - 1  # one daily file per day of 2026, after MEMORY.md
        relative = f"memory/2026-{day // 28 + 1:02d}-{day % 28 + 1:02d}.md" if day >= 0 else ""
        relative = relative or "MEMORY.md"
        files += 1
        lines += ["", f"## {relative}", ""]
        for n in range(start, min(entries, start + per_file)):
            lines += entry_lines(rng, words, n, relative != "MEMORY.md")
    return "\n".join(lines) + "\n", files


def count_entries(root: Path) -> int:
    """Entries in the memory files (first lines of entries: a bullet at column 0)."""
    total = 0
    for path in root.rglob("*.md"):
        total += sum(1 for line in path.read_text("utf-8").splitlines() if _ENTRY_RE.match(line))
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=3000)
    parser.add_argument("--per-file", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--code", type=Path, default=REPO, help="the checkout to run")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()

    document, files = export_document(args.entries, args.per_file, args.seed)
    with tempfile.TemporaryDirectory(prefix="mindroom-import-") as tmp:
        storage = Path(tmp)
        shutil.copy(REPO / "config.yaml", storage / "config.yaml")
        shutil.copytree(REPO / "mind_template", storage / "mind_template")
        source = storage / "export.md"
        source.write_text(document, encoding="utf-8")
        print(f"export: {args.entries} entries in {files} files, {len(document)} bytes")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(args.code.resolve()), *filter(None, [env.get("PYTHONPATH")])]
        )
        probe = [sys.executable, "-c", "import mindroom; print(mindroom.__file__)"]
        which = subprocess.run(
            probe, env=env, cwd=storage, capture_output=True, text=True, check=True
        ).stdout.strip()
        command = [sys.executable, "-m", "mindroom", "memory", "import", str(source)]
        command += ["--config", str(storage / "config.yaml"), "--agent", "general"]
        started = time.monotonic()
        try:
            done = subprocess.run(
                command,
                env=env,
                cwd=storage,  # not the checkout: ``-m`` puts the working folder on the path first
                capture_output=True,
                text=True,
                timeout=args.timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            print(f"code: {which}")
            print(f"the import did not finish in {args.timeout:.0f} s: stopped")
            print(f"import_entries={args.entries} import_s=>{args.timeout:.0f}")
            return 1
        elapsed = time.monotonic() - started
        if done.returncode != 0:
            print(done.stdout + done.stderr)
            return done.returncode
        root = storage / "agents" / "general" / "workspace"
        print(f"code: {which}")
        print(f"cli: {done.stdout.strip()}")
        print(f"entries in the memory files afterwards: {count_entries(root)}")
        print(f"entries per second: {args.entries / elapsed:.0f}")
    print(f"import_entries={args.entries} import_s={elapsed:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
