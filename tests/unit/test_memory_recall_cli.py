"""``mindroom memory recall``: the memory block a new turn gets, exactly as the runtime builds it.

Real files (written by hand and through the CLI), real SQLite, the repository's config.yaml
(a shared agent ``general`` and a private companion ``mind``).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from mindroom.adapters.agno.runner import AgentRuntime
from mindroom.cli.main import main
from mindroom.config import load_config
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import write_entries

REPO = Path(__file__).resolve().parents[2]
ALICE = "@alice:example.org"
BOB = "@bob:example.org"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yaml"
    shutil.copy(REPO / "config.yaml", path)
    with path.open("a") as config_file:  # keyword-only search: a unit test loads no model
        config_file.write("memory:\n  embedder: none\n")
    shutil.copytree(REPO / "mind_template", tmp_path / "mind_template")
    return path


def run(config: Path, *args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["memory", *args, "--config", str(config)])
    out, err = capsys.readouterr()
    return code, out, err


def runtime_block(config: Path, agent: str, message: str, user: str | None = None) -> str:
    """What the runtime puts into a turn of ``agent`` for ``message``."""
    loaded = load_config(config)
    registry = MemoryRegistry(loaded, config.parent, config.parent)
    runtime = AgentRuntime(loaded, config.parent / "mindroom_data", registry)

    async def recall() -> str:
        try:
            _, block = await runtime._recall(agent, message, user)
            return block
        finally:
            await runtime.close()

    try:
        return asyncio.run(recall())
    finally:
        registry.close()


def general_memory(config: Path) -> Path:
    root = config.parent / "agents" / "general" / "workspace"
    chat = [f"thanks, that was a good chat number {n}" for n in range(20)]
    write_entries(root, "topics/chat.md", chat)
    write_entries(root, "topics/tea.md", ["Alice prefers oolong tea", "Bob drinks coffee"])
    write_entries(root, "memory/2024-03-02.md", ["Alice bought a teapot in Kyoto"])
    return root


def test_recall_prints_exactly_the_block_the_runtime_adds(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = general_memory(config)
    (root / "MEMORY.md").write_text("# Notes\n\n- Alice works at the library\n")  # by hand
    message = "which tea does Alice like?"

    code, out, err = run(config, "recall", "--agent", "general", message, capsys=capsys)

    assert code == 0, err
    assert out == runtime_block(config, "general", message) + "\n"
    assert "- Alice works at the library" in out
    assert "- [topics/tea.md:1] Alice prefers oolong tea" in out
    assert "Bob drinks coffee" not in out
    assert "good chat" not in out


def test_recall_prints_nothing_when_nothing_would_be_added(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    general_memory(config)
    code, out, _ = run(config, "recall", "--agent", "general", "what about Kyoto?", capsys=capsys)
    assert code == 0
    assert "(2024-03-02) Alice bought a teapot in Kyoto" in out  # positive control

    for message in ("thanks!", "ok, good"):
        code, out, err = run(config, "recall", "--agent", "general", message, capsys=capsys)
        assert (code, out, err) == (0, "", "")
        assert runtime_block(config, "general", message) == ""


def test_recall_follows_a_hand_edit_at_once(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = general_memory(config)
    _, out, _ = run(config, "recall", "--agent", "general", "oolong?", capsys=capsys)
    assert "oolong" in out
    write_entries(root, "topics/tea.md", ["Alice switched to jasmine tea"])
    _, out, _ = run(config, "recall", "--agent", "general", "oolong?", capsys=capsys)
    assert out == ""
    _, out, _ = run(config, "recall", "--agent", "general", "jasmine?", capsys=capsys)
    assert "Alice switched to jasmine tea" in out


def test_recall_of_a_private_companion_is_the_persons_own_memory(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for user, fact in ((ALICE, "My cat is called Miso"), (BOB, "My cat is called Rex")):
        code, _, _ = run(config, "add", "--agent", "mind", "--user", user, fact, capsys=capsys)
        assert code == 0
    [alice_root] = (config.parent / "private_instances").glob("alice_*/mind_data")
    write_entries(alice_root, "topics/pets.md", ["Miso sleeps on the piano"])  # by hand
    message = "what does my cat Miso do all day?"

    code, out, err = run(
        config, "recall", "--agent", "mind", "--user", ALICE, message, capsys=capsys
    )

    assert code == 0, err
    assert out == runtime_block(config, "mind", message, ALICE) + "\n"
    assert "My cat is called Miso" in out  # her MEMORY.md
    assert "- [topics/pets.md:1] Miso sleeps on the piano" in out
    assert "Rex" not in out
    _, out, _ = run(config, "recall", "--agent", "mind", "--user", BOB, message, capsys=capsys)
    assert "My cat is called Rex" in out
    assert "Miso" not in out

    code, out, err = run(config, "recall", "--agent", "mind", message, capsys=capsys)
    assert code == 2
    assert out == ""
    assert "--user" in err


def test_recall_of_an_unknown_agent_fails_and_names_it(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(config, "recall", "--agent", "nobody", "hi", capsys=capsys)
    assert code == 2
    assert out == ""
    assert "'nobody'" in err
