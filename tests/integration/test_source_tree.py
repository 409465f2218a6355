"""A bot run in the folder of its config leaves that source tree clean.

The storage root defaults to the config file's folder, which for a newcomer is the clone. Every
file the bot writes (the homeserver's data, session stores, agents' workspaces, each person's
private memory) must be covered by the shipped ``.gitignore``, so nobody's private memory ends up
in a commit."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from nio import RoomCreateResponse

from tests.support.harness import BotHarness, Human, config_text, joined, unique
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall

REMEMBER = Reply(tool_calls=[ToolCall("add_memory", {"text": "Likes tea"})])

REPO = Path(__file__).resolve().parents[2]


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_a_run_with_a_private_companion_leaves_the_source_tree_clean(
    bot: BotHarness, human: Human, model: ScriptedModel
) -> None:
    room = unique("lobby")
    model.set_handler(
        lambda request: (
            "Noted." if any(m["role"] == "tool" for m in request["messages"]) else REMEMBER
        )
    )
    tree = bot.storage
    tree.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO / ".gitignore", tree / ".gitignore")
    shutil.copytree(REPO / "mind_template", tree / "mind_template")
    agents = {
        "general": {"rooms": [room]},
        "mind": {"rooms": [room], "private": {"per": "user", "template_dir": "./mind_template"}},
    }
    bot.write_config(config_text(model.base_url, agents))
    _git(tree, "init", "-q")
    _git(tree, "add", "-A")
    _git(tree, "commit", "-qm", "the source tree")

    (tree / ".env").write_text("OPENAI_API_KEY=sk-secret\n")  # as the README suggests
    room_id = await bot.start_in_room((tree / "config.yaml").read_text(), room, human)
    assert bot.bot is not None
    said = await human.send(room_id, "@general hi", mention=[bot.bot.agents["general"].user_id])
    await human.wait_for_reply(room_id, said)
    mind = bot.bot.agents["mind"].user_id  # private memory is used in the person's DM
    dm = await human.client.room_create(invite=[mind], is_direct=True)
    assert isinstance(dm, RoomCreateResponse), dm
    await human.wait_for(joined(mind, dm.room_id))
    said = await human.send(dm.room_id, "hi")
    await human.wait_for_reply(dm.room_id, said)
    await bot.stop()
    from mindroom.config.store import edit_config, lock_path

    with edit_config(tree / "config.yaml"):  # as `mindroom config set` does
        pass
    assert lock_path(tree / "config.yaml").exists()  # the control: the lock file is there

    written = [p for p in tree.rglob("*.md") if "Likes tea" in p.read_text()]
    # the control: both memories were written inside the tree, the private one under its person
    assert any("private_instances" in p.parts for p in written), written
    assert any(p.parts[-3:-1] == ("general", "workspace") for p in written), written
    assert _git(tree, "status", "--porcelain", "--untracked-files=all") == ""
