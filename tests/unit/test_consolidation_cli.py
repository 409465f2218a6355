"""``mindroom memory conflicts`` / ``resolve`` / ``restore`` on what a consolidation pass
recorded and archived, and what recall tells an agent about open conflicts."""

from __future__ import annotations

import datetime as dt
import shutil
from pathlib import Path
from typing import Any

import pytest

from mindroom.cli.main import main
from mindroom.config import load_config
from mindroom.memory.files.protocol import read_text
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords, db_path
from mindroom.memory.jobs.consolidate.run import consolidate_memory
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.search.recall import agent_recall

REPO = Path(__file__).resolve().parents[2]
NOW = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
ALICE = "@alice:localhost"
BOB = "@bob:localhost"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    text = (REPO / "config.yaml").read_text()
    assert "\nmemory:" not in text
    path.write_text(text + "\nmemory:\n  embedder: none\n")  # keyword signals: no model load
    shutil.copytree(REPO / "mind_template", tmp_path / "mind_template")
    return path


@pytest.fixture
def cli(config: Path, capsys: pytest.CaptureFixture[str]):
    def run(action: str, *args: str, agent: str = "general") -> tuple[int, str]:
        code = main(["memory", action, "--config", str(config), "--agent", agent, *args])
        out, err = capsys.readouterr()
        return code, out + err

    return run


def consolidated(config: Path, plant: dict[str, list[str]], user: str | None = None) -> Any:
    """Write ``plant`` (daily file -> texts) into general's (or ``user``'s mind) memory and run
    a light pass over it; the ids by text."""
    registry = MemoryRegistry(load_config(config), config.parent)
    try:
        memory = registry.for_agent("mind" if user else "general", user)
        assert isinstance(memory, FileMemory)
        ids: dict[str, list[str]] = {}
        for day, texts in plant.items():
            for text in texts:
                entry = memory.add_sync(text, actor="t", path=f"memory/{day}.md")
                ids.setdefault(text, []).append(entry.id)
        report = consolidate_memory(memory, registry.config, None, NOW)
        return ids, report, memory.scope
    finally:
        registry.close()


PLANT = {
    "2026-11-01": ["Bob eats meat", "Alice drinks green tea every morning"],
    "2026-11-02": ["Bob does not eat meat", "Alice drinks green tea every morning"],
}


def test_conflicts_lists_each_pair_with_both_texts_and_how_to_settle_it(cli, config) -> None:
    ids, report, _ = consolidated(config, PLANT)
    assert len(report.conflicts) == 1

    code, out = cli("conflicts")

    assert code == 0
    head, a, b, *rest = out.splitlines()
    assert head.startswith("c-")
    assert "conflict" in head
    assert "open" in head
    assert "negation" in head
    assert {a.split()[1], b.split()[1]} == {
        ids["Bob eats meat"][0],
        ids["Bob does not eat meat"][0],
    }
    assert "Bob eats meat" in a + b
    assert "Bob does not eat meat" in a + b
    assert rest[0].startswith("(1 open in ")
    assert "mindroom memory resolve --agent general ID" in rest[1]


def test_resolve_keep_one_archives_the_other_and_restore_brings_it_back(cli, config) -> None:
    ids, _, scope = consolidated(config, PLANT)
    meat, no_meat = ids["Bob eats meat"][0], ids["Bob does not eat meat"][0]
    conflict_id = cli("conflicts")[1].split()[0]

    code, out = cli("resolve", conflict_id, "--keep", no_meat)

    assert code == 0
    assert out.strip() == f"{conflict_id}: kept {no_meat}; {meat} archived"
    code, listed = cli("list")
    assert no_meat in listed
    assert meat not in listed
    archive = read_text(scope.root / "memory/archive/2026-11.md")
    assert f"<!-- {meat} -->" in archive
    assert f"settled: kept {no_meat}" in archive
    assert cli("conflicts")[1].startswith("(0 open in ")
    code, everything = cli("conflicts", "--all")
    assert "resolved" in everything
    assert f"settled: kept {no_meat}; {meat} archived" in everything

    code, out = cli("restore", meat)
    assert code == 0
    assert out.startswith(f"restored {meat}  memory/2026-11-01.md:")
    assert meat in cli("list")[1]
    # settled stays settled: the next pass does not raise the pair again
    _, again, _ = consolidated(config, {})
    assert again.conflicts == []


def test_resolve_keep_both_changes_no_file(cli, config) -> None:
    _, _, scope = consolidated(config, PLANT)
    before = {p: p.read_text() for p in sorted((scope.root / "memory").glob("2026-*.md"))}
    conflict_id = cli("conflicts")[1].split()[0]

    code, out = cli("resolve", conflict_id, "--keep-both")

    assert code == 0
    assert "kept both" in out
    assert {p: p.read_text() for p in before} == before


def test_resolve_edit_rewrites_the_kept_entry_and_archives_the_other(cli, config) -> None:
    ids, _, _ = consolidated(config, PLANT)
    meat, no_meat = ids["Bob eats meat"][0], ids["Bob does not eat meat"][0]
    conflict_id = cli("conflicts")[1].split()[0]

    code, out = cli(
        "resolve", conflict_id, "--keep", meat, "--edit", "Bob stopped eating meat in 2025"
    )

    assert code == 0, out
    code, listed = cli("list")
    assert f"{meat}  memory/2026-11-01.md:1  Bob stopped eating meat in 2025" in listed
    assert no_meat not in listed
    assert "Bob eats meat" in cli("history", meat)[1]  # the old text is kept by the history


def test_a_proposed_merge_of_a_persons_line_is_accepted_only_by_the_person(cli, config) -> None:
    with config.open("a") as handle:  # a looser overlap makes the pair a merge without a model
        handle.write("  maintenance:\n    consolidation:\n      lexical_merge: 0.6\n")
    registry = MemoryRegistry(load_config(config), config.parent)
    try:
        memory = registry.for_agent("general")
        assert isinstance(memory, FileMemory)
        daily = memory.scope.root / "memory"
        daily.mkdir(parents=True, exist_ok=True)
        (daily / "2026-11-01.md").write_text("- Carol plays the cello\n")  # a person's line
        detailed = memory.add_sync(
            "Carol plays the cello in an orchestra", actor="t", path="memory/2026-11-02.md"
        )
        report = consolidate_memory(memory, registry.config, None, NOW)
    finally:
        registry.close()
    assert len(report.suggestions) == 1
    assert read_text(daily / "2026-11-01.md") == "- Carol plays the cello\n"
    code, out = cli("conflicts")
    assert "merge" in out
    assert "proposed: Carol plays the cello in an orchestra" in out
    conflict_id = out.split()[0]

    code, out = cli("resolve", conflict_id, "--accept")

    assert code == 0, out
    listed = cli("list")[1]
    assert "Carol plays the cello" not in read_text(daily / "2026-11-01.md")  # the person chose
    assert f"{detailed.id}  memory/2026-11-02.md:1  Carol plays the cello in an orchestra" in listed


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["c-00000000", "--keep-both"], "no conflict 'c-00000000'"),
        (["{id}"], "choose one way"),
        (["{id}", "--keep-both", "--keep", "{a}"], "choose one way"),
        (["{id}", "--keep", "m-99999999"], "m-99999999 is not one of"),
        (["{id}", "--accept"], "is a conflict, not a proposed merge"),
    ],
)
def test_resolve_refuses_what_it_cannot_do_and_changes_nothing(
    cli, config, args: list[str], error: str
) -> None:
    ids, _, scope = consolidated(config, PLANT)
    conflict_id = cli("conflicts")[1].split()[0]
    before = {p: p.read_text() for p in sorted(scope.root.rglob("*.md"))}
    filled = [a.format(id=conflict_id, a=ids["Bob eats meat"][0]) for a in args]

    code, out = cli("resolve", *filled)

    assert code == 1, out
    assert error in out, out
    assert {p: p.read_text() for p in sorted(scope.root.rglob("*.md"))} == before
    assert cli("conflicts")[1].startswith(conflict_id)  # still open


def test_a_private_companions_conflicts_are_the_requesters_only(cli, config) -> None:
    consolidated(config, PLANT, user=ALICE)
    consolidated(config, {"2026-11-01": ["I like jazz"]}, user=BOB)

    alices = cli("conflicts", "--user", ALICE, agent="mind")[1]
    bobs = cli("conflicts", "--user", BOB, agent="mind")[1]

    assert "Bob eats meat" in alices
    assert "--user @alice:localhost" in alices
    assert "(0 open in " in bobs
    assert "meat" not in bobs
    assert "private companion" in cli("conflicts", agent="mind")[1]  # no --user: refused


def test_recall_tells_the_agent_about_an_open_conflict_and_counts_what_it_recalled(
    config,
) -> None:
    ids, _, scope = consolidated(config, PLANT)
    cfg = load_config(config)
    registry = MemoryRegistry(cfg, config.parent)
    try:
        _, block = agent_recall(cfg, registry, "general", "does Bob eat meat?", count=False)
        assert "### Open conflicts" in block
        assert "'Bob eats meat'" in block
        assert "'Bob does not eat meat'" in block
        records = ConsolidationRecords(db_path(scope.state_dir))
        assert records.retrievals() == {}  # a preview counts nothing
        agent_recall(cfg, registry, "general", "does Bob eat meat?")
        counted = records.retrievals()
        assert counted
        assert set(counted) <= set(ids["Bob eats meat"] + ids["Bob does not eat meat"])
        # once settled, recall no longer mentions it; unrelated messages never did
        (conflict,) = records.conflicts()
        records.resolve(conflict.id, "kept both")
        _, after = agent_recall(cfg, registry, "general", "does Bob eat meat?", count=False)
        assert "Bob eats meat" in after
        assert "### Open conflicts" not in after
        records.close()
    finally:
        registry.close()


def test_a_teams_memory_is_reached_with_team_and_its_conflicts_are_settled_in_every_mirror(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.harness import config_text

    path = tmp_path / "team" / "config.yaml"
    path.parent.mkdir()
    path.write_text(
        config_text(
            "http://127.0.0.1:9/v1",
            {"general": {}, "coder": {}},
            teams={"crew": {"agents": ["general", "coder"]}},
        )
    )

    def run(*args: str) -> tuple[int, str]:
        code = main(["memory", *args, "--config", str(path)])
        out, err = capsys.readouterr()
        return code, out + err

    registry = MemoryRegistry(load_config(path), path.parent)
    try:
        team = registry.for_team(["general", "coder"])
        assert isinstance(team, FileMemory)
        yes = team.add_sync("The demo runs on Linux", actor="t", path="memory/2026-11-01.md")
        no = team.add_sync("The demo never runs on Linux", actor="t", path="memory/2026-11-02.md")
        assert consolidate_memory(team, registry.config, None, NOW).conflicts
    finally:
        registry.close()

    code, out = run("conflicts", "--team", "crew")
    assert code == 0
    assert "The demo never runs on Linux" in out
    assert "resolve --team crew ID" in out
    conflict_id = out.split()[0]
    assert "(0 open in " in run("conflicts", "--agent", "general")[1]  # not the agent's own

    code, out = run("resolve", "--team", "crew", conflict_id, "--keep", no.id)
    assert code == 0, out
    mirrors = [
        path.parent / "agents" / m / "memory_files" / "team_coder+general"
        for m in ("general", "coder")
    ]
    for mirror in mirrors:
        assert yes.id not in read_text(mirror / "memory/2026-11-01.md")
        assert yes.id in read_text(mirror / "memory/archive/2026-11.md")
    code, out = run("conflicts", "--team", "nope")
    assert code == run("conflicts", "--agent", "nope")[0] == 2  # a config error, like an agent's
    assert "no team 'nope' in " in out
