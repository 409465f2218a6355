"""``mindroom memory ...``: the CLI on real files, with a config in a temporary folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mindroom.memory.files.markdown import parse_entries
from mindroom.memory.files.protocol import read_text
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.audience import AudienceBook, Told
from mindroom.memory.scope import agent_scope
from tests.support.memory_cli import MemoryCli, copy_config, memory_cli, root_of

ID = re.compile(r"m-[0-9a-f]{8}")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return copy_config(tmp_path)


@pytest.fixture
def cli(config: Path, capsys: pytest.CaptureFixture[str]) -> MemoryCli:
    return memory_cli(config, capsys)


def entries(config: Path, relative: str = "MEMORY.md"):
    return parse_entries(read_text(root_of(config) / relative), relative)


def test_add_writes_memory_md_and_prints_the_new_entry(cli, config: Path) -> None:
    code, out, _ = cli("add", "Alice prefers oolong tea")

    assert code == 0
    [entry] = entries(config)
    assert entry.text == "Alice prefers oolong tea"
    assert out == f"added {entry.id}  MEMORY.md:1  Alice prefers oolong tea\n"


def test_add_with_file_writes_that_file(cli, config: Path) -> None:
    code, out, _ = cli("add", "Kiwis are ripe in May", "--file", "topics/fruit.md")
    assert code == 0
    assert " topics/fruit.md:1 " in out
    assert [e.text for e in entries(config, "topics/fruit.md")] == ["Kiwis are ripe in May"]
    assert not (root_of(config) / "MEMORY.md").exists()


def test_list_prints_every_entry_and_a_count(cli, config: Path) -> None:
    cli("add", "first fact")
    cli("add", "second fact\nwith a second line")
    root = root_of(config)
    with (root / "MEMORY.md").open("a") as handle:
        handle.write("- a hand-written line\n")

    code, out, _ = cli("list")

    assert code == 0
    lines = out.splitlines()
    assert [ID.sub("ID", line.split("  ", 1)[0]) for line in lines[:2]] == ["ID", "ID"]
    assert lines[0].endswith("  MEMORY.md:1  first fact")
    assert lines[1].endswith("  MEMORY.md:2  second fact (+1 lines)")
    assert lines[2].startswith("h-")
    assert lines[2].endswith("  MEMORY.md:4  a hand-written line")
    assert lines[3] == f"(3 memories in {root})"


def test_search_prints_scored_hits_and_says_when_nothing_matches(cli) -> None:
    for text in ["Alice likes green tea", "Bob plays violin", "Carol runs", "Dave swims"]:
        cli("add", text)

    code, out, _ = cli("search", "green tea please")
    assert code == 0
    [line] = out.splitlines()
    assert re.fullmatch(r"0\.\d{1,3}  m-[0-9a-f]{8}  MEMORY\.md:1  Alice likes green tea", line)

    code, out, _ = cli("search", "zeppelin")
    assert (code, out) == (0, "no memories match 'zeppelin'\n")


def test_get_prints_the_whole_entry_with_its_lines(cli, config: Path) -> None:
    cli("add", "one")
    cli("add", "two\nthree")
    entry = entries(config)[1]

    code, out, _ = cli("get", entry.id)

    assert code == 0
    assert out == f"{entry.id}  MEMORY.md:2-3  created={entry.fields.created}\ntwo\nthree\n"


def test_get_of_an_unknown_id_fails_with_exit_code_1(cli) -> None:
    code, out, _ = cli("get", "m-deadbeef")
    assert code == 1
    assert out == "mindroom memory: no memory with id 'm-deadbeef' (search or list to find ids)\n"


def test_history_and_restore_after_a_deletion(cli, config: Path) -> None:
    cli("add", "keep")
    cli("add", "delete me later")
    gone = entries(config)[1]
    memory = FileMemory(agent_scope(config.parent, "general"))
    try:
        memory.delete_sync(gone.id, actor="agent")
    finally:
        memory.close()
    assert [e.text for e in entries(config)] == ["keep"]

    code, out, _ = cli("history", gone.id)
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  cli    add      ", lines[0])
    assert lines[0].endswith(f"{gone.id}  MEMORY.md  'delete me later'")
    assert " agent  delete   " in lines[1]

    code, out, _ = cli("restore", gone.id)
    assert code == 0
    assert out == f"restored {gone.id}  MEMORY.md:2  delete me later\n"
    assert [(e.id, e.text) for e in entries(config)][1] == (gone.id, "delete me later")

    code, out, _ = cli("history")
    assert code == 0
    assert [line.split()[3] for line in out.splitlines()] == ["add", "add", "delete", "restore"]

    code, out, _ = cli("restore", gone.id)
    assert code == 1
    assert "already in MEMORY.md" in out


def test_history_of_a_fresh_memory_says_so(cli) -> None:
    assert cli("history") == (0, "no history yet\n", "")


def test_reindex_with_an_embedder_that_cannot_load_says_so_and_fails(cli, config: Path) -> None:
    text = config.read_text().replace(
        "    rooms: [lobby]\n",
        "    rooms: [lobby]\n    memory_embedder:\n      provider: sentence_transformers\n"
        "      config: {model: ./missing}\n",
        1,
    )
    assert "memory_embedder" in text
    cli("add", "Alice prefers oolong tea")
    config.write_text(text)
    code, out, _ = cli("reindex")
    assert code == 1
    assert out.startswith(f"reindexed 1 memories from {root_of(config)}\n")
    assert "the vector index was not rebuilt: no sentence-transformers model folder" in out


def test_writes_refused_by_the_store_exit_with_code_1(cli, config: Path) -> None:
    code, out, _ = cli("add", "   ")
    assert code == 1
    assert out.startswith("mindroom memory: cannot store an empty memory")

    code, out, _ = cli("add", "sneaky", "--file", "../../escape.md")
    assert code == 1
    assert "leaves the memory folder" in out
    assert not (config.parent / "agents" / "escape.md").exists()


def test_set_refuses_pin_and_unpin_together_and_changes_nothing(cli) -> None:
    _, out, _ = cli("add", "a fact to pin")
    [entry_id] = ID.findall(out)
    for both in (["--pin", "--unpin"], ["--unpin", "--pin"]):
        code, _, err = cli("set", entry_id, *both)
        assert code == 2
        assert "--pin and --unpin exclude each other" in err
    assert "pinned" not in cli("get", entry_id)[1]
    # the control: one of them alone is applied
    assert cli("set", entry_id, "--pin")[0] == 0
    assert "pinned" in cli("get", entry_id)[1]


def test_unknown_agent_exits_2_and_names_the_agent(cli) -> None:
    code, out, err = cli("list", agent="nobody")
    assert code == 2
    assert out == ""
    assert "no agent 'nobody'" in err
    assert "general, mind" in err


def test_user_on_a_non_private_agent_is_refused(cli, config: Path) -> None:
    code, _, err = cli("add", "private thing", "--user", "@alice:example.org", agent="general")
    assert code == 2
    assert "not a private companion" in err
    assert "'general'" in err


def test_private_companion_needs_user_and_writes_that_users_root(cli, config: Path) -> None:
    code, _, err = cli("add", "private thing", agent="mind")
    assert code == 2
    assert "--user" in err
    code, out, _ = cli("add", "alice's secret", "--user", "@alice:example.org", agent="mind")
    assert code == 0, out
    private = config.parent / "private_instances"
    written = list(private.glob("alice_*/mind_data/MEMORY.md"))
    assert len(written) == 1
    assert "alice's secret" in written[0].read_text()
    assert "# About you" in written[0].read_text()  # scaffolded from the template first
    code, out, _ = cli("list", "--user", "@bob:example.org", agent="mind")
    assert code == 0
    assert "alice's secret" not in out


def test_storage_option_puts_the_memory_elsewhere(cli, tmp_path: Path, config: Path) -> None:
    storage = tmp_path / "elsewhere"
    code, _, _ = cli("add", "stored elsewhere", "--storage", str(storage))
    assert code == 0
    written = storage / "agents" / "general" / "workspace" / "MEMORY.md"
    assert "stored elsewhere" in written.read_text()
    assert not root_of(config).exists()


def _recorded_room(config: Path) -> str:
    """A closed room of Alice and Bob, recorded in general's audiences.json: its key."""
    book = AudienceBook(agent_scope(config.parent, "general").state_dir)
    told = Told(
        open=False,
        readers=frozenset({"@alice:localhost", "@bob:localhost"}),
        kind="private",
        room_id="!plans:localhost",
        name="Plans",
    )
    return book.record(told)


def test_set_audience_writes_each_value_and_default_takes_the_word_away(cli, config: Path) -> None:
    key = _recorded_room(config)
    _, out, _ = cli("add", "Alice and Bob plan a trip")
    [entry_id] = ID.findall(out)
    assert "audience=" not in cli("get", entry_id)[1]  # the CLI writes none (the default)
    for value, shown in [
        ("public", "a room anyone can read"),
        ("dm:@alice:localhost", "direct chat with @alice:localhost"),
        (key, "Plans; readers then: @alice:localhost, @bob:localhost"),
    ]:
        code, out, _ = cli("set", entry_id, "--audience", value)
        assert code == 0, out
        assert f"audience={value}" in out
        assert shown in out
        assert f"audience={value}" in cli("get", entry_id)[1]
        [entry] = [e for e in entries(config) if e.id == entry_id]
        assert entry.fields.audience == value
    code, out, _ = cli("set", entry_id, "--audience", "default")
    assert code == 0
    assert "audience=" not in cli("get", entry_id)[1]
    [entry] = [e for e in entries(config) if e.id == entry_id]
    assert entry.fields.audience is None


def test_set_audience_refuses_an_unknown_room_or_word_and_changes_nothing(
    cli, config: Path
) -> None:
    key = _recorded_room(config)
    _, out, _ = cli("add", "a fact told in a closed room", "--importance", "4")
    [entry_id] = ID.findall(out)
    assert cli("set", entry_id, "--audience", "dm:@alice:localhost")[0] == 0
    before = read_text(root_of(config) / "MEMORY.md")
    for bad in ["room:00000000", "everyone", "dm:alice", "room:../x", ""]:
        code, out, _ = cli("set", entry_id, "--audience", bad, "--importance", "5")
        assert code == 1, (bad, out)
        assert out.startswith("mindroom memory: ")
        assert "public, dm:@person:server, default" in out
        assert key in out  # the rooms it could have named
        assert "Plans" in out
        assert read_text(root_of(config) / "MEMORY.md") == before
    # the control: a recorded key is accepted (with the other field)
    code, out, _ = cli("set", entry_id, "--audience", key, "--importance", "5")
    assert code == 0, out
    assert "importance=5" in out
    assert f"audience={key}" in out


def test_audiences_lists_the_rooms_recorded(cli, config: Path) -> None:
    code, out, _ = cli("audiences")
    assert code == 0
    assert out.startswith("no rooms recorded")
    key = _recorded_room(config)
    code, out, _ = cli("audiences")
    assert code == 0
    assert out.splitlines() == [
        f"{key}  private   !plans:localhost  Plans  readers: @alice:localhost, @bob:localhost"
    ]
