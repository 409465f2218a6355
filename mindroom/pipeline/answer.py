"""The answer path: from a routed message to posted answers, flush marks and hand-offs.

A claimed message arrives from :mod:`mindroom.pipeline.intake` with its
:class:`~mindroom.pipeline.routing.Route` and the person it is for. For each answering agent
this module asks :func:`mindroom.pipeline.turns.plan_turn` who acts, for whom and where (the
only place that is decided), runs the turn, writes the reply, marks the session for the flush,
and passes the turn on when the answer names other agents. It goes down, never back up: all it
needs of the bot is :class:`Presence`.

It does not listen to Matrix, claim events or resume them at start-up: that is the intake's.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial

from mindroom.adapters.agno.router import choose_or_fall_back
from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest, TurnResult
from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.events import (
    IncomingMessage,
    message_source,
    named_agents,
)
from mindroom.adapters.matrix.reply import ReplyWriter, StreamPacing
from mindroom.adapters.matrix.send import notice_content
from mindroom.app.running import Running
from mindroom.cluster.leases import handover_key
from mindroom.config.schema import AgentConfig, Config, TeamConfig
from mindroom.dashboard.metrics import METRICS
from mindroom.memory.flush.loop import FlushWorker
from mindroom.memory.policy.consent import Person
from mindroom.people.erasure import ErasureGate
from mindroom.pipeline.attachments import TurnInput, read_attachment
from mindroom.pipeline.conversation import ConversationState
from mindroom.pipeline.file_text import ReadSlots
from mindroom.pipeline.presence import REQUESTER_KEY, Presence
from mindroom.pipeline.routing import Route, RouteKind, route_handoff
from mindroom.pipeline.turns import TeamSpec, TurnPlan, answer_thread, plan_turn
from mindroom.sessions.compaction import Compactor
from mindroom.sessions.keeper import SessionKeeper
from mindroom.sessions.transcripts import TranscriptIndexer
from mindroom.speakers import who
from mindroom.store.ledger import Ledger

logger = logging.getLogger(__name__)


OVERFLOW_NOTICE = (
    "ℹ️ This conversation grew too long for the model, even summarized: it continues in a "
    "fresh session. What mattered is kept in memory."
)
CORRUPT_NOTICE = (
    "ℹ️ The stored history of this conversation could not be read: it continues in a fresh "
    "session. What mattered is kept in memory."
)


async def _post_early(writer: ReplyWriter, text: str) -> None:
    """Post the finished answer before the turn's bookkeeping (Agno's session save), which
    starts once the homeserver is handing the answer out (:meth:`ReplyWriter.delivered`). A
    failure is logged only: the turn's end posts it again (:meth:`Answerer._turn`), and says
    why."""
    try:
        await writer.finish(text)
    except Exception:
        logger.warning("cannot post the answer to %s yet", writer.reply_to, exc_info=True)
        return
    await writer.delivered()


class Answerer:
    """Answers routed messages; one per bot."""

    def __init__(
        self,
        *,
        config: Callable[[], Config],
        presence: Presence,
        ledger: Ledger,
        state: ConversationState,
        runtime: AgentRuntime,
        flush: FlushWorker,
        run_command: Callable[[IncomingMessage], Awaitable[None]],
    ) -> None:
        self._config = config  # read at every use: a hot reload applies at the next step
        self._presence = presence
        self._ledger = ledger
        self._state = state
        self._runtime = runtime
        self._flush = flush
        self._run_command = run_command
        self.running = Running()  # the answers running, to end them (mindroom.app.running)
        self._reads = (
            ReadSlots()
        )  # files read at once: the others queue (mindroom.pipeline.file_text)
        memories = runtime.memories
        self._transcripts = (
            TranscriptIndexer(config, runtime, memories, presence.session_audience)
            if memories is not None
            else None
        )
        compactor = Compactor(config, ledger, runtime, flush, self._compacted)
        self.sessions = SessionKeeper(config, ledger, compactor, self._session_ended)

    @property
    def gate(self) -> ErasureGate:
        """The bot's gate against forget-me (:mod:`mindroom.people.erasure`)."""
        return self._runtime.gate

    async def handle(
        self,
        message: IncomingMessage,
        route: Route,
        requester: str,
        key: str | None = None,
        lead: str | None = None,
    ) -> None:
        """Produce every answer ``route`` asks for, then mark the event done in the ledger.

        ``requester`` is the person the answers are for: the message's sender, or for a
        hand-off the person whose message started the chain. ``key`` is the ledger row when
        it is not the message's (a hand-over from another process), ``lead`` the account its
        row is filed under (:mod:`mindroom.app.running`).
        """
        status, started = "done", time.monotonic()
        answered: tuple[str, ...] = ()
        # a forget-me waits for this whole answer, its ledger row included, and one that
        # runs now holds it back (mindroom.people.erasure)
        async with self.gate.working():
            try:
                with self.running.leading(lead):
                    if route.command:
                        await self._run_command(message)
                        answered = (lead,) if lead else ()
                    else:
                        responders = route.responders
                        if route.ask_router and len(responders) > 1:  # one: chosen already
                            responders = (await self._chosen(message, responders, key),)
                        handed_over = key is not None and key != message.event_id
                        ok, answered = await self._answer_all(
                            message, route, responders, requester, lead, handed_over
                        )
                        status = "done" if ok else "failed"
            except asyncio.CancelledError:
                raise  # left claimed: the next start resumes it
            except Exception:  # the edge of one message: log it, keep the bot running
                status = "failed"
                logger.exception("handling %s in %s failed", message.event_id, message.room_id)
            await self._ledger.finish(key or message.event_id, status, answered)
        METRICS.reply(status, time.monotonic() - started)

    async def _chosen(
        self, message: IncomingMessage, responders: tuple[str, ...], key: str | None
    ) -> str:
        """The one of ``responders`` the router picks for ``message``. A resumed message keeps
        the agent that began answering it before the restart: asked again, the router might
        pick another, and the first one's half-posted answer would be left as it was."""
        if key is not None:  # resumed (or handed over): who began posting its answer
            for name in responders:
                if await self._ledger.reply_parts(message.event_id, name):
                    return name
        return await self._choose(message, responders)

    async def _answer_all(
        self,
        message: IncomingMessage,
        route: Route,
        responders: tuple[str, ...],
        requester: str,
        lead: str | None,
        handed_over: bool = False,
    ) -> tuple[bool, tuple[str, ...]]:
        """Every responder answers, concurrently: whether all of them did, and who answered
        here (an ad-hoc team as its members joined with " + "; a failed answer counts, the
        ledger row's status says how it went). (A message resumed here skips the answers it
        handed over to other processes before.)"""
        config = self._config()
        agents = tuple(r for r in responders if r in config.agents)
        answers: list[tuple[str, TeamSpec | None]]
        if route.kind is RouteKind.MENTIONED and len(agents) > 1:
            # several agents named: one team answer, posted by the first in config order
            team = TeamSpec.ad_hoc(config, agents)
            answers = [(team.members[0], team)]
            answers += [(r, None) for r in responders if r not in agents]
        else:
            answers = [(r, None) for r in responders]
        if self._presence.leased and not handed_over:  # what was handed over is not ours
            answers = [
                (n, t)
                for n, t in answers
                if not await self._ledger.is_handled(handover_key(message.event_id, n))
            ]
        elsewhere = [name for name, _ in answers if not self._presence.runs(name)]
        for name in elsewhere:  # run by another process: it answers
            if await self._presence.hand_over(message, route, name, requester):
                logger.info("%s runs in another process: handed %s over", name, message.event_id)
                answers = [(n, t) for n, t in answers if n != name]
        async with asyncio.TaskGroup() as group:  # siblings are owned and awaited together
            tasks = [
                group.create_task(self._answer_guarded(name, message, route, requester, team, lead))
                for name, team in answers
            ]
        who = tuple(" + ".join(team.members) if team else name for name, team in answers)
        return all(task.result() for task in tasks), who

    async def _answer_guarded(
        self,
        agent: str,
        message: IncomingMessage,
        route: Route,
        requester: str,
        team: TeamSpec | None,
        lead: str | None,
    ) -> bool:
        """One agent's answer; its failure is logged and does not cancel its siblings."""
        with self.running.answering(agent, lead) as task:
            try:
                await self.answer(agent, message, route, requester, team)
                return True
            except asyncio.CancelledError:
                if self.running.moved(task):  # it runs in another process now: that one answers
                    task.uncancel()
                    await self._presence.hand_over(message, route, agent, requester)
                    logger.info("%s moved while answering %s: handed over", agent, message.event_id)
                    return True
                if not self.running.interrupted(task):
                    raise  # shutdown: left claimed, the next start resumes it
                task.uncancel()
                logger.info("%s was removed while answering %s", agent, message.event_id)
                return False
            except Exception:
                logger.exception(
                    "%s could not answer %s in %s", agent, message.event_id, message.room_id
                )
                return False

    async def interrupt(self, agent: str) -> None:
        """End ``agent``'s running answers (it was removed from the config): each message is
        finished with what was written so far and a note, never left streaming."""
        await self.running.interrupt(agent)

    async def _choose(self, message: IncomingMessage, candidates: tuple[str, ...]) -> str:
        config = self._config()
        members: dict[str, AgentConfig | TeamConfig] = {**config.agents, **config.teams}
        roles = [(name, members[name].role) for name in candidates if name in members]
        recent = self._state.recent(message.room_id)[:-1]
        model = self._runtime.model(config.router_model)
        return await choose_or_fall_back(model, roles, recent, message.body, message.event_id)

    async def plan(
        self,
        agent: str,
        message: IncomingMessage,
        route: Route,
        requester: str,
        team: TeamSpec | None = None,
    ) -> TurnPlan:
        """The :class:`TurnPlan` for ``agent`` answering ``message`` for ``requester``."""
        config = self._config()
        direct = self._presence.is_direct(message.room_id)
        root = answer_thread(
            config,
            agent,
            message.thread_root,
            message.event_id,
            direct=direct,
            threadable=message.threadable,
        )
        generation = await self._ledger.session_generation(message.room_id, root)
        return plan_turn(
            config,
            agent=agent,
            route=route,
            room_id=message.room_id,
            event_id=message.event_id,
            thread_root=message.thread_root,
            requester=requester,
            room_humans=self._presence.room_humans(message.room_id),
            audience=self._presence.audience(message.room_id, requester),
            team=team,
            generation=generation,
            direct=direct,
            threadable=message.threadable,
        )

    def _people(self, room_id: str, sender: str) -> tuple[Person, ...]:
        """The people of ``room_id`` (the sender first) with their display names there."""
        members = sorted(self._presence.room_humans(room_id) - {sender})
        return tuple(
            Person(user_id, self._presence.display_name(room_id, user_id))
            for user_id in [sender, *members]
        )

    async def answer(
        self,
        agent: str,
        message: IncomingMessage,
        route: Route,
        requester: str,
        team: TeamSpec | None = None,
    ) -> None:
        """``agent``'s account answers ``message`` as its :class:`TurnPlan` says."""
        try:
            account = self._presence.account(agent)
        except KeyError:
            logger.info("%s is no longer configured; not answering %s", agent, message.event_id)
            return
        plan = await self.plan(agent, message, route, requester, team)
        start = await self.sessions.begin(
            plan,
            direct=self._presence.is_direct(plan.room_id),
            room_keys=self._presence.room_names(plan.room_id),
        )
        book_session = start.session_id
        session_id, carried = await self.sessions.prepare(plan, book_session, message.body)
        carried = "\n\n".join(t for t in (carried, self.sessions.fresh_note(start)) if t)
        speaker = who(self._presence.display_name(plan.room_id, message.sender), message.sender)
        given = await self._given(plan, account, message, agent)
        if given.problem is not None:
            return
        request = TurnRequest(
            plan.agent,
            session_id,
            plan.requester,
            f"{speaker}: {given.text}" if plan.group else given.text,
            carried,
            plan.private_recall,
            trigger=plan.reply_to,
            speaker=speaker,
            query=message.body or (message.attachment.name if message.attachment else ""),
            images=given.images,
            people=self._people(plan.room_id, message.sender),
            room=plan.audience,
        )
        writer = ReplyWriter(
            account,
            plan.room_id,
            thread_root=plan.thread_root,
            reply_to=plan.reply_to,
            agent=plan.agent,
            posted=self._ledger,  # a resumed answer edits what an earlier run posted
            mentions=lambda text: self._meant(plan, account.user_id, text),
            pacing=StreamPacing(*self._config().agent_stream_pacing(plan.agent)),
        )
        if plan.thread_root == message.event_id:  # a new thread: we know everyone in it
            self._state.set_thread_senders(
                plan.room_id, plan.thread_root, {message.sender, account.user_id}
            )
        await self._flush.prompted(plan.owner, session_id)
        working = await self._react(plan, account, "⏳")
        writer.begin()  # its ledger record is written while the turn runs
        async with account.typing(plan.room_id), writer.interruptible():
            request, book_session, result = await self._turn(
                plan, request, book_session, writer, account
            )
        await self.sessions.finished(plan, book_session, result)
        members = plan.team.members if plan.team else ()
        if result.ok:  # the session is marked for the flush before anything else is sent
            await self._flush.turn_finished(
                plan.owner, request.session_id, plan.scope_requester, members, request.room
            )
        await account.mark_read(plan.room_id, plan.reply_to, plan.thread_root)
        if working is not None:
            await account.redact(plan.room_id, working, "answered")
        if not result.ok:
            await self._failed(plan, account, result, agent)
            return
        if self._transcripts is not None:  # past conversations as a memory source
            self._spawn_held(
                partial(
                    self._transcripts.turn_finished,
                    plan.owner,
                    request.session_id,
                    plan.scope_requester,
                    members,
                ),
                f"index-session:{request.session_id}",
            )
        if plan.team is None:
            await self._hand_off(plan, account, result.text, writer.event_ids[-1])

    async def _turn(
        self,
        plan: TurnPlan,
        request: TurnRequest,
        book_session: str,
        writer: ReplyWriter,
        account: MatrixAccount,
    ) -> tuple[TurnRequest, str, TurnResult]:
        """Run the turn and post its answer; a history too long or unreadable is recovered
        from once (a fresh session): the request, book session and result that answered."""
        result = await self._run(plan, request, writer)
        if not result.ok and not result.text.strip() and (result.overflow or result.corrupt):
            request, book_session, result = await self._recover(
                plan, request, book_session, result, writer, account
            )
        if result.text.strip():  # posted already when streamed (unless it grew since)
            await writer.finish(result.text)
        return request, book_session, result

    async def _given(
        self, plan: TurnPlan, account: MatrixAccount, message: IncomingMessage, agent: str
    ) -> TurnInput:
        """What the turn is given: the message's text, and for a file what was read of it; a
        notice says why a file could not be read (``problem``: no turn) or was cut."""
        if message.attachment is None:
            return TurnInput(message.body)
        config = self._config()
        given = await read_attachment(
            account,
            message.attachment,
            message.body,
            config.media,
            self._reads,
            speech=config.speech_to_text,
        )
        said = given.problem or given.cut
        if said is not None:
            notice = notice_content(said, thread_root=plan.thread_root, reply_to=plan.reply_to)
            await account.send(plan.room_id, notice, f"mindroom-file-{plan.reply_to}-{agent}")
        return given

    async def _failed(
        self, plan: TurnPlan, account: MatrixAccount, result: TurnResult, agent: str
    ) -> None:
        """A turn that failed: the ⚠️ reaction (where configured) and a notice saying why."""
        await self._react(plan, account, "⚠️")
        notice = notice_content(
            f"⚠️ {result.error}", thread_root=plan.thread_root, reply_to=plan.reply_to
        )
        await account.send(plan.room_id, notice, f"mindroom-error-{plan.reply_to}-{agent}")

    def _meant(self, plan: TurnPlan, own: str, text: str) -> list[str]:
        """Who an answer means (``m.mentions``): the agents it names, for a hand-off; else
        the person it answers. Never the whole thread."""
        others = [i for i in self._presence.identities() if i.user_id != own]
        names = set(named_agents(text, others))
        return [i.user_id for i in others if i.name in names] or [plan.requester]

    async def _react(self, plan: TurnPlan, account: MatrixAccount, key: str) -> str | None:
        """A status reaction on the message answered, where configured (``status_reactions``)."""
        if plan.agent not in self._config().agents:
            return None
        if not self._config().agent_status_reactions(plan.agent):
            return None
        txn = f"mindroom-react-{plan.reply_to}-{plan.agent}-{ord(key[0])}"
        return await account.react(plan.room_id, plan.reply_to, key, txn)

    async def _run(self, plan: TurnPlan, request: TurnRequest, writer: ReplyWriter) -> TurnResult:
        if plan.team is not None:
            return await self._runtime.run_team_turn(plan.team, request)
        if not plan.streaming:
            return await self._runtime.run_turn(request)
        return await self._runtime.run_turn(
            request, on_text=writer.update, on_done=partial(_post_early, writer)
        )

    async def _recover(
        self,
        plan: TurnPlan,
        request: TurnRequest,
        book_session: str,
        result: TurnResult,
        writer: ReplyWriter,
        account: MatrixAccount,
    ) -> tuple[TurnRequest, str, TurnResult]:
        """A turn the model refused as too long, or whose history is corrupt: compact once and
        retry in the same session (overflow, agents only); if that does not do, continue in a
        fresh session with a notice, and retry there."""
        if result.overflow and plan.team is None:
            record = await self.sessions.book.get(plan.conversation)
            compacted = await self.sessions.compact(record, overflow=True) if record else None
            if compacted is not None:
                logger.info("%s: the prompt overflowed; compacted, retrying", plan.owner)
                request = dataclasses.replace(
                    request, session_id=compacted.session_id, carried=compacted.carried
                )
                result = await self._run(plan, request, writer)
                if result.ok or result.text.strip() or not result.overflow:
                    return request, book_session, result
        reason = "context overflow" if result.overflow else "unreadable history"
        fresh = await self.sessions.rotate(plan, reason)
        if fresh is None:
            return request, book_session, result
        notice = OVERFLOW_NOTICE if result.overflow else CORRUPT_NOTICE
        content = notice_content(notice, thread_root=plan.thread_root, reply_to=plan.reply_to)
        await account.send(plan.room_id, content, f"mindroom-rotated-{plan.reply_to}-{plan.agent}")
        request = dataclasses.replace(request, session_id=fresh.session_id, carried="")
        return request, fresh.session_id, await self._run(plan, request, writer)

    async def _session_ended(self, plan: TurnPlan, ended: str) -> None:
        """A conversation left session ``ended``: what it still holds goes to memory now (and
        to the session index), in the background."""
        members = plan.team.members if plan.team else ()
        session_id, _, _ = await self.sessions.compactor.current(ended)
        if not members:
            await self._flush.flush_now(plan.owner, session_id, plan.scope_requester)
        self._index_rest(plan.owner, session_id, plan.scope_requester, members)

    async def _compacted(self, agent: str, left: str, requester: str | None) -> None:
        self._index_rest(agent, left, requester, ())

    def _index_rest(
        self, owner: str, session_id: str, requester: str | None, members: tuple[str, ...]
    ) -> None:
        if self._transcripts is not None:
            self._spawn_held(
                partial(self._transcripts.sync, owner, session_id, requester, members, final=True),
                f"index-session:{session_id}",
            )

    def _spawn_held(self, work: Callable[[], Awaitable[object]], name: str) -> None:
        """Run ``work`` (the indexing of a session) as a job that, like an answer, holds the
        gate against forget-me: it reads a session and writes what it read elsewhere."""

        async def held() -> None:
            async with self.gate.working():
                await work()

        self._presence.spawn(held(), name)

    async def _hand_off(
        self, plan: TurnPlan, account: MatrixAccount, text: str, reply_event_id: str
    ) -> None:
        """Let agents named in the finished answer take over, for the same person, capped."""
        config = self._config()
        hops = self._state.count_agent_reply((plan.room_id, plan.thread_root))
        route = route_handoff(
            text,
            from_agent=plan.agent,
            room_agents=self._presence.room_agents(plan.room_id),
            identities=self._presence.identities(),
            hops=hops,
            max_hops=config.router.max_agent_hops,
        )
        if route.kind is RouteKind.HANDOFF_CAPPED:
            logger.info("not handing off from %s in %s: %s", plan.agent, plan.room_id, route.reason)
        if route.kind is not RouteKind.HANDOFF:
            return
        handoff = IncomingMessage(
            event_id=reply_event_id,
            room_id=plan.room_id,
            sender=account.user_id,
            body=text,
            thread_root=plan.thread_root,
            timestamp_ms=int(time.time() * 1000),
        )
        self._state.first_sight(reply_event_id)
        source = {**message_source(handoff), REQUESTER_KEY: plan.requester}
        if await self._ledger.claim(
            reply_event_id, plan.room_id, route.responders, source, lead=plan.agent
        ):
            logger.info("%s hands off to %s", plan.agent, ", ".join(route.responders))
            self._presence.spawn(
                self.handle(handoff, route, plan.requester, lead=plan.agent),
                f"handoff:{reply_event_id}",
            )
