"""Run one conversational turn of an agent through Agno.

Each (agent, room, thread) is one Agno session, stored in a per-agent SQLite file under
``mindroom_data/sessions/``, so a thread keeps its history across restarts. Agents are built per
turn (cheap) around shared model objects (which own the HTTP connection pools) and a shared
session database per agent.

A model failure never raises out of :meth:`AgentRuntime.run_turn`: it comes back as a
:class:`TurnResult` with ``error`` set, for the caller to show as a notice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from agno.agent import Agent, RunEvent
from agno.db.base import AsyncBaseDb
from agno.learn import LearningMachine, LearningMode, UserMemoryConfig, UserProfileConfig
from agno.media import Image
from agno.models.base import Model
from agno.run.background import await_background_runs
from agno.run.base import RunStatus
from agno.run.team import TeamRunOutput
from agno.team import Team
from agno.team.mode import TeamMode

from mindroom.adapters.agno.failures import ModelCalls, recording_model_calls
from mindroom.adapters.agno.memory_toolset import AgnoTool, MemoryToolsets, recall_contract
from mindroom.adapters.agno.models import build_model, describe_model
from mindroom.adapters.agno.probe import model_failed
from mindroom.adapters.agno.runtime_sessions import SessionWork
from mindroom.adapters.agno.session_stores import SessionStores
from mindroom.adapters.agno.transcript_repair import (
    TRIGGER_KEY,
    CorruptSessionError,
    prepare_session,
)
from mindroom.adapters.agno.turn_types import (
    TurnRequest,
    TurnResult,
    TurnUsage,
    turn_key,
    with_speaker,
)
from mindroom.app.resources import exhaustion_message, private_instance_limit
from mindroom.config.schema import Config
from mindroom.dashboard.metrics import METRICS
from mindroom.errors import ModelError
from mindroom.memory.backend import MemoryBackend
from mindroom.memory.ops_events import Collected, collected_events, write_collected
from mindroom.memory.policy.gate import RoomAudience, private_memory_allowed
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.search.recall import agent_recall, recall_block
from mindroom.memory.tools import tool_turn
from mindroom.people.erasure import ErasureGate
from mindroom.pipeline.turns import TeamSpec, is_private, session_id_for
from mindroom.sessions.overflow import is_context_overflow

__all__ = ["AgentRuntime", "TeamSpec", "TurnRequest", "TurnResult", "session_id_for"]

logger = logging.getLogger(__name__)

_AGNO_SAVES_S = 10.0  # how long a close waits for Agno's save of a cancelled turn


class AgentRuntime(SessionWork):
    """Owns the Agno side of every configured agent: models, session stores, turns."""

    def __init__(
        self, config: Config, data_dir: Path, memories: MemoryRegistry | None = None
    ) -> None:
        self._config = config
        self._storage = data_dir.parent
        self._sessions_dir = data_dir / "sessions"
        self.memories = memories
        self._models: dict[str, Model] = {}
        self._stores = SessionStores(  # storage.database is read at start only
            private_instance_limit(config.memory.max_open_private_instances),
            config.storage.database,
            self._storage,
        )
        self._learning_machines: dict[str, LearningMachine | None] = {}
        self._toolsets = MemoryToolsets()
        self._active = 0
        self._idle = asyncio.Event()
        self._event_writes: set[asyncio.Task[None]] = set()  # recall's events, being written
        self._idle.set()
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
        self.gate = ErasureGate()  # the bot's work against forget-me (mindroom.people.erasure)
        # the other processes sharing the database, held still for an erasure here
        # (mindroom.cluster.erasure); None alone
        self.others: Callable[[], contextlib.AbstractAsyncContextManager[None]] | None = None

    def set_config(self, config: Config) -> None:
        """Use ``config`` from the next turn on; models whose settings changed are rebuilt."""
        for key in list(self._models):
            if config.models.get(key) != self._config.models.get(key):
                del self._models[key]
        self._learning_machines.clear()
        self._stores.capacity = private_instance_limit(config.memory.max_open_private_instances)
        self._config = config

    def forget_models(self) -> None:
        """Build every model again at its next use (the environment they read changed)."""
        self._models.clear()

    def _model(self, key: str) -> Model:
        if key not in self._models:
            self._models[key] = build_model(key, self._config.chat_model(key))
        return self._models[key]

    def _db(self, agent: str, requester: str | None = None) -> AsyncBaseDb:
        """The session store: per agent, or per requester for a private companion."""
        instance = (
            self.memories.private_instance(agent, requester)
            if self.memories and requester and agent in self._config.agents
            else None
        )
        path = instance.sessions_db if instance else self._sessions_dir / f"{agent}.db"
        return self._stores.get(
            path, per_person=instance is not None, session_table="agent_sessions"
        )

    def _learning(
        self, name: str, requester: str | None = None, private_recall: bool = True
    ) -> LearningMachine | None:
        """Agno learning for a turn of ``name``: one store per agent; a private companion's is
        the requester's own (beside their sessions) and is left out of turns that may not use
        their private memory (``private_recall`` False), like the rest of it."""
        if self._config.agent_learning(name) is None:
            return None
        if self._config.agents[name].private is None:
            if not private_recall:  # a shared agent's learning, too, only where one reads
                return None
            if name not in self._learning_machines:
                path = self._storage / "agents" / name / "learning" / f"{name}.db"
                self._learning_machines[name] = self._learning_machine(name, path, False)
            return self._learning_machines[name]
        if not private_recall or not requester or self.memories is None:
            return None
        instance = self.memories.private_instance(name, requester)
        assert instance is not None  # a private agent has one per requester
        return self._learning_machine(name, instance.learning_db, True)

    def _learning_machine(self, name: str, path: Path, per_person: bool) -> LearningMachine:
        mode = self._config.agent_learning(name)
        db = self._stores.get(path, per_person=per_person)
        learning_mode = LearningMode.ALWAYS if mode == "always" else LearningMode.AGENTIC
        return LearningMachine(
            db=db,
            model=self._model(self._config.agent_model(name)),
            user_profile=UserProfileConfig(mode=learning_mode),
            user_memory=UserMemoryConfig(mode=learning_mode),
        )

    def build_agent(
        self,
        name: str,
        memory: MemoryBackend | None = None,
        recall: str = "",
        requester: str | None = None,
        private_recall: bool = True,
        room: RoomAudience | None = None,
    ) -> Agent:
        """The Agno agent for configured agent ``name`` (built fresh, cheap).

        ``memory`` gives it the memory tools, ``recall`` is this turn's memory block,
        ``requester`` picks a private companion's session and learning stores,
        ``private_recall`` False keeps the companion's learning out of the turn, and ``room``
        is where it answers (what its memory tools may show; None: no room).
        """
        cfg = self._config.agents[name]
        return Agent(
            id=name,
            name=cfg.display_name or name,
            model=self._model(self._config.agent_model(name)),
            db=self._db(name, requester),
            description=cfg.role or None,
            instructions=[*cfg.instructions, *self._contract(memory)] or None,
            markdown=self._config.defaults.markdown,
            add_history_to_context=True,
            num_history_runs=self._config.agent_history_runs(name),
            add_datetime_to_context=True,
            tools=self._memory_tools(name, memory, requester, room=room),
            additional_context=recall or None,
            learning=self._learning(
                name, requester, private_recall and self._alone(requester, room)
            ),
            telemetry=False,
        )

    def _alone(self, requester: str | None, room: RoomAudience | None) -> bool:
        """Whether Agno's learning may join a turn in ``room``: it keeps no audience, so what it
        learned of a person comes into a turn (and it learns) only where nobody but
        ``requester`` reads the answer, unless ``memory.audience`` is ``shared``."""
        if room is None or self._config.memory.audience == "shared":
            return True
        return requester is not None and private_memory_allowed(requester, room)

    def _contract(self, memory: MemoryBackend | None) -> list[str]:
        """The recall contract of a turn with memory (see memory_toolset)."""
        return [recall_contract(self._config.memory.tools)] if memory is not None else []

    def _memory_tools(
        self,
        name: str,
        memory: MemoryBackend | None,
        requester: str | None,
        members: Sequence[str] | None = None,
        *,
        room: RoomAudience | None = None,
    ) -> list[AgnoTool] | None:
        """The memory tools of a turn (see :mod:`mindroom.adapters.agno.memory_toolset`)."""
        if memory is None:
            return None
        keep = len(self._config.agents) + 2 * self._stores.capacity
        return self._toolsets.for_turn(
            self._config,
            name,
            memory,
            requester=requester,
            members=members,
            keep=keep,
            room=room,
            registry=self.memories,
        )

    async def _recall_block(
        self,
        memory: MemoryBackend,
        text: str,
        label: str,
        team: str,
        members: Sequence[str],
        thread: str,
        room: RoomAudience | None = None,
    ) -> str:
        """A team leader's recall of ``memory`` in ``thread``: what team ``team`` of
        ``members`` may read and ``room`` may show."""
        with collected_events() as events:
            block = await asyncio.to_thread(
                partial(recall_block, reader=team, members=members, thread=thread, room=room),
                self._config,
                memory,
                text,
                label,
            )
        self._write_events(events)
        return block

    async def _recall(
        self,
        agent: str,
        text: str,
        requester: str | None = None,
        private_recall: bool = True,
        thread: str | None = None,
        room: RoomAudience | None = None,
    ) -> tuple[MemoryBackend | None, str]:
        """The agent's memory for this requester, and its recall plus its teams' recall
        (:func:`mindroom.memory.search.recall.agent_recall`, which ``mindroom memory recall``
        shows)."""
        if self.memories is None:
            return None, ""
        with collected_events() as events:
            found = await asyncio.to_thread(
                agent_recall,
                self._config,
                self.memories,
                agent,
                text,
                requester,
                private_recall=private_recall,
                thread=thread,
                room=room,
            )
        self._write_events(events)
        return found

    def _write_events(self, events: Collected) -> None:
        """Write recall's operational events beside the turn, not before it (each is a
        database opened, committed and closed); :meth:`close` waits for them."""
        if not events:
            return
        task = asyncio.get_running_loop().create_task(
            asyncio.to_thread(write_collected, events), name="memory events"
        )
        self._event_writes.add(task)
        task.add_done_callback(self._event_writes.discard)
        self.gate.track(task)  # a forget-me waits for them (they may outlive the answer)

    @contextlib.contextmanager
    def _turn(self) -> Iterator[None]:
        """Count a conversational turn in progress (background work waits for none)."""
        self._active += 1
        self._idle.clear()
        try:
            with self._stores.leasing():  # no session store is closed under a running turn
                yield
        finally:
            self._active -= 1
            if not self._active:
                self._idle.set()

    async def wait_idle(self) -> None:
        """Return once no conversational turn is running: replies go first."""
        while self._active:
            await self._idle.wait()

    def _lock(self, session_id: str) -> asyncio.Lock:
        lock = self._locks.get(session_id)
        if lock is None:
            lock = self._locks[session_id] = asyncio.Lock()
        return lock

    async def run_turn(
        self,
        request: TurnRequest,
        on_text: Callable[[str], Awaitable[None]] | None = None,
        on_done: Callable[[str], Awaitable[None]] | None = None,
    ) -> TurnResult:
        """Answer ``request``; a failing model yields an error result, never an exception.

        With ``on_text`` the answer streams: it is called with the whole text so far after each
        chunk, and ``on_done`` with the whole answer as soon as the model finished it, before
        Agno stores the session and waits for its background work (so the answer can be
        posted first). Turns of one session run one at a time, so its history stays coherent.
        """
        with recording_model_calls() as calls:
            return await self._agent_turn(request, on_text, on_done, calls)

    async def _agent_turn(
        self,
        request: TurnRequest,
        on_text: Callable[[str], Awaitable[None]] | None,
        on_done: Callable[[str], Awaitable[None]] | None,
        calls: ModelCalls,
    ) -> TurnResult:
        model_key = self._config.agent_model(request.agent)
        model_desc = describe_model(model_key, self._config.chat_model(model_key))
        progress = _Progress()
        try:
            with (
                self._turn(),
                tool_turn(
                    turn_key(request, request.agent),
                    request.session_id,
                    request.user_id,
                    request.people,
                ),
            ):
                async with self._lock(request.session_id):
                    db = self._db(request.agent, request.user_id)
                    answered = await self._repair(
                        db, request.session_id, model_key, team=False, trigger=request.trigger
                    )
                    if answered is not None:  # see _answered_before
                        await _answered_before(request, answered, progress, on_text, on_done)
                    else:
                        agent = await self._turn_agent(request)
                        if on_text is None:
                            await _answer_whole(agent, request, progress)
                        else:
                            await _answer_streamed(agent, request, progress, on_text, on_done)
        except asyncio.CancelledError:
            raise
        except CorruptSessionError as exc:
            logger.error("agent %s: %s", request.agent, exc)
            return TurnResult(
                progress.text, "the stored history of this conversation is unreadable", corrupt=True
            )
        except Exception as exc:  # an edge: any failure becomes a notice, never a crash
            usage = TurnUsage.of(progress.metrics, model_key)
            return self._failed(
                request.agent, model_key, progress.text, exc, usage, calls.last_failure(model_key)
            )
        usage = TurnUsage.of(progress.metrics, model_key)
        if not progress.text.strip():
            return TurnResult("", f"model {model_desc} returned an empty answer", usage)
        return TurnResult(progress.text, usage=usage)

    async def _turn_agent(self, request: TurnRequest) -> Agent:
        """The agent that answers ``request``, with its memory and recall block."""
        memory, recall = await self._recall(
            request.agent,
            request.recall_query,
            request.user_id,
            request.private_recall,
            request.session_id,
            request.room,
        )
        if request.carried:
            recall = f"{recall}\n\n{request.carried}".strip()
        recall = with_speaker(recall, request.speaker)
        return self.build_agent(
            request.agent, memory, recall, request.user_id, request.private_recall, request.room
        )

    async def _repair(
        self, db: AsyncBaseDb, session_id: str, model_key: str, team: bool, trigger: str = ""
    ) -> str | None:
        """Sanitize a session's stored history for the model about to run (see
        :mod:`mindroom.adapters.agno.transcript_repair`); CorruptSessionError when it is
        unreadable. The answer a completed run of the session already gave to event
        ``trigger``, if one did."""
        model = self._model(model_key)
        prepared = await prepare_session(
            db,
            session_id,
            team=team,
            provider=model.provider or "",
            model_id=model.id,
            trigger=trigger,
        )
        if prepared.report.changed:
            logger.warning(
                "repaired the stored history of session %s: %s", session_id, prepared.report
            )
        return prepared.answered

    def _failed(
        self,
        agent: str,
        model_key: str,
        text: str,
        exc: Exception,
        usage: TurnUsage,
        outcome: BaseException | int | None = None,
    ) -> TurnResult:
        """The result of a turn of ``agent`` that failed with ``exc`` (logged here); ``outcome``
        is what the model's last request got, which classifies the failure when known."""
        model_cfg = self._config.chat_model(model_key)
        overflow = is_context_overflow(exc)
        model_error = isinstance(exc, ModelError)
        METRICS.model_error(model_key)
        if resource_error := exhaustion_message(str(exc) if model_error else exc):
            logger.error(
                "turn of agent %s failed: %s (%s)",
                agent,
                resource_error,
                exc,
                exc_info=None if model_error else exc,
            )
            return TurnResult(text, resource_error, usage)
        if model_error:
            logger.warning(
                "model %s failed for agent %s: %s", describe_model(model_key, model_cfg), agent, exc
            )
        else:
            logger.exception("turn of agent %s failed", agent, exc_info=exc)
        notice = model_failed(model_key, model_cfg, exc, outcome=outcome)
        return TurnResult(text, notice, usage, overflow)

    async def run_team_turn(self, spec: TeamSpec, request: TurnRequest) -> TurnResult:
        """Answer ``request`` as a team; see :meth:`_team_turn`."""
        with (
            self._turn(),
            tool_turn(
                turn_key(request, spec.name), request.session_id, request.user_id, request.people
            ),
            recording_model_calls() as calls,
        ):
            return await self._team_turn(spec, request, calls)

    async def _team_turn(
        self, spec: TeamSpec, request: TurnRequest, calls: ModelCalls
    ) -> TurnResult:
        """Answer ``request`` as a team (Agno Team): one answer, written by the leader.

        ``coordinate``: the leader delegates to the members it picks and writes the answer.
        ``collaborate``: every member answers, then the leader writes one synthesis.
        Team turns are not streamed; the answer is published whole.
        """
        team_failed = partial(self._team_failed, spec, calls)
        try:
            async with self._lock(request.session_id):
                answered = await self._repair(
                    self._db(f"team_{spec.name}"),
                    request.session_id,
                    spec.model,
                    team=True,
                    trigger=request.trigger,
                )
                if answered is not None:  # see _answered_before
                    logger.info(
                        "%s was answered before the restart: team %s's stored answer is posted",
                        request.trigger,
                        spec.name,
                    )
                    return TurnResult(answered)
                output = await self._team_output(spec, request)
        except asyncio.CancelledError:
            raise
        except CorruptSessionError as exc:
            logger.error("team %s: %s", spec.name, exc)
            return TurnResult(
                "", "the stored history of this conversation is unreadable", corrupt=True
            )
        except Exception as exc:  # an edge: any failure becomes a notice, never a crash
            if resource_error := exhaustion_message(exc):
                logger.error("team turn of %s failed: %s", spec.name, resource_error, exc_info=exc)
                return TurnResult("", resource_error)
            logger.exception("team turn of %s failed", spec.name)
            return TurnResult("", team_failed(exc, f"team {spec.display_name}"))
        if output.status == RunStatus.error:
            reason = str(output.content or "unknown error").strip()
            if resource_error := exhaustion_message(reason):
                logger.error("team turn of %s failed: %s (%s)", spec.name, resource_error, reason)
                return TurnResult("", resource_error)
            return TurnResult("", team_failed(reason, f"team {spec.display_name}"))
        text = output.content if isinstance(output.content, str) else str(output.content or "")
        if failed_member := self._failed_member(spec, output.member_responses, calls):
            # The leader may still write an answer around the failure: it is posted, then the
            # notice with the failing member's model and its fix.
            return TurnResult(text, failed_member)
        if not text.strip():
            return TurnResult("", f"team {spec.display_name} returned an empty answer")
        return TurnResult(text)

    async def _team_output(self, spec: TeamSpec, request: TurnRequest) -> TeamRunOutput:
        """Run team ``spec`` on ``request`` (under the session's lock): its members, its
        memory and recall, and the leader's run."""
        members, member_blocks = await self._team_members(spec, request)
        team_memory = (
            await asyncio.to_thread(self.memories.for_team, list(spec.members), request.user_id)
            if self.memories
            and (request.private_recall or not is_private(self._config, spec.name, spec))
            else None
        )
        blocks = []
        if team_memory is not None:
            blocks.append(
                await self._recall_block(
                    team_memory,
                    request.recall_query,
                    "team",
                    spec.name,
                    spec.members,
                    request.session_id,
                    request.room,
                )
            )
        blocks.extend(member_blocks)
        team = Team(
            id=spec.name,
            name=spec.display_name,
            role=spec.role or None,
            members=members,
            model=self._model(spec.model),
            mode=TeamMode.broadcast if spec.mode == "collaborate" else TeamMode.coordinate,
            instructions=list(spec.instructions) or None,
            db=self._db(f"team_{spec.name}"),
            add_history_to_context=True,
            num_history_runs=self._config.defaults.history_runs,
            markdown=self._config.defaults.markdown,
            add_datetime_to_context=True,
            additional_context=with_speaker("\n\n".join(b for b in blocks if b), request.speaker)
            or None,
            tools=self._memory_tools(
                spec.name, team_memory, request.user_id, spec.members, room=request.room
            ),
            telemetry=False,
        )
        return await team.arun(
            request.text,
            session_id=request.session_id,
            user_id=request.user_id,
            images=[Image(content=data) for data in request.images] or None,
            metadata=_run_metadata(request),
        )

    def _team_failed(self, spec: TeamSpec, calls: ModelCalls, reason: object, actor: str) -> str:
        """The notice when the model of team ``spec``'s leader failed with ``reason``."""
        model = self._config.chat_model(spec.model)
        return model_failed(spec.model, model, reason, actor, calls.last_failure(spec.model))

    async def _team_members(
        self, spec: TeamSpec, request: TurnRequest
    ) -> tuple[list[Agent | Team], list[str]]:
        """The members of team ``spec`` as agents, and the recall blocks of the members'
        own memories the leader reads (``memory.team_reads_member_memory``)."""
        members: list[Agent | Team] = []
        member_blocks = []
        for name in spec.members:
            memory, recall = await self._recall(
                name,
                request.recall_query,
                request.user_id,
                request.private_recall,
                request.session_id,
                request.room,
            )
            members.append(
                self.build_agent(
                    name, memory, recall, request.user_id, request.private_recall, request.room
                )
            )
            reads = self._config.memory.team_reads_member_memory
            if reads and memory is not None and self._config.agents[name].private is None:
                # the member's agent scope only: never a private root, nor its teams'
                member_blocks.append(
                    await self._recall_block(
                        memory,
                        request.recall_query,
                        f"member {name}",
                        spec.name,
                        spec.members,
                        request.session_id,
                        request.room,
                    )
                )
        return members, member_blocks

    def _failed_member(
        self, spec: TeamSpec, runs: Sequence[object], calls: ModelCalls
    ) -> str | None:
        """The notice for the first member whose model failed in a team run, if one did."""
        for run in runs:
            name = getattr(run, "agent_id", None)
            if getattr(run, "status", None) != RunStatus.error or name not in self._config.agents:
                continue
            reason = str(getattr(run, "content", None) or "unknown error").strip()
            key = self._config.agent_model(name)
            METRICS.model_error(key)
            logger.warning("model %s failed for %s in team %s: %s", key, name, spec.name, reason)
            actor = f"{name} in team {spec.display_name}"
            model = self._config.chat_model(key)
            return model_failed(key, model, reason, actor, calls.last_failure(key))
        return None

    def model(self, key: str) -> Model:
        """The shared model object of configured model ``key``."""
        return self._model(key)

    def forget_stores_under(self, folder: Path) -> None:
        """Let go of the session and learning stores under ``folder`` (a person's private
        folder, before forget-me erases it)."""
        self._stores.forget_under(folder)

    @contextlib.asynccontextmanager
    async def erasing(self, folder: Path) -> AsyncIterator[None]:
        """Hold the bot's work still while a person is erased (:mod:`mindroom.people.erasure`):
        once the work running now has ended (recall's event writes included) and the stores
        under ``folder`` (their private folder) are let go, the block runs alone; with other
        processes on the database, once they hold still too (:attr:`others`)."""
        async with self.gate.erasing():  # recall's event writes are tracked by the gate
            self.forget_stores_under(folder)
            if self.others is None:
                yield
                return
            async with self.others():
                yield

    async def close(self) -> None:
        """Write what recall left to write and what Agno still saves of a cancelled turn (it
        saves one in a task of its own), then release database connections."""
        if self._event_writes:
            await asyncio.gather(*self._event_writes, return_exceptions=True)
        await await_background_runs(timeout=_AGNO_SAVES_S)
        await self._stores.close()


@dataclass
class _Progress:
    """What a turn has produced so far: the answer's text and the run's usage (kept when the
    turn fails midway, so the partial text is still posted)."""

    text: str = ""
    metrics: object = None


async def _answered_before(
    request: TurnRequest,
    answered: str,
    progress: _Progress,
    on_text: Callable[[str], Awaitable[None]] | None,
    on_done: Callable[[str], Awaitable[None]] | None,
) -> None:
    """The turn's event was answered by a run the session already stored: its process died
    after the run was saved, before the message was marked done. The stored answer is posted
    again (the reply writer edits what was posted), and the model is not asked a second time:
    its history would hold the question twice."""
    logger.info("%s was answered before the restart: its stored answer is posted", request.trigger)
    progress.text = answered
    if on_text is not None:
        await on_text(answered)
    if on_done is not None:
        await on_done(answered)


def _run_metadata(request: TurnRequest) -> dict[str, str] | None:
    """What a run records of its turn: the event it answers (see :func:`_answered_before`)."""
    return {TRIGGER_KEY: request.trigger} if request.trigger else None


async def _answer_whole(agent: Agent, request: TurnRequest, progress: _Progress) -> None:
    """Run ``agent`` on ``request`` and take its answer at the end."""
    output = await agent.arun(
        request.text,
        session_id=request.session_id,
        user_id=request.user_id,
        images=[Image(content=data) for data in request.images] or None,
        metadata=_run_metadata(request),
    )
    progress.metrics = output.metrics
    if output.status == RunStatus.error:
        raise ModelError(str(output.content or "unknown error").strip())
    content = output.content
    progress.text = content if isinstance(content, str) else str(content or "")


async def _answer_streamed(
    agent: Agent,
    request: TurnRequest,
    progress: _Progress,
    on_text: Callable[[str], Awaitable[None]],
    on_done: Callable[[str], Awaitable[None]] | None = None,
) -> None:
    """Run ``agent`` on ``request``, calling ``on_text`` with the whole text so far after each
    chunk, and ``on_done`` with the whole answer once the model finished it (Agno says so
    before it stores the session)."""
    async for event in agent.arun(
        request.text,
        session_id=request.session_id,
        user_id=request.user_id,
        stream=True,
        stream_events=on_done is not None,  # for run_content_completed
        images=[Image(content=data) for data in request.images] or None,
        yield_run_output=True,  # the last item: the run, with its usage
        metadata=_run_metadata(request),
    ):
        kind = getattr(event, "event", None)  # the final RunOutput has none
        if kind is None:
            progress.metrics = getattr(event, "metrics", None)
        if kind == RunEvent.run_error:
            raise ModelError(str(event.content or "unknown error").strip())
        if kind == RunEvent.run_content_completed and on_done and progress.text.strip():
            await on_done(progress.text)
        chunk = event.content if kind == RunEvent.run_content else None
        if isinstance(chunk, str) and chunk:
            progress.text += chunk
            await on_text(progress.text)
