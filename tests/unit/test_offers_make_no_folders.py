"""Looking for what waits for a person (consent proposals, open conflicts) never makes a private
companion's folder for someone who never talked to it; a person who did is looked at. The offer
pass opens only the memories something was filed in since its last look."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindroom.config import parse_config
from mindroom.memory.jobs.consolidate.offers import conflicts_to_offer
from mindroom.memory.policy.consent import ConsentPending, Person
from mindroom.memory.policy.consent import db_path as proposals_db
from mindroom.memory.policy.consent_chat import proposals_to_offer
from mindroom.memory.registry import MemoryRegistry
from mindroom.pipeline.consent_offers import Looks, Waiting

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
        assert proposals_to_offer(config, registry, "mind", "@alice:example.org") == []
        assert not proposals_db(known.scope.state_dir).exists()  # nor a database made
    finally:
        registry.close()


ALICE, BOB, CAROL = "@alice:example.org", "@bob:example.org", "@carol:example.org"


def _file_proposal(registry: MemoryRegistry, person: str, text: str) -> None:
    """``person``'s turn with the companion: its tool files a proposal about them."""
    memory = registry.for_agent("mind", person)
    assert memory is not None
    with pytest.raises(ConsentPending):
        memory.add_sync(text, actor="tool")


def _questions(waiting: Waiting | None) -> list[str]:
    assert waiting is not None
    return [text for _, _, text in waiting.questions]


def test_an_offer_look_after_alices_turn_opens_no_other_private_memory(tmp_path: Path) -> None:
    config = parse_config(CONFIG, "test")
    storage = tmp_path / "storage"
    first = MemoryRegistry(config, storage, config_dir=tmp_path)
    try:
        _file_proposal(first, ALICE, "Alice lives in Lyon")
        _file_proposal(first, BOB, "Bob lives in Oslo")
        carol = first.for_agent("mind", CAROL)
        assert carol is not None
        carol.add_sync("Carol likes tea", actor="tool")  # she talked to it; nothing waits
        carol_state = carol.scope.state_dir
        looks = Looks(racy_ns=0)  # what the offer pass remembers between its passes
        for person, text in ((ALICE, "Lyon"), (BOB, "Oslo")):
            waiting = looks.waiting(config, first, "mind", Person(person))
            assert any(text in q for q in _questions(waiting))
            assert waiting is not None
            looks.offered(waiting)
        assert looks.waiting(config, first, "mind", Person(CAROL)) is None
    finally:
        first.close()

    # A later pass, after Alice's turn filed another proposal about her: a fresh registry,
    # so what it has open is what her turn and the look opened.
    second = MemoryRegistry(config, storage, config_dir=tmp_path)
    try:
        _file_proposal(second, ALICE, "Alice goes by Ali")
        [alice_scope] = second.open_private()
        waiting = looks.waiting(config, second, "mind", Person(ALICE))
        assert any("Ali" in q for q in _questions(waiting))  # hers: looked at
        assert looks.waiting(config, second, "mind", Person(BOB)) is None
        assert looks.waiting(config, second, "mind", Person(CAROL)) is None
        assert second.open_private() == [alice_scope]  # Bob's and Carol's stayed closed
        assert not proposals_db(carol_state).exists()  # no database made for Carol either

        # the control: a pass that does not remember its last look opens Bob's memory
        assert any(
            "Oslo" in q for q in _questions(Looks().waiting(config, second, "mind", Person(BOB)))
        )
        assert len(second.open_private()) == 2
    finally:
        second.close()
