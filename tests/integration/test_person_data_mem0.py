"""Forgetting a person reaches a shared agent's mem0 memory (the real mem0, a local Chroma, the
bundled embedder): their facts are gone from every file, another person's stay."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindroom.adapters.embeddings import Embedder
from mindroom.cli.main import main
from mindroom.config import load_config
from mindroom.memory.mem0 import Mem0Memory
from mindroom.memory.registry import MemoryRegistry


def test_forget_erases_a_persons_facts_from_a_shared_agents_mem0_and_keeps_anothers(
    tmp_path: Path, local_embedder: Embedder, capsys: pytest.CaptureFixture[str]
) -> None:
    alice, bob = "@alice:example.org", "@bob:example.org"
    config = tmp_path / "config.yaml"
    config.write_text(
        "models: {default: {provider: openai, id: x, base_url: 'http://127.0.0.1:9', "
        "api_key: k}}\nagents: {keeper: {memory_backend: mem0}}\n"
        "memory: {auto_flush: {enabled: false}, maintenance: {enabled: false}}\n"
    )
    registry = MemoryRegistry(load_config(config), tmp_path, tmp_path)
    try:
        memory = registry.for_agent("keeper")
        assert isinstance(memory, Mem0Memory)
        memory.add_sync(f"{alice} drinks mem0tea5512 daily", actor="test")
        memory.add_sync(f"{bob} drinks mem0coffee6623 daily", actor="test")
    finally:
        registry.close()
    mem0_files = tmp_path / "mindroom_data" / "mem0"
    assert any(b"mem0tea5512" in p.read_bytes() for p in mem0_files.rglob("*") if p.is_file())

    code = main(["memory", "export", "--user", alice, "--format", "json", "--config", str(config)])
    exported = capsys.readouterr().out
    code_forget = main(["memory", "forget", "--user", alice, "--yes", "--config", str(config)])
    report = capsys.readouterr().out

    assert code == 0
    assert "mem0tea5512" in exported
    assert "mem0coffee6623" not in exported
    assert code_forget == 0, report
    files = [p for p in mem0_files.rglob("*") if p.is_file()]
    assert not any(b"mem0tea5512" in p.read_bytes() for p in files)
    assert any(b"mem0coffee6623" in p.read_bytes() for p in files)  # Bob's stays
    registry = MemoryRegistry(load_config(config), tmp_path, tmp_path)
    try:
        memory = registry.for_agent("keeper")
        assert isinstance(memory, Mem0Memory)
        left = [e.text for e in memory.list_sync(100)]
        found = [h.entry.text for h in memory.search_sync("coffee", 5)]
    finally:
        registry.close()
    assert left == [f"{bob} drinks mem0coffee6623 daily"]  # mem0 still works for Bob
    assert found == left
