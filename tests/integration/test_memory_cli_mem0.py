"""``mindroom memory ...`` on an agent whose backend is mem0: the real mem0 library, a local
Chroma in the test's folder and the bundled local embedder (no model is called: the CLI
stores texts verbatim). Also the move file -> mem0 -> file with export and import."""

from __future__ import annotations

import asyncio
import re
import shutil
from pathlib import Path

import pytest

from mindroom.adapters.embeddings import Embedder
from mindroom.app.runlock import hold_run_lock, release_run_lock
from mindroom.cli.main import main
from mindroom.cli.memory_transfer import import_texts
from mindroom.config import load_config
from mindroom.memory.files.markdown import parse_entries
from mindroom.memory.files.protocol import read_text
from mindroom.memory.mem0 import Mem0Memory
from mindroom.memory.registry import MemoryRegistry

REPO = Path(__file__).resolve().parents[2]
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
AGENTS = """\
agents:
  keeper:
    display_name: Keeper
    role: Remembers with mem0.
    memory_backend: mem0
  other:
    display_name: Other
    role: Also mem0, another scope.
    memory_backend: mem0
  fresh:
    display_name: Fresh
    role: A file agent that starts empty.
"""
TEXTS = [
    "Alice prefers oolong tea",
    "Project X notes:\n  indented by two\n# a heading inside\n\nsecond paragraph",
    "ends like a marker <!-- m-00000000 -->",
    "日本語のメモ — with a dash",
    "The garage door sticks in winter",
]


@pytest.fixture
def config(tmp_path: Path, local_embedder: Embedder) -> Path:
    """config.yaml plus two mem0 agents and an empty file agent (the local embedder is
    loaded once per session, by the fixture, before the CLI asks for the same instance)."""
    path = tmp_path / "config.yaml"
    text = (REPO / "config.yaml").read_text(encoding="utf-8")
    assert "\nagents:\n" in text
    path.write_text(text.replace("\nagents:\n", "\n" + AGENTS, 1), encoding="utf-8")
    shutil.copytree(REPO / "mind_template", tmp_path / "mind_template")
    return path


@pytest.fixture
def cli(config: Path, capsys: pytest.CaptureFixture[str]):
    def run(action: str, *args: str, agent: str = "keeper") -> tuple[int, str, str]:
        code = main(["memory", action, "--config", str(config), "--agent", agent, *args])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def listed(cli, agent: str = "keeper") -> list[str]:
    code, out, _ = cli("list", "--limit", "1000", agent=agent)
    assert code == 0
    return out.splitlines()


def mem0_scope(config: Path, agent: str = "keeper"):
    """The agent's memory as the runtime opens it (for writes the CLI has no command for)."""
    registry = MemoryRegistry(load_config(config), config.parent, config.parent)
    memory = registry.for_agent(agent)
    assert isinstance(memory, Mem0Memory)
    return memory, registry


def test_add_list_get_and_search_use_mem0_ids(cli, config: Path) -> None:
    code, out, err = cli("add", "Alice prefers oolong tea")
    assert code == 0, err
    added = re.fullmatch(rf"added ({UUID})  Alice prefers oolong tea\n", out)
    assert added is not None, out
    tea = added[1]
    assert cli("add", "Bob plays the violin\nevery Sunday")[0] == 0

    lines = listed(cli)
    assert len(lines) == 3
    assert f"{tea}  Alice prefers oolong tea" in lines
    assert any(re.fullmatch(rf"{UUID}  Bob plays the violin \(\+1 lines\)", x) for x in lines)
    assert lines[-1] == "(2 memories of agent_keeper in mem0)"
    assert not (config.parent / "agents" / "keeper").exists()  # no memory files at all

    assert cli("get", tea) == (0, f"{tea}  mem0\nAlice prefers oolong tea\n", "")

    code, out, _ = cli("search", "which tea does Alice drink?", "--limit", "1")
    assert code == 0
    assert re.fullmatch(rf"0\.\d{{1,3}}  {tea}  Alice prefers oolong tea\n", out), out


def test_an_id_of_another_scope_or_none_is_no_memory(cli) -> None:
    code, out, _ = cli("add", "the other agent's secret", agent="other")
    assert code == 0
    theirs = out.split()[1]
    assert cli("get", theirs, agent="other")[0] == 0  # positive control: the id is real

    code, out, _ = cli("get", theirs)
    assert code == 1
    assert out == f"mindroom memory: no memory with id {theirs!r} (search or list to find ids)\n"
    assert listed(cli) == ["(0 memories of agent_keeper in mem0)"]
    assert cli("search", "secret") == (0, "no memories match 'secret'\n", "")


def test_history_shows_mem0_change_records(cli, config: Path) -> None:
    code, out, _ = cli("add", "Alice prefers oolong tea")
    tea = out.split()[1]
    cli("add", "Bob plays the violin")
    memory, registry = mem0_scope(config)
    try:
        asyncio.run(memory.update(tea, "Alice prefers green tea", actor="agent"))
        asyncio.run(memory.delete(tea, actor="agent"))
    finally:
        registry.close()

    code, out, _ = cli("history", tea)
    assert code == 0
    lines = out.splitlines()
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    assert len(lines) == 3, lines
    assert re.fullmatch(rf"{stamp}  ADD     {tea}  'Alice prefers oolong tea'", lines[0])
    assert re.fullmatch(
        rf"{stamp}  UPDATE  {tea}  'Alice prefers oolong tea' -> 'Alice prefers green tea'",
        lines[1],
    )
    assert re.fullmatch(rf"{stamp}  DELETE  {tea}  'Alice prefers green tea'", lines[2])

    code, out, _ = cli("history")
    assert code == 0
    assert [line.split()[2] for line in out.splitlines()] == ["ADD", "ADD", "UPDATE", "DELETE"]
    assert cli("history", agent="other") == (0, "no history yet\n", "")


@pytest.mark.parametrize("action", ["restore", "reindex"])
def test_restore_and_reindex_are_refused_on_mem0_and_change_nothing(cli, action: str) -> None:
    code, out, _ = cli("add", "Alice prefers oolong tea")
    tea = out.split()[1]
    before = listed(cli)

    code, out, _ = cli(action, *([tea] if action == "restore" else []))

    assert code == 1
    assert out.startswith(f"mindroom memory: {action} does not apply to agent 'keeper': ")
    assert "mem0" in out
    assert "mindroom memory " in out.split(": ", 2)[2]  # says what to do instead
    assert listed(cli) == before


def test_add_with_file_is_refused_on_mem0(cli) -> None:
    code, out, _ = cli("add", "a topic fact", "--file", "topics/x.md")
    assert code == 1
    assert "mem0 keeps no files" in out
    assert listed(cli) == ["(0 memories of agent_keeper in mem0)"]


def test_a_private_companion_on_mem0_keeps_each_persons_memory_apart(cli, config: Path) -> None:
    config.write_text(
        config.read_text(encoding="utf-8").replace(
            "    private:\n", "    memory_backend: mem0\n    private:\n", 1
        ),
        encoding="utf-8",
    )
    alice, bob = ["--user", "@alice:example.org"], ["--user", "@bob:example.org"]
    assert cli("add", "alice's secret", *alice, agent="mind")[0] == 0
    code, out, _ = cli("list", *alice, agent="mind")
    assert "alice's secret" in out  # positive control
    assert out.endswith(" in mem0)\n")
    code, out, _ = cli("list", *bob, agent="mind")
    assert code == 0
    assert "alice's secret" not in out
    assert cli("search", "secret", *bob, agent="mind") == (0, "no memories match 'secret'\n", "")


def file_texts(root: Path) -> list[str]:
    texts = []
    for path in sorted(root.rglob("*.md")):
        relative = path.relative_to(root).as_posix()
        texts += [e.text for e in parse_entries(read_text(path), relative)]
    return texts


def test_file_to_mem0_to_file_keeps_every_text(cli, config: Path, tmp_path: Path) -> None:
    for text in TEXTS[:4]:
        assert cli("add", text, agent="general")[0] == 0
    cli("add", TEXTS[4], "--file", "topics/house.md", agent="general")
    with (config.parent / "agents" / "general" / "workspace" / "MEMORY.md").open("a") as handle:
        handle.write("- a hand-written line\n")
    texts = [*TEXTS, "a hand-written line"]

    first = tmp_path / "from_file.md"
    assert cli("export", "--output", str(first), agent="general")[0] == 0
    code, out, err = cli("import", str(first))
    assert (code, out) == (0, "imported 6 memories into agent_keeper (0 already there)\n"), err
    # again: every text is there already, nothing is added twice
    assert (
        cli("import", str(first))[1] == "imported 0 memories into agent_keeper (6 already there)\n"
    )
    assert listed(cli)[-1] == "(6 memories of agent_keeper in mem0)"
    assert not (config.parent / "agents" / "keeper").exists()

    code, from_mem0, _ = cli("export")
    assert code == 0
    assert from_mem0.startswith("# Memories of agent_keeper\n")
    second = tmp_path / "from_mem0.md"
    second.write_text(from_mem0, encoding="utf-8")
    assert cli("import", str(second), agent="fresh")[0] == 0

    assert sorted(import_texts(from_mem0)) == sorted(texts)
    fresh = file_texts(config.parent / "agents" / "fresh" / "workspace")
    assert sorted(fresh) == sorted(texts)
    code, third, _ = cli("export", agent="fresh")
    assert sorted(import_texts(third)) == sorted(import_texts(first.read_text("utf-8")))


@pytest.mark.parametrize(
    ("content", "message"),
    [(None, "no such file"), (b"- caf\xe9\n", "not UTF-8"), (b"# nothing\n", "no memories")],
)
def test_bad_input_to_a_mem0_import_fails_and_adds_nothing(
    cli, tmp_path: Path, content: bytes | None, message: str
) -> None:
    cli("add", "already here")
    source = tmp_path / "input.md"
    if content is not None:
        source.write_bytes(content)

    code, out, _ = cli("import", str(source))

    assert code == 1
    assert out.startswith("mindroom memory: ")
    assert message in out
    assert listed(cli)[-1] == "(1 memories of agent_keeper in mem0)"


@pytest.mark.parametrize("action", ["add", "import"])
def test_mem0_writes_are_refused_while_mindroom_runs_for_the_storage(
    cli, config: Path, tmp_path: Path, action: str
) -> None:
    """Chroma takes writes from one process only: a write from the CLI made the running bot's
    mem0 searches fail ("Error finding id") until its own next write. Reads stay allowed."""
    source = tmp_path / "input.md"
    source.write_text("- written from the CLI\n", encoding="utf-8")
    args = ["written from the CLI"] if action == "add" else [str(source)]
    assert cli("add", "already here")[0] == 0
    lock = hold_run_lock(config.parent / "mindroom_data")
    try:
        code, out, _ = cli(action, *args)
        assert code == 1
        assert out.startswith(f"mindroom memory: {action} refused while mindroom runs for ")
        assert "Stop mindroom first" in out
        assert "add_memory" in out
        assert cli("search", "already here")[0] == 0  # reading is fine
        assert listed(cli)[-1] == "(1 memories of agent_keeper in mem0)"
        assert cli("add", "a file agent is not affected", agent="general")[0] == 0
    finally:
        release_run_lock(lock)
    assert cli(action, *args)[0] == 0  # positive control: the same write once it stopped
    assert listed(cli)[-1] == "(2 memories of agent_keeper in mem0)"
