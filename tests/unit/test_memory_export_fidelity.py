"""``mindroom memory export`` / ``import`` keep every entry, id and field (both formats).

Real files written as a person and mindroom write them: mindroom entries with every field
combination, hand-written lines (``h-`` ids) in ``MEMORY.md`` sections and daily files, an
expired entry waiting for its purge day, an archived one with its note. Exported through the
CLI, imported into an empty storage through the CLI, compared entry by entry.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import shutil
from pathlib import Path

import pytest

from mindroom.cli.main import main
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.markdown import MemoryEntry, parse_entries, render_entry
from mindroom.memory.files.protocol import read_text
from mindroom.memory.files.store import FileMemory
from mindroom.memory.scope import agent_scope
from mindroom.memory.search.index import memory_files

REPO = Path(__file__).resolve().parents[2]

CATEGORIES = (None, "general", "health", "tasks", "procedural")
IMPORTANCES = (None, 1, 3, 5)
PINNED = (False, True)
STATES = ((None, None), ("soft_deleted", dt.date(2026, 12, 24)))


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    shutil.copy(REPO / "config.yaml", path)
    shutil.copytree(REPO / "mind_template", tmp_path / "mind_template")
    return path


@pytest.fixture
def cli(config: Path, capsys: pytest.CaptureFixture[str]):
    def run(action: str, *args: str) -> tuple[int, str, str]:
        code = main(["memory", action, "--config", str(config), "--agent", "general", *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def workspace(storage: Path) -> Path:
    return storage / "agents" / "general" / "workspace"


def write_memory(root: Path) -> None:
    """Every field combination, across MEMORY.md sections, daily files, a topic and the archive."""
    combos = list(itertools.product(CATEGORIES, IMPORTANCES, PINNED, STATES))
    lines: dict[str, list[str]] = {
        "MEMORY.md": ["# Memory", "", "## Health"],
        "memory/2026-11-20.md": [],
        "topics/house.md": ["---", "title: house", "---", "# House"],
    }
    files = list(lines)
    for n, (category, importance, pinned, (state, purge)) in enumerate(combos):
        fields = EntryFields(
            category=category,
            importance=importance,
            pinned=pinned,
            state=state,
            purge=purge,
            type=("semantic", None, "episodic", "insight")[n % 4],
            created=dt.date(2026, 1, 1) + dt.timedelta(days=n) if n % 3 else None,
            updated=dt.date(2026, 6, 1) if n % 5 == 0 else None,
            extra=("reviewed=yes",) if n % 7 == 0 else (),
        )
        text = f"fact {n} about Alice" + ("\n  with a second line\n\nand a third" if n % 6 else "")
        lines[files[n % 3]] += render_entry(f"m-{n:08x}", text, fields)
        if n == 40:
            lines["MEMORY.md"] += ["", "## By hand", "- Alice's sister is Clara", "plain note"]
    lines["MEMORY.md"] += ["* a starred line", "  that goes on", "```", "code = 1", "```"]
    lines["memory/2026-11-20.md"] += ["- walked the dog by hand", "1. numbered by hand"]
    for relative, content in lines.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(content) + "\n", encoding="utf-8")
    archive = root / "memory" / "archive" / "2026-11.md"
    archive.parent.mkdir(parents=True)
    archive.write_text(
        "- Alice liked coffee <!-- m-0000aaaa category=preferences importance=2 -->\n"
        "<!-- archived 2026-11-24 from MEMORY.md; merged into m-00000001 -->\n",
        encoding="utf-8",
    )


def sections(document: str, relative: str) -> list[tuple[MemoryEntry, str | None]]:
    """Each entry with the heading line it stands under (headings inside entries aside)."""
    lines = document.split("\n")
    found: list[tuple[MemoryEntry, str | None]] = []
    heading, done = None, 0
    for entry in parse_entries(document, relative):
        for line in lines[done : entry.start_line - 1]:
            if re.match(r"^ {0,3}#{1,6}(?:[ \t]|$)", line):
                heading = line.strip()
        found.append((entry, heading))
        done = entry.end_line
    return found


def snapshot(root: Path) -> dict[tuple[str, str, int], tuple[str, EntryFields, str | None]]:
    """Every entry of every file (archive included): (file, id, n-th of that id) -> (text,
    fields, the heading it stands under)."""
    found: dict[tuple[str, str, int], tuple[str, EntryFields, str | None]] = {}
    for relative, path in memory_files(root, archive=True):
        for entry, section in sections(read_text(path, relative), relative):
            n = sum(1 for key in found if key[:2] == (relative, entry.id))
            found[(relative, entry.id, n)] = (entry.text, entry.fields, section)
    return found


@pytest.mark.parametrize("fmt", ["markdown", "json"])
def test_export_import_round_trip_keeps_every_entry_id_field_file_and_section(
    cli, config: Path, tmp_path: Path, fmt: str
) -> None:
    write_memory(workspace(config.parent))
    source = snapshot(workspace(config.parent))
    assert sum(1 for key in source if key[1].startswith("h-")) == 6  # hand-written lines
    exported = tmp_path / f"export.{fmt}"

    code, out, err = cli("export", "--format", fmt, "--output", str(exported))
    assert code == 0, out + err

    fresh = tmp_path / "fresh"
    code, out, err = cli("import", str(exported), "--storage", str(fresh))
    assert code == 0, out + err
    assert out == f"imported {len(source)} memories into agent_general (0 already there)\n"
    copy = snapshot(workspace(fresh))
    for key, value in source.items():
        assert copy.get(key) == value, key
    assert copy.keys() == source.keys()
    note = "<!-- archived 2026-11-24 from MEMORY.md; merged into m-00000001 -->"
    archive = workspace(fresh) / "memory" / "archive" / "2026-11.md"
    assert note in archive.read_text(encoding="utf-8")

    # a hand-written id still names its line, and importing the same export again adds nothing
    hand = next(key[1] for key in source if key[0] == "MEMORY.md" and key[1].startswith("h-"))
    code, out, _ = cli("get", hand, "--storage", str(fresh))
    assert (code, out.split("\n")[0].split()[0]) == (0, hand)
    code, out, _ = cli("import", str(exported), "--storage", str(fresh))
    assert out == f"imported 0 memories into agent_general ({len(source)} already there)\n"
    assert snapshot(workspace(fresh)) == copy


def test_json_export_is_json_with_every_field_file_section_and_state(cli, config: Path) -> None:
    write_memory(workspace(config.parent))

    code, out, err = cli("export", "--format", "json")

    assert code == 0, err
    document = json.loads(out)
    assert (document["format"], document["version"]) == ("mindroom-memory-export", 1)
    assert document["scope"] == "agent_general"
    entries = {e["id"]: e for e in document["entries"]}
    assert document["count"] == len(document["entries"])
    first = entries["m-00000000"]
    assert first["fields"]["category"] is None
    assert first["category"] == "general"
    assert first["fields"]["extra"] == ["reviewed=yes"]
    pinned = next(e for e in entries.values() if e["fields"]["pinned"] and e["expired"])
    assert pinned["fields"]["state"] == "soft_deleted"
    assert pinned["fields"]["purge"] == "2026-12-24"
    health = next(e for e in entries.values() if e["fields"]["category"] == "health")
    assert health["importance"] == (health["fields"]["importance"] or 3)
    assert health["file"] in ("MEMORY.md", "memory/2026-11-20.md", "topics/house.md")
    clara = next(e for e in entries.values() if e["text"] == "Alice's sister is Clara")
    assert clara["id"].startswith("h-")
    assert clara["hand_written"]
    assert (clara["file"], clara["section"]) == ("MEMORY.md", "## By hand")
    daily = next(e for e in entries.values() if e["text"] == "walked the dog by hand")
    assert (daily["date"], daily["type"]) == ("2026-11-20", "episodic")
    archived = entries["m-0000aaaa"]
    assert archived["archived"]
    assert archived["archive_note"].startswith("<!-- archived 2026-11-24")
    assert not first["archived"]


def test_markdown_export_keeps_fields_and_hand_written_ids(cli, config: Path) -> None:
    write_memory(workspace(config.parent))

    code, out, _ = cli("export")

    assert code == 0
    marker = "category=general importance=1 state=soft_deleted purge=2026-12-24 reviewed=yes"
    assert f"- fact 21 about Alice <!-- m-00000015 {marker} -->\n" in out
    assert "- Alice's sister is Clara\n" in out  # a hand-written line stays one (same h- id)
    assert "<!-- section: ## By hand -->" in out


def test_import_of_an_id_holding_another_text_keeps_both_and_says_so(
    cli, config: Path, tmp_path: Path
) -> None:
    root = workspace(config.parent)
    root.mkdir(parents=True)
    (root / "MEMORY.md").write_text("- Alice lives in Lyon <!-- m-1a2b3c4d -->\n", "utf-8")
    source = tmp_path / "other.md"
    source.write_text(
        "# Memories of agent_general\n\n## MEMORY.md\n\n"
        "- Alice lives in Lyon <!-- m-1a2b3c4d -->\n"
        "- Bob plays chess <!-- m-1a2b3c4d category=hobbies -->\n",
        "utf-8",
    )

    code, out, _ = cli("import", str(source))

    assert code == 0
    first, renamed = out.splitlines()
    assert first == "imported 1 memories into agent_general (1 already there)"
    assert renamed.startswith("  m-1a2b3c4d is taken by a different memory in agent_general:")
    new_id = renamed.rsplit(" ", 1)[1]
    memory = FileMemory(agent_scope(config.parent, "general"))
    try:
        assert memory.find("m-1a2b3c4d").text == "Alice lives in Lyon"
        kept = memory.find(new_id)
    finally:
        memory.close()
    assert (kept.text, kept.fields.category) == ("Bob plays chess", "hobbies")


def test_import_naming_a_file_outside_the_memory_folder_is_refused_before_writing(
    cli, config: Path, tmp_path: Path
) -> None:
    source = tmp_path / "evil.md"
    source.write_text(
        "# Memories of agent_general\n\n## MEMORY.md\n\n- fine <!-- m-00000001 -->\n\n"
        "## ../../../escape.md\n\n- outside <!-- m-00000002 -->\n",
        "utf-8",
    )

    code, out, _ = cli("import", str(source))

    assert code == 1
    assert out.startswith("mindroom memory: ")
    assert not (workspace(config.parent) / "MEMORY.md").exists()
    assert not (tmp_path / "escape.md").exists()
