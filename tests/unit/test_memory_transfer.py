"""``mindroom memory export`` / ``import`` on the file backend: real files, a temporary config.

The round trip through mem0 is in ``test_memory_cli_mem0.py``; here the file side alone:
every entry of every file comes out with its text exact, and comes back in through the normal
write path.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mindroom.cli.memory_transfer import import_texts
from mindroom.memory.files.markdown import parse_entries
from mindroom.memory.files.protocol import read_text
from mindroom.memory.files.store import FileMemory
from mindroom.memory.scope import agent_scope
from tests.support.memory_cli import MemoryCli, copy_config, memory_cli, root_of

# texts a person or mindroom may have stored: several lines, markdown, markers, unicode
TEXTS = [
    "Alice prefers oolong tea",
    "Project X notes:\n  indented by two\n# a heading inside\n\nsecond paragraph",
    "ends like a marker <!-- m-00000000 -->",
    "日本語のメモ — with a dash",
]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return copy_config(tmp_path)


@pytest.fixture
def cli(config: Path, capsys: pytest.CaptureFixture[str]) -> MemoryCli:
    return memory_cli(config, capsys)


def fill(config: Path) -> list[str]:
    """Entries in MEMORY.md, a daily file and a topic file, some written by hand; their texts."""
    memory = FileMemory(agent_scope(config.parent, "general"))
    try:
        for text in TEXTS:
            memory.add_sync(text, actor="test")
        memory.add_sync("walked the dog", actor="test", path="memory/2024-05-03.md")
        memory.add_sync("the garage door sticks", actor="test", path="topics/house.md")
    finally:
        memory.close()
    with (root_of(config) / "MEMORY.md").open("a", encoding="utf-8") as handle:
        handle.write("\n## By hand\n- a hand-written line\n")
    return [*TEXTS, "a hand-written line", "walked the dog", "the garage door sticks"]


def all_texts(root: Path) -> list[str]:
    texts = []
    for path in sorted(root.rglob("*.md")):
        relative = path.relative_to(root).as_posix()
        texts += [e.text for e in parse_entries(read_text(path), relative)]
    return texts


def test_export_prints_every_entry_of_every_file_with_its_text_exact(cli, config: Path) -> None:
    texts = fill(config)

    code, out, err = cli("export")

    assert code == 0, err
    assert sorted(import_texts(out)) == sorted(texts)
    assert out.startswith("# Memories of agent_general\n")
    for heading in ("## MEMORY.md", "## memory/2024-05-03.md", "## topics/house.md"):
        assert f"\n{heading}\n" in out
    assert err == ""


def test_export_to_a_file_says_how_many_and_import_into_a_fresh_memory_reads_it_back(
    cli, config: Path, tmp_path: Path
) -> None:
    texts = fill(config)
    exported = tmp_path / "general.md"

    code, out, _ = cli("export", "--output", str(exported))
    assert (code, out) == (0, f"exported {len(texts)} memories of agent_general to {exported}\n")

    fresh = tmp_path / "fresh"
    code, out, err = cli("import", str(exported), "--storage", str(fresh))
    assert code == 0, err
    assert out == f"imported {len(texts)} memories into agent_general (0 already there)\n"
    root = fresh / "agents" / "general" / "workspace"
    assert sorted(all_texts(root)) == sorted(texts)
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md"))
    assert files == ["MEMORY.md", "memory/2024-05-03.md", "topics/house.md"]  # each in its file
    memory = FileMemory(agent_scope(fresh, "general"))
    try:
        records = memory.history_of()
    finally:
        memory.close()
    assert {(r.actor, r.op) for r in records} == {("import", "add")}
    assert len(records) == len(texts)


def test_import_skips_texts_already_present_anywhere_in_the_memory(
    cli, config: Path, tmp_path: Path
) -> None:
    texts = fill(config)
    exported = tmp_path / "general.md"
    cli("export", "--output", str(exported))
    extra = "- one new memory\n- walked the dog\n"
    exported.write_text(exported.read_text(encoding="utf-8") + extra, encoding="utf-8")
    before = all_texts(root_of(config))

    code, out, _ = cli("import", str(exported))

    assert code == 0
    # every entry of the export is already there, and so is the appended "walked the dog"
    assert out == f"imported 1 memories into agent_general ({len(texts) + 1} already there)\n"
    after = all_texts(root_of(config))
    assert sorted(after) == sorted([*before, "one new memory"])


def test_import_reads_hand_written_markdown_too(cli, config: Path, tmp_path: Path) -> None:
    notes = tmp_path / "notes.md"
    notes.write_text("# My notes\n\n- likes jazz\n* hates mornings\nplain line\n", "utf-8")

    code, out, _ = cli("import", str(notes))

    assert (code, out) == (0, "imported 3 memories into agent_general (0 already there)\n")
    assert all_texts(root_of(config)) == ["likes jazz", "hates mornings", "plain line"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        (b"- caf\xe9\n", "is not UTF-8 text"),
        (b"# only a heading\n\n<!-- and a comment -->\n", "no memories to import"),
        (b"", "no memories to import"),
    ],
)
def test_bad_import_input_is_a_clear_error_and_changes_nothing(
    cli, config: Path, tmp_path: Path, content: bytes | None, message: str
) -> None:
    fill(config)
    before = {p: p.read_bytes() for p in root_of(config).rglob("*.md")}
    source = tmp_path / "input.md"
    if content is not None:
        source.write_bytes(content)

    code, out, _ = cli("import", str(source))

    assert code == 1
    assert out.startswith("mindroom memory: ")
    assert message in out
    assert str(source.name) in out
    assert {p: p.read_bytes() for p in root_of(config).rglob("*.md")} == before


def test_export_of_a_memory_with_an_unreadable_file_fails_and_names_it(
    cli, config: Path, tmp_path: Path
) -> None:
    fill(config)
    (root_of(config) / "memory" / "2024-05-04.md").write_bytes(b"- caf\xe9\n")
    target = tmp_path / "out.md"

    code, out, _ = cli("export", "--output", str(target))

    assert code == 1
    assert "memory/2024-05-04.md is not UTF-8 text" in out
    assert not target.exists()


def test_export_of_an_empty_memory_is_a_heading_and_nothing_to_import(cli) -> None:
    code, out, _ = cli("export")
    assert code == 0
    assert out == "# Memories of agent_general\n\n<!-- no memories -->\n"
    assert import_texts(out) == []


def test_import_drops_the_mem0_id_a_mem0_memory_file_shows_but_keeps_marker_like_text() -> None:
    uuid = "2d8042b3-c5a1-490d-8cb7-d7dfef5e87e0"
    document = (
        "# Memories of agent_keeper (mem0)\n\n"
        f"- Bob plays the violin <!-- {uuid} -->\n  every Sunday\n"
        "- ends like a marker <!-- m-00000000 --> <!-- m-1a2b3c4d -->\n"
    )
    assert import_texts(document) == [
        "Bob plays the violin\nevery Sunday",
        "ends like a marker <!-- m-00000000 -->",
    ]
