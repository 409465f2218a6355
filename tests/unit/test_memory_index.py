"""MemoryIndex: FTS5 search over the memory files, always in step with what the files say."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from mindroom.memory.files.markdown import parse_entries
from mindroom.memory.files.protocol import atomic_write, read_text
from mindroom.memory.files.store import FileMemory
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.index import MemoryIndex, memory_files, query_terms
from tests.support.harness import write_entries

FILLER = [
    "Bob plays the violin on Sundays",
    "The office moved to Berlin last spring",
    "Carol's son is called Max",
    "The car needs new winter tyres",
    "Dentist said to floss more",
    "Favourite band is Radiohead",
    "Allergic to peanuts",
    "Wants to learn Spanish this year",
    "The wifi password is on the fridge",
    "Runs five kilometres every morning",
]


def texts(hits) -> list[str]:
    return [hit.entry.text for hit in hits]


def truth(root: Path) -> list[tuple[str, str, str, int, int]]:
    """What the files say, in the shape of MemoryIndex.snapshot()."""
    rows = []
    for relative, path in memory_files(root):
        for e in parse_entries(read_text(path), relative):
            rows.append((e.path, e.id, e.text, e.start_line, e.end_line))
    return sorted(rows)


# -- terms --------------------------------------------------------------------------------------


def test_a_query_with_one_matching_and_one_unknown_word_still_finds_the_entry(
    index: MemoryIndex, root: Path
) -> None:
    write_entries(root, "MEMORY.md", ["Alice likes green tea", *FILLER])
    assert texts(index.search("tea zeppelin")) == ["Alice likes green tea"]
    assert texts(index.search("zeppelin")) == []


def test_any_term_of_the_query_can_match_different_entries(index: MemoryIndex, root: Path) -> None:
    write_entries(root, "MEMORY.md", ["Alice likes green tea", *FILLER])
    assert sorted(texts(index.search("tea violin", 10))) == [
        "Alice likes green tea",
        "Bob plays the violin on Sundays",
    ]


def test_words_do_not_match_inside_longer_words(index: MemoryIndex, root: Path) -> None:
    write_entries(
        root, "MEMORY.md", ["Bob plays tennis", "The sky is blue", "Visit Paris", "Modern art"]
    )
    assert texts(index.search("art")) == ["Modern art"]
    assert texts(index.search("ten")) == []
    assert texts(index.search("par")) == []


def test_digits_of_a_date_do_not_match_unrelated_numbers(index: MemoryIndex, root: Path) -> None:
    write_entries(
        root,
        "MEMORY.md",
        [
            "Dentist appointment on 2024-05-03",
            "Room 2405 has 30 chairs",
            "Build 20240503 was released",
            "Born 1990-07-12",
        ],
    )
    assert texts(index.search("2024-05-03", 10)) == ["Dentist appointment on 2024-05-03"]
    assert texts(index.search("2024", 10)) == ["Dentist appointment on 2024-05-03"]


def test_stop_words_never_match(index: MemoryIndex, root: Path) -> None:
    write_entries(root, "MEMORY.md", ["the cat sat on the mat", "a dog ran", "Bob plays tennis"])
    assert texts(index.search("the dog")) == ["a dog ran"]
    assert texts(index.search("what is the name of the dog?")) == ["a dog ran"]
    assert texts(index.search("the")) == []
    assert texts(index.search("what is it about?")) == []
    assert query_terms("What is the weather in Berlin?") == ["weather", "berlin"]
    assert query_terms("The THE the") == []


def test_word_fragments_never_match(index: MemoryIndex, root: Path) -> None:
    write_entries(
        root,
        "MEMORY.md",
        ["Caroline's dog is called Max", "It's raining", "I'm tired", "Plan B is a trip"],
    )
    assert texts(index.search("what's up?")) == []  # not the "s" of every "'s"
    assert texts(index.search("I'm here")) == []
    assert texts(index.search("plan b")) == ["Plan B is a trip"]
    assert texts(index.search("Caroline's")) == ["Caroline's dog is called Max"]


def test_stemming_matches_word_forms(index: MemoryIndex, root: Path) -> None:
    write_entries(root, "MEMORY.md", ["Alice is running a marathon", *FILLER])
    assert sorted(texts(index.search("runs"))) == ["Alice is running a marathon", FILLER[-1]]


# -- scores -------------------------------------------------------------------------------------


def test_scores_are_in_unit_interval_sorted_and_higher_for_better_matches(
    index: MemoryIndex, root: Path
) -> None:
    write_entries(
        root,
        "MEMORY.md",
        ["Alice likes green tea", "Alice likes black coffee", "green walls", *FILLER],
    )
    hits = index.search("green tea", 10)

    assert texts(hits) == ["Alice likes green tea", "green walls"]
    scores = [hit.score for hit in hits]
    assert all(0.0 <= s < 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert scores[0] > scores[1] > 0.0


def test_search_limit_is_respected(index: MemoryIndex, root: Path) -> None:
    write_entries(root, "MEMORY.md", [f"kiwi note {n}" for n in range(8)] + FILLER)
    assert len(index.search("kiwi", 3)) == 3
    assert index.search("kiwi", 0) == []


@pytest.mark.parametrize(
    "query",
    [
        '"unbalanced',
        '"tea"',
        "tea)",
        "(tea",
        "tea AND",
        "AND",
        "OR tea",
        "NOT tea",
        "tea NEAR coffee",
        "NEAR(tea coffee)",
        "tea*",
        "*",
        "-tea",
        "tea -coffee",
        "text:tea",
        "path:MEMORY",
        "^tea",
        "{text}: tea",
        "tea + coffee",
        "'",
        "''",
        "",
        "   ",
        "_",
        "tea\x00",
        "tea; DROP TABLE entries; --",
    ],
)
def test_fts_syntax_in_the_query_never_raises(index: MemoryIndex, root: Path, query: str) -> None:
    write_entries(root, "MEMORY.md", ["Alice likes green tea", *FILLER])
    hits = index.search(query)
    assert isinstance(hits, list)
    if "tea" in query.lower():
        assert "Alice likes green tea" in texts(hits)
    assert index.count() == 1 + len(FILLER)


# -- following the files ------------------------------------------------------------------------


def test_a_hand_edit_shows_up_in_the_next_search_and_old_text_never_does(
    index: MemoryIndex, root: Path
) -> None:
    path = write_entries(root, "MEMORY.md", ["Alice prefers oolong tea", *FILLER])
    assert texts(index.search("oolong")) == ["Alice prefers oolong tea"]

    path.write_text(path.read_text().replace("oolong", "jasmine"))  # a person edits

    assert index.search("oolong") == []
    assert texts(index.search("jasmine")) == ["Alice prefers jasmine tea"]


def test_deleting_a_file_removes_its_entries(index: MemoryIndex, root: Path) -> None:
    write_entries(root, "MEMORY.md", ["kiwi in the main file"])
    topic = write_entries(root, "topics/fruit.md", ["kiwi in a topic", "mango in a topic"])
    assert index.sync() == 2
    assert index.count() == 3

    topic.unlink()

    assert index.sync() == 1
    assert texts(index.search("kiwi mango", 10)) == ["kiwi in the main file"]
    assert {row[0] for row in index.snapshot()} == {"MEMORY.md"}


def test_sync_reindexes_only_changed_files(index: MemoryIndex, root: Path) -> None:
    write_entries(root, "MEMORY.md", ["one"])
    write_entries(root, "memory/2024-05-03.md", ["two"])
    assert index.sync() == 2
    assert index.sync() == 0
    with (root / "MEMORY.md").open("a") as handle:
        handle.write("- three\n")
    assert index.sync() == 1


def test_a_same_size_edit_in_the_same_clock_tick_is_detected_by_the_inode(
    index: MemoryIndex, root: Path
) -> None:
    path = root / "MEMORY.md"
    atomic_write(path, "- apple pie\n")
    assert texts(index.search("apple")) == ["apple pie"]
    before = path.stat()

    atomic_write(path, "- grape pie\n")  # the way editors save: a new file renamed over
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # same tick as before
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    assert after.st_ino != before.st_ino

    assert index.search("apple") == []
    assert texts(index.search("grape")) == ["grape pie"]


def test_exclude_paths_leaves_out_those_files(index: MemoryIndex, root: Path) -> None:
    write_entries(root, "MEMORY.md", ["kiwi in the main file"])
    write_entries(root, "memory/2024-05-03.md", ["kiwi today"])
    write_entries(root, "topics/fruit.md", ["kiwi in a topic", *FILLER])

    hits = index.search("kiwi", 5, exclude_paths=frozenset({"MEMORY.md", "memory/2024-05-03.md"}))

    assert [(h.entry.path, h.entry.text) for h in hits] == [("topics/fruit.md", "kiwi in a topic")]


def test_exclude_paths_does_not_starve_results_from_other_files(
    index: MemoryIndex, root: Path
) -> None:
    write_entries(root, "MEMORY.md", [f"kiwi kiwi kiwi {n}" for n in range(10)])
    write_entries(
        root, "topics/fruit.md", ["a kiwi in a topic among many other words here", *FILLER]
    )

    hits = index.search("kiwi", 1, exclude_paths=frozenset({"MEMORY.md"}))

    assert texts(hits) == ["a kiwi in a topic among many other words here"]


def test_locate_names_the_files_that_hold_an_id(index: MemoryIndex, root: Path) -> None:
    write_entries(root, "MEMORY.md", ["same line"])
    write_entries(root, "topics/a.md", ["other"])
    index.sync()
    [(path, entry_id, *_)] = [row for row in index.snapshot() if row[0] == "MEMORY.md"]
    assert index.locate(entry_id) == [path]
    assert index.locate("m-00000000") == []


def test_a_search_hit_in_a_file_with_a_lone_carriage_return_can_be_fetched(
    tmp_path: Path, root: Path
) -> None:
    (root / "MEMORY.md").write_text("- price\rbeta gamma\n- delta\n", newline="")
    memory = FileMemory(MemoryScope("agent_t", root, tmp_path / "state2"))
    try:
        [hit] = memory.index.search("beta")
        assert memory.find(hit.entry.id).text == hit.entry.text
    finally:
        memory.close()


def test_search_never_returns_text_from_outside_the_root(
    index: MemoryIndex, root: Path, tmp_path: Path
) -> None:
    write_entries(root, "MEMORY.md", ["a normal memory"])
    secret = tmp_path / "secret.md"
    secret.write_text("- the password is hunter2\n")
    (root / "link.md").symlink_to(secret)

    assert index.search("password hunter2") == []


def test_hidden_files_and_non_markdown_files_are_not_indexed(
    index: MemoryIndex, root: Path
) -> None:
    write_entries(root, "MEMORY.md", ["kiwi visible"])
    write_entries(root, ".trash/old.md", ["kiwi hidden folder"])
    write_entries(root, ".draft.md", ["kiwi hidden file"])
    (root / "notes.txt").write_text("- kiwi text file\n")
    assert texts(index.search("kiwi", 10)) == ["kiwi visible"]


# -- index == rebuild ---------------------------------------------------------------------------

WORDS = [
    "apple",
    "banana",
    "cherry",
    "kiwi",
    "mango",
    "tea",
    "coffee",
    "violin",
    "tennis",
    "berlin",
    "paris",
    "dog",
    "cat",
    "2024",
    "05",
    "03",
    "green",
    "blue",
    "red",
    "running",
    "swims",
    "café",
    "naïve",
    "記憶",
    "party",
]


class _RandomEdits:
    """Random writes to a scope's files: by the store's protocol, by hand, by an editor."""

    def __init__(self, rng: random.Random, memory: FileMemory, root: Path) -> None:
        self.rng, self.memory, self.root = rng, memory, root
        self.files = ["MEMORY.md", "memory/2024-05-02.md", "memory/2024-05-03.md", "topics/a.md"]

    def phrase(self) -> str:
        return " ".join(self.rng.choice(WORDS) for _ in range(self.rng.randint(1, 5)))

    def existing(self) -> list[str]:
        return [relative for relative, _ in memory_files(self.root)]

    def any_entry(self):  # noqa: ANN201 (a MemoryEntry or None)
        candidates = [
            e for r in self.existing() for e in parse_entries(read_text(self.root / r), r)
        ]
        return self.rng.choice(candidates) if candidates else None

    def add(self) -> None:
        text = self.phrase() + ("\n" + self.phrase() if self.rng.random() < 0.2 else "")
        self.memory.add_sync(text, actor="r", path=self.rng.choice(self.files))

    def update(self) -> bool:
        """False (nothing done, nor checked after) when there is no entry yet."""
        entry = self.any_entry()
        if entry is not None:
            self.memory.update_sync(entry.id, self.phrase(), actor="r")
        return entry is not None

    def delete(self) -> bool:
        entry = self.any_entry()
        if entry is not None:
            self.memory.delete_sync(entry.id, actor="r")
        return entry is not None

    def hand(self) -> None:  # a person appends a line in place
        path = self.root / self.rng.choice(self.files)
        path.parent.mkdir(parents=True, exist_ok=True)
        line = self.rng.choice(["- ", "* ", "", "# "]) + self.phrase()
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    def rewrite(self) -> None:  # an editor saves the file: shuffled lines, renamed over
        names = self.existing()
        if names:
            path = self.root / self.rng.choice(names)
            lines = read_text(path).splitlines(keepends=True)
            self.rng.shuffle(lines)
            atomic_write(path, "".join(lines))

    def rm(self) -> None:
        names = self.existing()
        if names:
            (self.root / self.rng.choice(names)).unlink()

    def new(self) -> None:
        relative = f"topics/t{self.rng.randint(0, 5)}.md"
        self.files.append(relative)
        write_entries(self.root, relative, [self.phrase() for _ in range(self.rng.randint(1, 4))])

    def check(self) -> None:
        """Sync the index, or search it: a hit is never stale text, never a stale line."""
        index = self.memory.index
        if self.rng.random() < 0.5:
            index.sync()
            return
        for hit in index.search(self.rng.choice(WORDS), 10):
            current = parse_entries(read_text(self.root / hit.entry.path), hit.entry.path)
            assert hit.entry in current


@pytest.mark.parametrize("seed", [7, 2024])
def test_index_equals_rebuild_after_random_edits(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    root = tmp_path / "ws"
    root.mkdir()
    memory = FileMemory(MemoryScope("agent_r", root, tmp_path / "state"))
    index = memory.index
    edits = _RandomEdits(rng, memory, root)
    counts: dict[str, int] = {}
    for _ in range(200):
        op = rng.choice(
            ["add", "add", "update", "delete", "hand", "hand", "rewrite", "rm", "new", "check"]
        )
        counts[op] = counts.get(op, 0) + 1
        if op != "check" and getattr(edits, op)() is False:
            continue
        if op == "check" or rng.random() < 0.3:
            edits.check()

    index.sync()
    fresh = MemoryIndex(tmp_path / "fresh" / "index.db", root)
    try:
        fresh.rebuild()
        assert index.snapshot() == fresh.snapshot() == truth(root)
    finally:
        fresh.close()
        memory.close()
    assert len(truth(root)) > 10
    assert counts.get("update", 0) > 5
    assert counts.get("rm", 0) > 5


def test_deleting_the_index_db_and_rebuilding_loses_nothing(tmp_path: Path, root: Path) -> None:
    memory = FileMemory(MemoryScope("agent_d", root, tmp_path / "state"))
    for n in range(5):
        memory.add_sync(f"kiwi fact {n}", actor="a", path="topics/x.md" if n % 2 else None)
    write_entries(root, "memory/2024-05-03.md", ["a hand-written kiwi line", "mango"])
    memory.index.sync()
    before = memory.index.snapshot()
    hits_before = texts(memory.index.search("kiwi", 10))
    db = memory.index.db_path
    memory.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)

    again = FileMemory(MemoryScope("agent_d", root, tmp_path / "state"))
    try:
        assert again.index.count() == 0
        assert again.index.rebuild() == len(before) == 7
        assert again.index.snapshot() == before == truth(root)
        assert texts(again.index.search("kiwi", 10)) == hits_before
    finally:
        again.close()


# -- closing and reopening (a person's index is closed to free descriptors) ---------------------


def index_files_open(db: Path) -> list[str]:
    """This process's open descriptors on the index database (and its -wal, -shm)."""
    targets = []
    for name in os.listdir("/proc/self/fd"):
        try:
            targets.append(os.readlink(f"/proc/self/fd/{name}"))
        except FileNotFoundError:
            continue
    return [t for t in targets if t.startswith(str(db))]


def test_a_closed_index_reopens_on_next_use_and_sees_edits_made_meanwhile(
    index: MemoryIndex, root: Path
) -> None:
    write_entries(root, "MEMORY.md", ["Bob plays the violin"])
    assert texts(index.search("violin")) == ["Bob plays the violin"]
    assert index_files_open(index.db_path)  # positive control: open while in use

    index.close()
    assert not index.is_open
    assert index_files_open(index.db_path) == []
    write_entries(root, "MEMORY.md", ["Bob plays the cello"])

    assert texts(index.search("cello")) == ["Bob plays the cello"]
    assert texts(index.search("violin")) == []
    assert index.is_open


def test_an_index_deleted_while_closed_is_rebuilt_from_the_files_when_reopened(
    index: MemoryIndex, root: Path
) -> None:
    write_entries(root, "MEMORY.md", FILLER)
    assert index.sync() == 1
    index.close()
    for suffix in ("", "-wal", "-shm"):
        Path(f"{index.db_path}{suffix}").unlink(missing_ok=True)

    assert texts(index.search("violin")) == ["Bob plays the violin on Sundays"]
    assert index.snapshot() == truth(root)
