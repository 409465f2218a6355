"""Transcript repair: stored history a provider would refuse is made acceptable before a run.

Real parts only: Agno's sessions and runs in SQLite (ConversationSessions), a real Agno Agent
and the scripted OpenAI-compatible server, here refusing requests the way OpenAI does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from agno.agent import Agent
from agno.db.base import SessionType
from agno.models.message import Message
from agno.models.openai import OpenAIChat
from agno.run.agent import RunOutput
from agno.run.base import RunStatus
from agno.run.team import TeamRunOutput
from agno.session import AgentSession, TeamSession

from mindroom.adapters.agno.session_stores import ConversationSessions, sqlite_engine
from mindroom.adapters.agno.transcript_repair import (
    INTERRUPTED_RESULT,
    CorruptSessionError,
    repair_messages,
    sanitize_session,
)
from mindroom.errors import ModelError
from tests.support.scripted_model import Reply, ScriptedModel, last_user_text, tool_pairing_refusal

SESSION = "!room:x/thread-1"
AGENT = "general"
HERE = {"provider": "OpenAI", "model_id": "m1"}  # the provider and model of the next run


def _run(run_id: str, *messages: Message, **fields: Any) -> RunOutput:
    defaults: dict[str, Any] = {"model": "m1", "model_provider": "OpenAI", "user_id": "@alice:x"}
    defaults["status"] = RunStatus.completed
    return RunOutput(
        run_id=run_id,
        agent_id=AGENT,
        session_id=SESSION,
        messages=list(messages),
        **{**defaults, **fields},
    )


def _call(call_id: str, name: str = "lookup", **extra: Any) -> dict[str, Any]:
    function = {"name": name, "arguments": '{"q": "tea"}'}
    return {"id": call_id, "type": "function", "function": function, **extra}


def _user(text: str) -> Message:
    return Message(role="user", content=text)


def _calls(*calls: dict[str, Any], **fields: Any) -> Message:
    return Message(role="assistant", tool_calls=list(calls), **fields)


def _result(call_id: str, content: str = "found", name: str = "lookup") -> Message:
    return Message(role="tool", tool_call_id=call_id, tool_name=name, content=content)


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[ConversationSessions]:
    engine = sqlite_engine(tmp_path / "general.db")
    try:
        yield ConversationSessions(db_engine=engine, session_table="agent_sessions")
    finally:
        await engine.dispose()


async def _save(db: ConversationSessions, *runs: RunOutput | TeamRunOutput, team: bool = False):
    session = TeamSession(SESSION, team_id=AGENT) if team else AgentSession(SESSION, AGENT)
    await db.upsert_session(session)
    for index, run in enumerate(runs):
        await db.upsert_run(run, session_id=SESSION, user_id=run.user_id, run_index=index)


async def _runs(db: ConversationSessions, team: bool = False) -> list[Any]:
    kind = SessionType.TEAM if team else SessionType.AGENT
    session = await db.get_session(SESSION, kind)
    assert isinstance(session, TeamSession if team else AgentSession)
    return list(session.runs or [])


def _raw_rows(tmp_path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(tmp_path / "general.db") as con:
        sessions = con.execute("SELECT * FROM agent_sessions ORDER BY session_id").fetchall()
        runs = con.execute("SELECT * FROM agent_sessions_runs ORDER BY run_index").fetchall()
    return [*sessions, *runs]


@pytest.mark.asyncio
@pytest.mark.parametrize("team", [False, True], ids=["agent", "team"])
async def test_a_tool_call_without_a_result_gets_a_synthetic_error_result(
    store: ConversationSessions, team: bool
) -> None:
    messages = [_user("find tea"), _calls(_call("call_1"), _call("call_2", "add"))]
    messages.append(_result("call_1"))  # the turn ended before call_2 finished
    run: RunOutput | TeamRunOutput = _run("r1", *messages, status=RunStatus.running)
    if team:
        fields = {"model": "m1", "model_provider": "OpenAI", "status": RunStatus.running}
        run = TeamRunOutput(
            run_id="r1", team_id=AGENT, session_id=SESSION, messages=messages, **fields
        )
    await _save(store, run, team=team)

    report = await sanitize_session(store, SESSION, team=team, **HERE)

    assert (report.synthetic_results, report.dropped_orphans, report.changed) == (1, 0, True)
    assert report.run_ids == ("r1",)
    [stored] = await _runs(store, team)
    assert [m.role for m in stored.messages] == ["user", "assistant", "tool", "tool"]
    added = stored.messages[-1]
    assert (added.tool_call_id, added.tool_name, added.tool_call_error) == ("call_2", "add", True)
    assert added.content == INTERRUPTED_RESULT
    assert not (await sanitize_session(store, SESSION, team=team, **HERE)).changed


@pytest.mark.asyncio
async def test_a_tool_result_without_an_earlier_call_is_dropped(
    store: ConversationSessions,
) -> None:
    answer = Message(role="assistant", content="Green tea.")
    late = _calls(_call("call_late"))
    await _save(store, _run("r1", _user("tea?"), _result("call_stray"), answer, late))

    report = await sanitize_session(store, SESSION, team=False, **HERE)

    assert (report.dropped_orphans, report.synthetic_results) == (1, 1)
    [stored] = await _runs(store)
    assert [(m.role, m.tool_call_id) for m in stored.messages] == [
        ("user", None),
        ("assistant", None),
        ("assistant", None),
        ("tool", "call_late"),
    ]


def test_a_result_separated_from_its_call_is_moved_back_after_it() -> None:
    run = _run("r1", _user("tea?"), _calls(_call("c1")), _user("hurry"), _result("c1"))

    report = repair_messages([run], **HERE)

    assert (report.moved_results, report.synthetic_results, report.dropped_orphans) == (1, 0, 0)
    assert [m.role for m in run.messages or []] == ["user", "assistant", "tool", "user"]


@pytest.mark.asyncio
async def test_a_clean_session_is_left_byte_identical(
    store: ConversationSessions, tmp_path: Path
) -> None:
    own_reasoning = Message(role="assistant", content="Green.", reasoning_content="I think")
    parallel = _calls(_call("c1"), _call("c2", "add"))  # results stored as they finished
    done = _run("r1", _user("tea?"), parallel, _result("c2", "3", "add"), _result("c1"))
    done.messages = [*(done.messages or []), own_reasoning]
    # a paused run's open call waits for continue_run: Agno does not replay it, nor do we touch it
    paused = _run("r2", _user("and later?"), _calls(_call("c3")), status=RunStatus.paused)
    await _save(store, done, paused)
    before = _raw_rows(tmp_path)

    report = await sanitize_session(store, SESSION, team=False, **HERE)

    assert not report.changed
    assert report.run_ids == ()
    assert _raw_rows(tmp_path) == before  # neither the session row nor any run was re-saved


@pytest.mark.asyncio
async def test_runs_of_another_provider_or_model_lose_their_provider_fields(
    store: ConversationSessions,
) -> None:
    gemini_call = _call("c1", thought_signature="c2ln")
    gemini = _run(
        "r1",
        _user("tea?"),
        _calls(gemini_call, provider_data={"thought_signature": "c2ln"}, reasoning_content="hmm"),
        _result("c1"),
        model="gemini-x",
        model_provider="Google",
    )
    blocks = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "text", "text": "Green tea."},
    ]
    claude = _run(
        "r2",
        _user("which?"),
        Message(
            role="assistant",
            content=blocks,
            reasoning_content="hmm",
            redacted_reasoning_content="xxx",
            provider_data={"signature": "sig", "content_blocks": blocks},
        ),
        model="claude-x",
        model_provider="Anthropic",
    )
    older_openai = _run("r3", Message(role="assistant", content="Hi", reasoning_content="o"))
    older_openai.model = "m0"  # same provider, another model
    ours = _run("r4", Message(role="assistant", content="Hello", reasoning_content="mine"))
    await _save(store, gemini, claude, older_openai, ours)

    report = await sanitize_session(store, SESSION, team=False, **HERE)

    assert report.converted_messages == 3
    assert report.run_ids == ("r1", "r2", "r3")
    r1, r2, r3, r4 = await _runs(store)
    assistant = r1.messages[1]
    assert assistant.tool_calls == [_call("c1")]  # Gemini's thought_signature is gone
    assert (assistant.provider_data, assistant.reasoning_content) == (None, None)
    text = r2.messages[1]
    assert text.content == "Green tea."
    fields = ("reasoning_content", "redacted_reasoning_content", "provider_data")
    assert all(getattr(text, field) is None for field in fields)
    assert (r3.messages[0].content, r3.messages[0].reasoning_content) == ("Hi", None)
    assert r4.messages[0].reasoning_content == "mine"  # the current model's own run is kept
    assert [m.content for m in r1.messages] == ["tea?", None, "found"]


def _like_openai(body: dict[str, Any]) -> Reply | str:
    refusal = tool_pairing_refusal(body)
    if refusal is not None:
        return Reply(status=400, error_message=refusal, retryable=False)
    return "done: " + last_user_text(body)


@pytest.mark.asyncio
async def test_an_interrupted_tool_call_no_longer_breaks_the_next_turn(
    store: ConversationSessions, model: ScriptedModel
) -> None:
    interrupted = _run(
        "r1", _user("look up tea"), _calls(_call("call_interrupted")), status=RunStatus.running
    )
    await _save(store, interrupted)
    model.set_handler(_like_openai)
    async with httpx.AsyncClient() as http:  # closed here, so no socket outlives the test
        openai = OpenAIChat(
            id="m1", base_url=model.base_url, api_key="test", max_retries=0, http_client=http
        )
        agent = Agent(
            id=AGENT, model=openai, db=store, add_history_to_context=True, telemetry=False
        )

        refused = await agent.arun("and coffee?", session_id=SESSION, user_id="@alice:x")
        assert refused.status == RunStatus.error  # the control: the stored history is refused
        assert tool_pairing_refusal(model.requests[-1]) is not None

        report = await sanitize_session(store, SESSION, team=False, **HERE)
        answered = await agent.arun("and coffee?", session_id=SESSION, user_id="@alice:x")

    assert report.synthetic_results == 1
    assert answered.status == RunStatus.completed
    assert answered.content == "done: and coffee?"
    sent = model.requests[-1]["messages"]
    assert {
        "role": "tool",
        "tool_call_id": "call_interrupted",
        "content": INTERRUPTED_RESULT,
    } in sent


CORRUPT_ROWS = {
    "invalid JSON in a run": ("agent_sessions_runs", "run_data", "{not json"),
    "messages not a list": (
        "agent_sessions_runs",
        "run_data",
        '{"agent_id": "general", "run_id": "r1", "messages": "not a list"}',
    ),
    "a message without a role": (
        "agent_sessions_runs",
        "run_data",
        '{"agent_id": "general", "run_id": "r1", "messages": [{"content": "hi"}]}',
    ),
    "invalid JSON in the session row": ("agent_sessions", "session_data", "{not json"),
}


@pytest.mark.asyncio
@pytest.mark.parametrize("row", CORRUPT_ROWS.values(), ids=CORRUPT_ROWS.keys())
async def test_a_corrupt_session_row_raises_corrupt_session_error(
    store: ConversationSessions, tmp_path: Path, row: tuple[str, str, str]
) -> None:
    await _save(store, _run("r1", _user("tea?"), Message(role="assistant", content="Green.")))
    table, column, value = row
    with sqlite3.connect(tmp_path / "general.db") as con:
        con.execute(f"UPDATE {table} SET {column} = ?", (value,))

    with pytest.raises(CorruptSessionError) as raised:
        await sanitize_session(store, SESSION, team=False, **HERE)

    assert isinstance(raised.value, ModelError)
    assert raised.value.session_id == SESSION
    assert SESSION in str(raised.value)
    assert raised.value.reason


@pytest.mark.asyncio
async def test_a_session_that_does_not_exist_is_nothing_to_repair(
    store: ConversationSessions,
) -> None:
    assert not (await sanitize_session(store, "no-such-session", team=False, **HERE)).changed
