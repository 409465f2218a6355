"""Looking for what waits for a person (consent proposals, open conflicts) never makes a private
companion's folder for someone who never talked to it; a person who did is looked at."""

from __future__ import annotations

from pathlib import Path

from mindroom.config import parse_config
from mindroom.memory.jobs.consolidate.offers import conflicts_to_offer
from mindroom.memory.policy.consent import Person
from mindroom.memory.policy.consent_chat import proposals_to_offer
from mindroom.memory.registry import MemoryRegistry

CONFIG = (
    "models: {default: {id: x}}\nagents:\n  mind:\n    private: {per: user}\n"
    "memory:\n  embedder: none\n"
)


def test_offers_open_no_private_folder_for_a_stranger(tmp_path: Path) -> None:
    config = parse_config(CONFIG, "test")
    registry = MemoryRegistry(config, tmp_path / "storage", config_dir=tmp_path)
    try:
        stranger = registry.private_instance("mind", "@stranger:example.org")
        assert stranger is not None
        assert proposals_to_offer(config, registry, "mind", "@stranger:example.org") == []
        assert conflicts_to_offer(config, registry, "mind", Person("@stranger:example.org")) == []
        assert not stranger.instance_dir.exists()  # looking made nothing

        known = registry.for_agent("mind", "@alice:example.org")
        assert known is not None
        known.add_sync("Alice likes tea", actor="tool")  # she talked to it
        assert registry.existing_for_agent("mind", "@alice:example.org") is not None  # control
    finally:
        registry.close()
