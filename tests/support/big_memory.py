"""A big daily memory file of realistic entries, generated (no fixtures): for the tests and
bench/big_memory_file.py."""

from __future__ import annotations

import random

PEOPLE = ("Alice", "Bob", "Carol", "Dan", "Eve", "Frank")
VERBS = ("mentioned", "decided", "asked about", "prefers", "scheduled", "finished", "reviewed")
THINGS = (
    "the quarterly report",
    "a trip to Lyon",
    "green tea",
    "the database migration",
    "project Falcon",
    "the dentist appointment",
    "a birthday gift for Mia",
    "the garden",
)
CATEGORIES = ("general", "tasks", "profile", "work")


def daily_entries(size_bytes: int, seed: int = 7) -> str:
    """Mindroom entries (with fields, as the flush writes them) up to ``size_bytes``."""
    rng = random.Random(seed)
    lines: list[str] = []
    size = 0
    while size < size_bytes:
        n = len(lines)
        text = (
            f"{rng.choice(PEOPLE)} {rng.choice(VERBS)} {rng.choice(THINGS)} at "
            f"{rng.randint(7, 22):02d}:{rng.randint(0, 59):02d}, note {n} about "
            f"{rng.choice(THINGS)} and follow-up {rng.randint(1, 99999)}"
        )
        fields = f"category={rng.choice(CATEGORIES)} importance={rng.randint(1, 5)}"
        line = f"- {text} <!-- m-{n:08x} {fields} -->\n"
        lines.append(line)
        size += len(line)
    return "".join(lines)
