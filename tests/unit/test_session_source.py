"""Past conversations as a memory source: delta sync, the view, recall's gate."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from mindroom.config import parse_config
from mindroom.errors import MemoryStoreError
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.policy.view import AgentView
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.search.session_index import TranscriptMessage, transcript_path
from mindroom.memory.search.session_source import (
    close_all,
    index_transcript,
    recall_section,
    search_sessions,
)
from mindroom.sessions.transcripts import TranscriptIndexer


@pytest.fixture(autouse=True)
def _closed() -> Iterator[None]:
    yield
    close_all()


def said(*texts: str) -> list[TranscriptMessage]:
    roles = ("user", "assistant")
    return [
        TranscriptMessage(roles[n % 2], t, "@ada:x" if n % 2 == 0 else None, 1e9 + n)
        for n, t in enumerate(texts)
    ]


def test_delta_sync_waits_for_enough_new_messages_unless_the_session_ended(
    file_memory: FileMemory,
) -> None:
    first = said("my bike is a blue Gazelle", "nice bike")
    assert index_transcript(file_memory, "s1", first, min_new=4) == 0  # two wait: not yet
    assert search_sessions(file_memory, "gazelle", 5) == []
    more = [*first, *said("it has a basket", "handy")]
    assert index_transcript(file_memory, "s1", more, min_new=4) == 4
    assert index_transcript(file_memory, "s1", more, min_new=4) == 0  # nothing new
    tail = [*more, *said("and a bell", "ring ring")]
    assert index_transcript(file_memory, "s1", tail, min_new=4) == 0
    assert index_transcript(file_memory, "s1", tail, min_new=4, final=True) == 2  # it ended
    [hit] = search_sessions(file_memory, "gazelle bike", 5)
    assert hit.entry.path == transcript_path("s1")


def test_the_view_searches_and_reads_past_conversations_only_when_they_are_a_source(
    file_memory: FileMemory,
) -> None:
    file_memory.add_sync("Ada's bike is blue", actor="test")
    index_transcript(file_memory, "s1", said("my bike has a basket", "noted"), min_new=1)
    plain = AgentView(file_memory, CategoryAccess.everything())
    with_sessions = AgentView(file_memory, CategoryAccess.everything(), sessions=True)

    plain_paths = {h.entry.path for h in plain.search_sync("bike", 5)}
    both_paths = {h.entry.path for h in with_sessions.search_sync("bike", 5)}
    text = with_sessions.read_file_sync(transcript_path("s1"))

    assert transcript_path("s1") not in plain_paths
    assert transcript_path("s1") in both_paths  # the same search, with the conversation
    assert plain_paths <= both_paths  # the memory entry is still there
    assert "my bike has a basket" in text
    assert "lines 1-2 of 2" in text
    with pytest.raises(MemoryStoreError, match="memory.sources"):
        plain.read_file_sync(transcript_path("s1"))
    with pytest.raises(MemoryStoreError, match="no session transcript"):
        with_sessions.read_file_sync(transcript_path("never"))


def test_recall_shows_a_past_conversation_only_when_it_is_about_the_message(
    file_memory: FileMemory,
) -> None:
    index_transcript(
        file_memory,
        "s1",
        said("my locker code is 4711", "noted", "hello there", "hi"),
        min_new=1,
    )
    budget = [5000]

    about = recall_section(file_memory, "what was my locker code?", budget)
    chit_chat = recall_section(file_memory, "hello", [5000])

    assert "locker code is 4711" in about
    assert about.startswith("### Past conversations")
    assert 5000 - budget[0] >= len(about)  # the section's characters were spent
    assert chit_chat == ""  # one shared word is not relevance


def test_a_deleted_fact_is_hidden_from_past_conversations_until_it_is_restored(
    file_memory: FileMemory,
) -> None:
    entry = file_memory.add_sync("Ada's locker code is zq7731x9", actor="test")
    index_transcript(
        file_memory, "s1", said("my locker is zq7731x9, remember it", "noted"), min_new=1
    )
    index_transcript(file_memory, "s2", said("the locker room opens at nine", "ok"), min_new=1)
    view = AgentView(file_memory, CategoryAccess.everything(), sessions=True)
    shown = {h.entry.path for h in search_sessions(file_memory, "locker", 5)}
    assert shown == {transcript_path("s1"), transcript_path("s2")}  # the control

    view.delete_sync(entry.id, actor="cli")  # the path of the CLI, the dashboard, the tools
    hidden = {h.entry.path for h in search_sessions(file_memory, "locker", 5)}
    read = view.read_file_sync(transcript_path("s1"))
    recalled = recall_section(file_memory, "do you remember my locker?", [5000])
    file_memory.restore_sync(entry.id, actor="cli")
    back = {h.entry.path for h in search_sessions(file_memory, "locker", 5)}

    assert hidden == {transcript_path("s2")}  # the unrelated conversation stays
    assert "zq7731x9" not in read
    assert "hidden: this message states a fact that was deleted" in read
    assert "noted" in read  # only the line that states it is hidden
    assert "zq7731x9" not in recalled
    assert back == shown  # restored: shown again


def test_a_conversation_keeps_the_readers_it_had_when_someone_joins_its_room_later(
    tmp_path: Path,
) -> None:
    """What Alice said in her DM stays hers when she later invites Bob into that room: the
    conversation's audience only ever narrows, so Bob's own DM never finds it (the rule
    ``strict`` states: the readers the room had then)."""
    config = parse_config(
        "models: {default: {id: x}}\nagents:\n  general: {}\n"
        "memory:\n  embedder: none\n  sources: [memory, sessions]\n  session_index_messages: 1\n",
        "config.yaml",
    )
    registry = MemoryRegistry(config, tmp_path / "storage", config_dir=tmp_path)
    alice, bob, room_id = "@alice:example.org", "@bob:example.org", "!alicedm:example.org"
    session_id = f"general:{room_id}"
    runtime = _Transcripts()
    room = {"now": RoomAudience.private_to(alice, room_id)}
    indexer = TranscriptIndexer(
        lambda: config,
        runtime,  # type: ignore[arg-type]
        registry,
        lambda _s, _r: room["now"],
    )
    memory = registry.for_agent("general")
    assert memory is not None
    access = CategoryAccess.of(config, "general")
    in_alices_dm = AgentView(memory, access, sessions=True, room=room["now"])
    in_bobs_dm = AgentView(
        memory, access, sessions=True, room=RoomAudience.private_to(bob, "!bobdm:example.org")
    )
    try:
        runtime.messages += said("my biopsy came back positive", "I am sorry to hear that")
        asyncio.run(indexer.sync("general", session_id, None))
        assert in_alices_dm.search_sync("biopsy", 5)  # the control: found where it was said
        room["now"] = RoomAudience.shared(frozenset({alice, bob}), closed=True, room_id=room_id)
        runtime.messages += said("Bob, meet general", "Hello Bob")
        asyncio.run(indexer.sync("general", session_id, None))
        assert [h.entry.text for h in in_bobs_dm.search_sync("biopsy", 5)] == []
        assert in_alices_dm.search_sync("biopsy", 5)  # still hers
    finally:
        registry.close()


class _Transcripts:
    """The runtime's side of the indexer: the session's messages so far."""

    def __init__(self) -> None:
        self.messages: list[TranscriptMessage] = []

    async def session_transcript(
        self, owner: str, session_id: str, requester: str | None, team: bool = False
    ) -> list[TranscriptMessage]:
        return list(self.messages)
