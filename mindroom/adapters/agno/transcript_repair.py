"""Transcript repair: a session's stored history made acceptable to the next run's provider.

Before a model run the stored runs of a session are sanitised: a tool call without a result gets
a synthetic error result, a tool result without an earlier call is dropped (one away from its
call is moved back), and runs of another provider or model lose what only that provider reads.

How Agno 3.1 (3.1.10) builds the history it sends, and why this is still needed:

- ``add_history_to_context``: ``agno.agent._messages._history_for_run`` calls
  ``AgentSession.get_messages(last_n_runs=num_history_runs, limit=num_history_messages)``
  (``TeamSession.get_messages`` for a team). Only top-level runs (``parent_run_id`` None),
  minus those whose status is in ``agno.run.base.HISTORY_SKIP_STATUSES`` (paused, cancelled,
  error, regenerated; skipped *before* the last ``num_history_runs`` are taken), minus messages
  tagged ``from_history``. A COMPLETED, RUNNING or PENDING run (a turn killed mid-way) is
  replayed whole.
- Agno repairs no orphan: ``get_messages`` drops only *leading* tool results when
  ``num_history_messages`` cuts a batch; ``agno.utils.message.filter_tool_calls`` (only with
  ``max_tool_calls_from_history``) keeps the newest results with their calls; compaction and
  truncation cut at pair-safe points (``safe_truncation_index``, ``agno.compaction._cut``).
  A stored call without its result is sent as is, and OpenAI answers 400.
- At send time Agno splits old Gemini combined tool results (``normalize_tool_messages``) and
  remaps foreign call ids on both sides (``reformat_tool_call_ids``), but strips no provider
  field: ``OpenAIChat`` sends ``tool_calls`` verbatim (Gemini's ``thought_signature`` key too),
  Moonshot and MiMo send ``reasoning_content``, Claude replays ``provider_data``
  (``content_blocks``, ``signature``), Gemini its ``thought_signature``, OpenAI Responses its
  ``response_id`` and ``reasoning_output``.

Storage (``AsyncSqliteDb``): each run is a JSON ``run_data`` row of ``<session_table>_runs`` and
``upsert_session`` writes the session row only, so repaired runs are saved with ``upsert_run``.
``get_session`` serves an agent's runs from a cache of shared objects that must not be mutated:
:func:`sanitize_session` repairs shallow copies, and no :class:`Message` is changed in place.

A corrupt row: ``get_session`` logs at debug level and re-raises (None only means no row):
invalid JSON in ``run_data`` or a JSON column of the session row raises ``JSONDecodeError``, a
run of the wrong inner shape ``TypeError`` or pydantic's ``ValidationError``. Every turn would
fail the same way, so :class:`CorruptSessionError` tells the caller to rotate the session. A row
that parses but is no run (a list, a string, a dict without ``agent_id`` or ``team_id``) is
skipped by Agno itself (``agno.db.utils.deserialize_history_run``) and is not corruption here.

Not done here: when to sanitise, rotating a session (the caller's), runs Agno does not replay (a
paused run's open calls wait for ``continue_run``), tool calls without an id.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator
from dataclasses import astuple, dataclass
from typing import Any

from agno.db.base import AsyncBaseDb, SessionType
from agno.models.message import Message
from agno.run.agent import RunOutput
from agno.run.base import HISTORY_SKIP_STATUSES, RunStatus
from agno.run.team import TeamRunOutput
from agno.session import AgentSession, TeamSession
from agno.utils.message import normalize_tool_messages

from mindroom.errors import ModelError

INTERRUPTED_RESULT = (
    "error: this tool call did not finish (the turn was interrupted); its result is unknown"
)
# Message fields that only the provider which wrote them understands (see the module docstring).
PROVIDER_FIELDS = ("reasoning_content", "redacted_reasoning_content", "provider_data", "citations")
_LOAD_ERRORS = (ValueError, TypeError, KeyError, AttributeError)  # JSON, pydantic, shape


class CorruptSessionError(ModelError):
    """A session's stored data cannot be loaded; the caller should start a new session."""

    def __init__(self, session_id: str, reason: str) -> None:
        super().__init__(f"session {session_id!r} cannot be loaded ({reason}); start a new one")
        self.session_id = session_id
        self.reason = reason


@dataclass(frozen=True)
class RepairReport:
    """What a repair changed, for the caller's log line."""

    synthetic_results: int = 0  # error results added for calls that never got one
    dropped_orphans: int = 0  # tool results with no earlier call (or a second result)
    moved_results: int = 0  # results put back right after their call's message
    converted_messages: int = 0  # messages stripped of another provider's fields
    run_ids: tuple[str, ...] = ()  # the runs changed

    @property
    def changed(self) -> bool:
        """Whether anything was touched."""
        return any(astuple(self)[:4])  # the four counts

    def __add__(self, other: RepairReport) -> RepairReport:
        return RepairReport(*(a + b for a, b in zip(astuple(self), astuple(other), strict=True)))


def repair_messages(runs: Iterable[Any], *, provider: str, model_id: str) -> RepairReport:
    """Repair every run of ``runs`` (see :func:`repair_run`) and sum what changed."""
    report = RepairReport()
    for run in runs:
        report += repair_run(run, provider=provider, model_id=model_id)
    return report


def repair_run(run: Any, *, provider: str, model_id: str) -> RepairReport:
    """Make one run's messages acceptable to ``provider``'s ``model_id``; rebinds ``run.messages``.

    ``provider`` and ``model_id`` are the next run's ``model.provider`` and ``model.id``, which
    Agno records on each run (``run.model_provider``, ``run.model``). Runs Agno does not replay
    and messages replayed from history (``from_history``) are left as they are.
    """
    if run.status in HISTORY_SKIP_STATUSES or not run.messages:
        return RepairReport()
    original: list[Message] = list(run.messages)
    split = normalize_tool_messages(original)  # Agno's own split of old Gemini combined results
    kept = {id(m) for m in split}
    converted = sum(id(m) not in kept for m in original)
    if (run.model_provider, run.model) != (provider, model_id):
        plain = [m if m.from_history else _without_provider_fields(m) for m in split]
        converted += sum(a is not b for a, b in zip(plain, split, strict=True))
        split = plain
    paired, synthetic, dropped, moved = _pair_tool_results(split)
    if not any((synthetic, dropped, moved, converted)):
        return RepairReport()
    run.messages = paired
    return RepairReport(synthetic, dropped, moved, converted, (str(run.run_id),))


def _calls(message: Message) -> Iterator[tuple[str, str | None]]:
    """(id, tool name) of each tool call of ``message`` that has an id."""
    for call in message.tool_calls or []:
        if isinstance(call, dict) and isinstance(call.get("id"), str):
            function = call.get("function")
            yield call["id"], function.get("name") if isinstance(function, dict) else None


def _results_of_calls(
    messages: list[Message],
) -> tuple[dict[str, Message], dict[str, Message], int, int]:
    """Which assistant message made each call (call id -> message), each call's first result
    after it (call id -> result), how many results match no earlier call (dropped) and how
    many are not right after their call (moved)."""
    callers: dict[str, Message] = {}  # call id -> the assistant message that made the call
    results: dict[str, Message] = {}  # call id -> its first result after the call
    dropped = moved = 0
    block: Message | None = None  # the assistant message the current run of results follows
    for message in messages:
        if message.from_history or message.role not in ("assistant", "tool"):
            block = None
        elif message.role == "assistant":
            for call_id, _ in _calls(message):
                callers.setdefault(call_id, message)
            block = message
        elif message.tool_call_id in callers and message.tool_call_id not in results:
            results[message.tool_call_id] = message
            moved += callers[message.tool_call_id] is not block
        else:
            dropped += 1
    return callers, results, dropped, moved


def _pair_tool_results(messages: list[Message]) -> tuple[list[Message], int, int, int]:
    """``messages`` with each call's results right after its message (in their stored order),
    a synthetic error result for each call without one, and results matching no earlier call
    dropped; and how many results were added, dropped and moved."""
    callers, results, dropped, moved = _results_of_calls(messages)
    paired: list[Message] = []
    synthetic = 0
    for message in messages:
        if message.role == "tool" and not message.from_history:
            continue  # placed after its call below, or dropped
        paired.append(message)
        if message.role != "assistant" or message.from_history:
            continue
        own = {call_id: name for call_id, name in _calls(message) if callers[call_id] is message}
        paired += [result for call_id, result in results.items() if call_id in own]
        for call_id, name in own.items():
            if call_id not in results:
                paired.append(_interrupted_result(call_id, name))
                synthetic += 1
    return paired, synthetic, dropped, moved


def _interrupted_result(call_id: str, name: str | None) -> Message:
    """The result recorded for a tool call whose turn ended before it finished."""
    content = INTERRUPTED_RESULT
    return Message(
        role="tool", tool_call_id=call_id, tool_name=name, content=content, tool_call_error=True
    )


def _without_provider_fields(message: Message) -> Message:
    """A copy of ``message`` any provider accepts (``message`` itself if it already is one):
    no provider fields, tool calls in the plain OpenAI shape, assistant text as a string."""
    update: dict[str, Any] = {f: None for f in PROVIDER_FIELDS if getattr(message, f) is not None}
    if message.tool_calls:
        calls = [_plain_call(call) for call in message.tool_calls]
        if calls != message.tool_calls:
            update["tool_calls"] = calls
    if message.role == "assistant" and isinstance(message.content, list):  # e.g. Claude's blocks
        update["content"] = "".join(
            b if isinstance(b, str) else str(b.get("text") or "")
            for b in message.content
            if isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text")
        )  # keeps the text, drops thinking and server tool blocks
    return message.model_copy(update=update) if update else message


def _plain_call(call: Any) -> Any:
    """A tool call with only the OpenAI keys (drops e.g. Gemini's ``thought_signature``)."""
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return call
    plain = {key: value for key, value in call.items() if key in ("id", "type")}
    plain["function"] = {k: v for k, v in call["function"].items() if k in ("name", "arguments")}
    return plain


TRIGGER_KEY = "mindroom_trigger"
"""The key of a run's metadata naming the event it answered (:attr:`TurnRequest.trigger`)."""


@dataclass(frozen=True)
class Prepared:
    """A session made ready for a turn: what the repair changed, and the answer a completed run
    already gave to the turn's event (a process that died after the run was stored, before its
    bookkeeping was done), if one did."""

    report: RepairReport
    answered: str | None = None


async def sanitize_session(
    db: AsyncBaseDb, session_id: str, *, team: bool, provider: str, model_id: str
) -> RepairReport:
    """Repair the stored runs of a session before a run of ``provider``'s ``model_id`` (see
    :func:`prepare_session`)."""
    prepared = await prepare_session(
        db, session_id, team=team, provider=provider, model_id=model_id
    )
    return prepared.report


async def prepare_session(
    db: AsyncBaseDb,
    session_id: str,
    *,
    team: bool,
    provider: str,
    model_id: str,
    trigger: str = "",
) -> Prepared:
    """Repair the stored runs of a session before a run of ``provider``'s ``model_id``, and
    find the answer a completed run of it already gave to event ``trigger``.

    Changed runs are saved with ``upsert_run`` and the session row with ``upsert_session``;
    nothing is written when nothing changed. Raises :class:`CorruptSessionError` when the
    session's stored data cannot be loaded.
    """
    kind = SessionType.TEAM if team else SessionType.AGENT
    try:
        session = await db.get_session(session_id=session_id, session_type=kind)
    except _LOAD_ERRORS as exc:
        raise CorruptSessionError(session_id, f"{type(exc).__name__}: {exc}") from exc
    if session is None:
        return Prepared(RepairReport())
    if not isinstance(session, AgentSession | TeamSession):
        raise CorruptSessionError(session_id, f"loaded as {type(session).__name__}")
    runs = session.runs or []
    if not isinstance(runs, list) or not all(_is_run(run) for run in runs):
        raise CorruptSessionError(session_id, "its runs are not a list of runs with messages")
    total = RepairReport()
    for run in runs:
        repaired = copy.copy(run)  # the loaded run may be Agno's shared cached object
        report = repair_run(repaired, provider=provider, model_id=model_id)
        if report.changed:
            await db.upsert_run(repaired, session_id=session_id, user_id=repaired.user_id)
            total += report
    if total.changed:
        await db.upsert_session(session)
    return Prepared(total, _answered(runs, trigger, team) if trigger else None)


def _answered(runs: list[Any], trigger: str, team: bool) -> str | None:
    """The text of the last completed run that answered event ``trigger``, if any (of a team
    session: the team's own run, never a member's)."""
    kind = TeamRunOutput if team else RunOutput
    for run in reversed(runs):
        if not isinstance(run, kind) or (run.metadata or {}).get(TRIGGER_KEY) != trigger:
            continue
        if run.status == RunStatus.completed and isinstance(run.content, str) and run.content:
            return run.content
    return None


def _is_run(run: object) -> bool:
    messages = getattr(run, "messages", None)
    is_list = isinstance(messages, list) and all(isinstance(m, Message) for m in messages)
    return isinstance(run, RunOutput | TeamRunOutput) and (messages is None or is_list)
