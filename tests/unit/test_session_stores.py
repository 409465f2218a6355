"""Agno session stores keyed by conversation, not by the first person in it."""

from __future__ import annotations

from pathlib import Path

import pytest
from agno.db.base import SessionType
from agno.db.sqlite import AsyncSqliteDb
from agno.session import AgentSession

from mindroom.adapters.agno.session_stores import ConversationSessions, sqlite_engine


def _session(user_id: str, text: str) -> AgentSession:
    return AgentSession(
        session_id="thread-1", agent_id="general", user_id=user_id, session_data={"said": text}
    )


@pytest.mark.asyncio
async def test_a_second_person_reads_and_saves_a_conversation_the_first_began(
    tmp_path: Path,
) -> None:
    engine = sqlite_engine(tmp_path / "general.db")
    store = ConversationSessions(db_engine=engine, session_table="agent_sessions")
    try:
        await store.upsert_session(_session("@alice:x", "alice"))
        read = await store.get_session("thread-1", SessionType.AGENT, user_id="@bob:x")
        assert isinstance(read, AgentSession)
        assert read.session_data == {"said": "alice"}
        assert await store.upsert_session(_session("@bob:x", "bob")) is not None
        again = await store.get_session("thread-1", SessionType.AGENT, user_id="@alice:x")
        assert isinstance(again, AgentSession)
        assert again.session_data == {"said": "bob"}
    finally:
        await engine.dispose()


@pytest.mark.asyncio
async def test_a_conversation_saved_with_an_owner_by_an_older_version_is_taken_over(
    tmp_path: Path,
) -> None:
    path = tmp_path / "general.db"
    old_engine = sqlite_engine(path)
    old = AsyncSqliteDb(db_engine=old_engine, session_table="agent_sessions")
    try:
        await old.upsert_session(_session("@alice:x", "alice"))
        # the control: Agno's own store refuses Bob's save of Alice's session
        assert await old.upsert_session(_session("@bob:x", "bob")) is None
    finally:
        await old_engine.dispose()

    engine = sqlite_engine(path)
    store = ConversationSessions(db_engine=engine, session_table="agent_sessions")
    try:
        assert await store.upsert_session(_session("@bob:x", "bob")) is not None
        read = await store.get_session("thread-1", SessionType.AGENT, user_id="@carol:x")
        assert isinstance(read, AgentSession)
        assert read.session_data == {"said": "bob"}
    finally:
        await engine.dispose()
