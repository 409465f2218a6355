"""Private companions: requester keys, instance layouts, template scaffolding, isolation."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.config import Config, parse_config
from mindroom.errors import MemoryStoreError
from mindroom.memory.files.markdown import parse_entries
from mindroom.memory.private import PRIVATE_DIR, private_instance, requester_key, scaffold
from mindroom.memory.registry import MemoryRegistry

KEY_RE = re.compile(r"[a-z0-9_]+")

CRAFTED_IDS = [
    "@alice:example.org",
    "@alice:evil.org",
    "@ALICE:example.org",
    "@\u0430lice:example.org",  # Cyrillic a
    "@alice\u200b:example.org",  # zero-width space
    "@../../etc:x",
    "@..:x",
    "@.:x",
    "@/:x",
    "@a/b:example.org",
    "@a/../../b:example.org",
    "@a\x00b:example.org",
    "@\x00:x",
    "@" + "a" * 10_000,
    "@" + "x" * 10_000 + ":example.org",
    "@\U0001f600\U0001f389:example.org",
    "@\u00e9l\u00e8ve:example.org",
    "@e\u0301leve:example.org",  # the same word, decomposed
    "@\uff41lice:example.org",  # fullwidth a
    "@\u6f22\u5b57:example.org",
    "@:example.org",
    "@",
    "",
    "alice",
    "@alice",
    "@\ud800:x",  # lone surrogate
]


def _inside(path: Path, folder: Path) -> bool:
    real, real_folder = path.resolve(), folder.resolve()
    return real != real_folder and real.is_relative_to(real_folder)


# -- requester_key ------------------------------------------------------------------------------


def test_requester_key_is_deterministic_readable_localpart_and_id_digest() -> None:
    user = "@Alice:example.org"
    digest = hashlib.sha256(user.encode()).hexdigest()[:16]

    assert requester_key(user) == requester_key(user) == f"alice_{digest}"


@pytest.mark.parametrize("user_id", CRAFTED_IDS, ids=range(len(CRAFTED_IDS)))
def test_requester_key_is_bounded_plain_ascii_without_path_syntax(user_id: str) -> None:
    key = requester_key(user_id)

    assert KEY_RE.fullmatch(key), key
    assert key.isascii()
    assert 0 < len(key) <= 41
    assert "/" not in key
    assert "." not in key
    assert ".." not in key
    assert requester_key(user_id) == key


def test_requester_keys_of_distinct_ids_never_collide() -> None:
    keys = {user_id: requester_key(user_id) for user_id in CRAFTED_IDS}

    assert len(set(keys.values())) == len(CRAFTED_IDS), keys


def test_look_alike_ids_share_the_readable_part_but_not_the_key() -> None:
    look_alikes = ["@alice:example.org", "@alice:evil.org", "@ALICE:example.org"]

    keys = [requester_key(u) for u in look_alikes]

    assert all(k.startswith("alice_") for k in keys)
    assert len(set(keys)) == 3


def test_requester_key_of_a_huge_localpart_is_cut_to_its_bounded_length() -> None:
    key = requester_key("@" + "z" * 10_000 + ":example.org")

    assert key.startswith("z" * 24 + "_")
    assert len(key) == 41


@pytest.mark.parametrize("per", ["user", "user_agent"])
@pytest.mark.parametrize("user_id", CRAFTED_IDS, ids=range(len(CRAFTED_IDS)))
def test_private_instance_paths_of_crafted_ids_stay_inside_private_instances(
    tmp_path: Path, user_id: str, per: str
) -> None:
    storage = tmp_path / "storage"
    instance = private_instance(storage, "mind", user_id, per=per, root=None)
    private_root = storage / PRIVATE_DIR

    for path in (instance.instance_dir, instance.memory_root, instance.state_dir):
        assert _inside(path, private_root), path
    # the requester's folder is a direct child of private_instances
    key_dir = instance.instance_dir if per == "user" else instance.instance_dir.parent
    assert key_dir.parent == private_root
    assert key_dir.name == requester_key(user_id)


# -- private_instance layouts -------------------------------------------------------------------


def test_per_user_layout_puts_the_memory_folder_in_the_requesters_folder(tmp_path: Path) -> None:
    key = requester_key("@alice:example.org")

    instance = private_instance(tmp_path, "mind", "@alice:example.org", per="user", root=None)

    base = tmp_path / PRIVATE_DIR / key
    assert instance.key == key
    assert instance.instance_dir == base
    assert instance.memory_root == base / "mind_data"
    assert instance.state_dir == base / ".state"
    assert instance.sessions_db == base / ".state" / "mind" / "sessions.db"
    assert instance.memory_scope().root == base / "mind_data"
    assert instance.memory_scope().state_dir == base / ".state" / "memory"


def test_per_user_agent_layout_gives_each_agent_its_own_folder(tmp_path: Path) -> None:
    key = requester_key("@alice:example.org")

    instance = private_instance(tmp_path, "mind", "@alice:example.org", per="user_agent", root=None)

    base = tmp_path / PRIVATE_DIR / key / "mind"
    assert instance.instance_dir == base
    assert instance.memory_root == base / "mind_data"
    assert instance.state_dir == base / ".state"
    assert instance.sessions_db == base / ".state" / "mind" / "sessions.db"


def test_custom_root_name_replaces_the_default_memory_folder_name(tmp_path: Path) -> None:
    user = "@alice:example.org"

    per_user = private_instance(tmp_path, "mind", user, per="user", root="journal")
    per_agent = private_instance(tmp_path, "mind", user, per="user_agent", root="journal")

    assert per_user.memory_root == per_user.instance_dir / "journal"
    assert per_agent.memory_root == per_agent.instance_dir / "journal"
    assert per_agent.memory_root != per_user.memory_root


def test_per_user_agents_with_the_same_root_share_one_memory_folder(tmp_path: Path) -> None:
    user = "@alice:example.org"

    one = private_instance(tmp_path, "mind", user, per="user", root="shared")
    two = private_instance(tmp_path, "coach", user, per="user", root="shared")

    assert one.memory_root == two.memory_root
    assert one.memory_scope().scope_id == two.memory_scope().scope_id
    assert one.sessions_db != two.sessions_db


def test_per_user_agent_instances_of_two_agents_are_separate(tmp_path: Path) -> None:
    user = "@alice:example.org"

    one = private_instance(tmp_path, "mind", user, per="user_agent", root="shared")
    two = private_instance(tmp_path, "coach", user, per="user_agent", root="shared")

    assert one.memory_root != two.memory_root
    assert one.memory_scope().scope_id != two.memory_scope().scope_id


def test_private_instance_creates_nothing_on_disk(tmp_path: Path) -> None:
    private_instance(tmp_path, "mind", "@alice:example.org", per="user", root=None)

    assert list(tmp_path.iterdir()) == []


# -- scaffold -----------------------------------------------------------------------------------


@pytest.fixture
def template(tmp_path: Path) -> Path:
    tpl = tmp_path / "tpl"
    (tpl / "memory").mkdir(parents=True)
    (tpl / "topics" / "deep").mkdir(parents=True)
    (tpl / "MEMORY.md").write_text("# About you\n")
    (tpl / "memory" / "notes.md").write_text("# Notes\n")
    (tpl / "topics" / "deep" / "plan.md").write_text("# Plan\n")
    return tpl


@pytest.fixture
def target(tmp_path: Path) -> tuple[Path, Path]:
    return tmp_path / "root", tmp_path / "state" / "scaffold.json"


def _files(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): p.read_text()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_first_scaffold_copies_every_template_file_and_writes_the_manifest(
    template: Path, target: tuple[Path, Path]
) -> None:
    root, manifest = target

    copied = scaffold(template, root, manifest)

    expected = ["MEMORY.md", "memory/notes.md", "topics/deep/plan.md"]
    assert sorted(copied) == expected
    assert _files(root) == _files(template)
    assert sorted(json.loads(manifest.read_text())) == expected


def test_scaffold_does_not_invent_memory_md_or_daily_folder(
    tmp_path: Path, target: tuple[Path, Path]
) -> None:
    root, manifest = target
    tpl = tmp_path / "bare"
    tpl.mkdir()
    (tpl / "guide.md").write_text("# Guide\n")

    assert scaffold(tpl, root, manifest) == ["guide.md"]

    assert not (root / "MEMORY.md").exists()
    assert not (root / "memory").exists()
    assert _files(root) == {"guide.md": "# Guide\n"}


def test_scaffold_of_an_empty_template_writes_the_manifest_but_no_files(
    tmp_path: Path, target: tuple[Path, Path]
) -> None:
    root, manifest = target
    (tmp_path / "empty").mkdir()

    assert scaffold(tmp_path / "empty", root, manifest) == []

    assert json.loads(manifest.read_text()) == []
    assert not root.exists() or _files(root) == {}


def test_second_scaffold_copies_nothing(template: Path, target: tuple[Path, Path]) -> None:
    root, manifest = target
    scaffold(template, root, manifest)

    assert scaffold(template, root, manifest) == []


def test_file_added_to_the_template_later_is_backfilled(
    template: Path, target: tuple[Path, Path]
) -> None:
    root, manifest = target
    scaffold(template, root, manifest)
    (template / "memory" / "habits.md").write_text("# Habits\n")

    copied = scaffold(template, root, manifest)

    assert copied == ["memory/habits.md"]
    assert (root / "memory" / "habits.md").read_text() == "# Habits\n"
    assert "memory/habits.md" in json.loads(manifest.read_text())


def test_scaffolded_file_the_user_edited_is_never_overwritten(
    template: Path, target: tuple[Path, Path]
) -> None:
    root, manifest = target
    scaffold(template, root, manifest)
    (root / "MEMORY.md").write_text("# Mine now\n- likes tea\n")
    (template / "MEMORY.md").write_text("# A newer template\n")
    (template / "extra.md").write_text("x\n")  # something else changed: scaffold runs again

    assert scaffold(template, root, manifest) == ["extra.md"]

    assert (root / "MEMORY.md").read_text() == "# Mine now\n- likes tea\n"


def test_scaffolded_file_the_user_deleted_is_not_resurrected(
    template: Path, target: tuple[Path, Path]
) -> None:
    root, manifest = target
    scaffold(template, root, manifest)
    (root / "memory" / "notes.md").unlink()
    (root / "MEMORY.md").unlink()

    assert scaffold(template, root, manifest) == []

    assert not (root / "memory" / "notes.md").exists()
    assert not (root / "MEMORY.md").exists()


def test_file_the_user_made_before_the_template_gained_it_is_left_alone(
    template: Path, target: tuple[Path, Path]
) -> None:
    root, manifest = target
    scaffold(template, root, manifest)
    (root / "topic.md").write_text("my own topic\n")
    (template / "topic.md").write_text("template topic\n")

    assert scaffold(template, root, manifest) == []

    assert (root / "topic.md").read_text() == "my own topic\n"


def test_file_the_user_made_is_recorded_so_deleting_it_does_not_bring_the_template_copy(
    template: Path, target: tuple[Path, Path]
) -> None:
    root, manifest = target
    scaffold(template, root, manifest)
    (root / "topic.md").write_text("my own topic\n")
    (template / "topic.md").write_text("template topic\n")
    scaffold(template, root, manifest)

    assert "topic.md" in json.loads(manifest.read_text())
    (root / "topic.md").unlink()
    assert scaffold(template, root, manifest) == []
    assert not (root / "topic.md").exists()


def test_template_file_symlink_is_refused(tmp_path: Path, target: tuple[Path, Path]) -> None:
    root, manifest = target
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "MEMORY.md").write_text("# ok\n")
    secret = tmp_path / "secret.md"
    secret.write_text("secret\n")
    (tpl / "leak.md").symlink_to(secret)

    with pytest.raises(MemoryStoreError, match="symlink"):
        scaffold(tpl, root, manifest)

    assert not (root / "leak.md").exists()
    assert not (root / "MEMORY.md").exists()


def test_template_directory_symlink_is_refused(tmp_path: Path, target: tuple[Path, Path]) -> None:
    root, manifest = target
    tpl = tmp_path / "tpl"
    (tpl / "memory").mkdir(parents=True)
    (tpl / "memory" / "notes.md").write_text("# ok\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.md").write_text("secret\n")
    (tpl / "linked").symlink_to(outside, target_is_directory=True)

    with pytest.raises(MemoryStoreError, match="symlink"):
        scaffold(tpl, root, manifest)

    assert not (root / "linked").exists()
    assert not (root / "memory" / "notes.md").exists()


def test_missing_template_dir_is_an_error(tmp_path: Path, target: tuple[Path, Path]) -> None:
    root, manifest = target

    with pytest.raises(MemoryStoreError, match="does not exist"):
        scaffold(tmp_path / "nowhere", root, manifest)

    assert not root.exists()


def test_template_that_is_a_file_is_an_error(tmp_path: Path, target: tuple[Path, Path]) -> None:
    root, manifest = target
    (tmp_path / "tpl.md").write_text("x\n")

    with pytest.raises(MemoryStoreError):
        scaffold(tmp_path / "tpl.md", root, manifest)


def test_no_template_scaffolds_nothing(tmp_path: Path, target: tuple[Path, Path]) -> None:
    root, manifest = target

    assert scaffold(None, root, manifest) == []

    assert not root.exists()
    assert not manifest.exists()
    assert list(tmp_path.iterdir()) == []


# -- MemoryRegistry.for_agent with a private agent ---------------------------------------------

ALICE = "@alice:example.org"
BOB = "@bob:example.org"

PRIVATE_CONFIG = """
models: {default: {id: x}}
memory: {embedder: none}
agents:
  mind:
    private: {per: user, template_dir: tpl}
"""


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[MemoryRegistry]:
    tpl = tmp_path / "tpl"
    tpl.mkdir()
    (tpl / "MEMORY.md").write_text("# About you\n")
    config: Config = parse_config(PRIVATE_CONFIG, "test")
    reg = MemoryRegistry(config, tmp_path / "storage", config_dir=tmp_path)
    yield reg
    reg.close()


def test_private_agent_gives_each_requester_a_different_memory(
    registry: MemoryRegistry, tmp_path: Path
) -> None:
    alice = registry.for_agent("mind", ALICE)
    bob = registry.for_agent("mind", BOB)

    assert alice is not None
    assert bob is not None
    assert alice is not bob
    assert alice.scope.root != bob.scope.root
    assert alice.scope.scope_id != bob.scope.scope_id
    private_root = tmp_path / "storage" / PRIVATE_DIR
    assert alice.scope.root == private_root / requester_key(ALICE) / "mind_data"
    assert bob.scope.root == private_root / requester_key(BOB) / "mind_data"
    # the same requester gets the same open memory back
    assert registry.for_agent("mind", ALICE) is alice


def test_private_agent_memory_is_scaffolded_from_the_template_on_first_use(
    registry: MemoryRegistry,
) -> None:
    alice = registry.for_agent("mind", ALICE)

    assert alice is not None
    assert alice.scope.entrypoint.read_text() == "# About you\n"
    manifest = alice.scope.state_dir / "scaffold.json"
    assert json.loads(manifest.read_text()) == ["MEMORY.md"]


def test_entry_added_for_one_requester_is_invisible_to_another(registry: MemoryRegistry) -> None:
    alice = registry.for_agent("mind", ALICE)
    bob = registry.for_agent("mind", BOB)
    assert alice is not None
    assert bob is not None

    entry = alice.add_sync("Favorite color: periwinkle", actor="test")

    assert [h.entry.id for h in asyncio.run(alice.search("periwinkle"))] == [entry.id]
    assert asyncio.run(bob.search("periwinkle")) == []
    assert entry.id in [e.id for e in alice.list_sync()]
    assert entry.id not in [e.id for e in bob.list_sync()]
    assert alice.find(entry.id).text == "Favorite color: periwinkle"
    with pytest.raises(MemoryStoreError):
        bob.find(entry.id)
    with pytest.raises(MemoryStoreError):
        asyncio.run(bob.get(entry.id))

    alice_text = alice.scope.entrypoint.read_text()
    bob_text = bob.scope.entrypoint.read_text()
    assert entry.id in [e.id for e in parse_entries(alice_text, "MEMORY.md")]
    assert "periwinkle" in alice_text
    assert "periwinkle" not in bob_text
    assert bob_text == "# About you\n"


def test_private_agent_without_a_requester_has_no_memory(
    registry: MemoryRegistry, tmp_path: Path
) -> None:
    assert registry.for_agent("mind") is None
    assert registry.for_agent("mind", None) is None
    assert not (tmp_path / "storage" / PRIVATE_DIR).exists()


def test_private_agent_with_memory_backend_none_has_no_memory(tmp_path: Path) -> None:
    config = parse_config(
        "models: {default: {id: x}}\n"
        "agents: {mind: {memory_backend: none, private: {per: user}}}\n",
        "test",
    )
    registry = MemoryRegistry(config, tmp_path / "storage", config_dir=tmp_path)

    assert registry.for_agent("mind", ALICE) is None
    # "private" still creates the private folders, without making memory active
    instance = registry.private_instance("mind", ALICE)
    assert instance is not None
    assert instance.memory_root.is_dir()
    assert list(instance.memory_root.iterdir()) == []


def test_two_private_agents_with_different_folders_never_share_an_open_memory(
    tmp_path: Path,
) -> None:
    config = parse_config(
        "models: {default: {id: x}}\n"
        "agents:\n"
        "  a: {private: {per: user_agent}}\n"
        "  b: {private: {per: user, root: a_a_data}}\n",
        "test",
    )
    registry = MemoryRegistry(config, tmp_path / "storage", config_dir=tmp_path)
    try:
        first = registry.for_agent("a", ALICE)
        second = registry.for_agent("b", ALICE)
        instance = registry.private_instance("b", ALICE)

        assert first is not None
        assert second is not None
        assert instance is not None
        assert second.scope.root == instance.memory_root
        assert first is not second
    finally:
        registry.close()
