"""Forget-me across processes on one PostgreSQL database (mindroom.cluster.erasure).

Each "process" here is what one mindroom process has: its own erasure gate and its own
ClusterErasure, on a connection of its own to a real PostgreSQL database. The work is held open
by the test, so every wait is on a state, never on time."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import nio
import pytest

from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from mindroom.cluster.erasure import LOCK_KEY, ClusterErasure
from mindroom.errors import ErasureBusy
from mindroom.memory.private import requester_key
from mindroom.people.erasure import ErasureGate
from mindroom.store.database import Database
from tests.support.dashboard import start_dashboard
from tests.support.harness import BotHarness, CredentialCache, Human, config_text, joined
from tests.support.postgres import PostgresServer
from tests.support.scripted_model import ScriptedModel, last_user_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.asyncio]

POLL_S = 0.05  # a quick look: the tests wait for its outcome, not for its period


class Process:
    """One process's gate and its part in the processes' rule."""

    def __init__(self, url: str, *, lock_timeout_s: float = 60.0) -> None:
        self.gate = ErasureGate()
        self.let_go_calls = 0
        self.others = ClusterErasure(
            url, self.gate, self._let_go, poll_s=POLL_S, lock_timeout_s=lock_timeout_s
        )

    async def _let_go(self) -> None:
        self.let_go_calls += 1

    @contextlib.asynccontextmanager
    async def erasing(self) -> AsyncIterator[None]:
        """As AgentRuntime.erasing: this process's gate, then the others."""
        async with self.gate.erasing(), self.others.erasing():
            yield


@contextlib.asynccontextmanager
async def processes(url: str, count: int, **options: float) -> AsyncIterator[list[Process]]:
    started = [Process(url, **options) for _ in range(count)]
    try:
        for process in started:
            await process.others.start()
        yield started
    finally:
        for process in started:
            await process.others.close()


async def holders(url: str) -> list[tuple[int, str, bool]]:
    """(backend pid, mode, granted) of every hold on the erasure lock in ``url``'s database."""
    db = await Database.open(url, [])
    try:
        rows = await (
            await db.query(
                "SELECT pid, mode, granted FROM pg_locks WHERE locktype = 'advisory'"
                " AND objid = ? AND database = (SELECT oid FROM pg_database"
                " WHERE datname = current_database())",
                (LOCK_KEY & 0xFFFF_FFFF,),
            )
        ).fetchall()
    finally:
        await db.close()
    return [(row.pid, row.mode, row.granted) for row in rows]


def held_in(
    block: Callable[[], contextlib.AbstractAsyncContextManager[None]],
) -> tuple[asyncio.Task[None], asyncio.Event, asyncio.Event]:
    """A task inside ``block()``: it is inside once the first event is set, and leaves once the
    second is."""
    inside, leave = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with block():
            inside.set()
            await leave.wait()

    return asyncio.create_task(hold()), inside, leave


def held_open(gate: ErasureGate) -> tuple[asyncio.Task[None], asyncio.Event, asyncio.Event]:
    """Work on ``gate``, held open."""
    return held_in(gate.working)


def erasure(process: Process) -> tuple[asyncio.Task[None], asyncio.Event, asyncio.Event]:
    """An erasure in ``process``, held open while it erases."""
    return held_in(process.erasing)


async def erase_while_working(a: Process, b: Process) -> tuple[asyncio.Task[None], asyncio.Event]:
    """An erasure in ``a`` while ``b`` has work running: ``b`` holds still and lets nothing
    go until its work ended, and only then does the erasure run. The erasure, running, and
    the event that ends it."""
    work, begun, end = held_open(b.gate)
    await begun.wait()
    let_go = b.let_go_calls
    erasing, entered, leave = erasure(a)
    # b saw a's erasure waiting and waits for its own work to end (new work queues)
    await wait_until(lambda: b.gate.erasure_waiting, "b holding still for a")
    assert not entered.is_set()  # b's answer is still being written
    assert b.let_go_calls == let_go
    end.set()
    await work
    await wait_until(entered.is_set, "a's erasure running")  # the control: then it runs
    return erasing, leave


async def test_an_erasure_waits_for_another_processs_work_and_holds_its_new_work(
    postgres: PostgresServer,
) -> None:
    url = postgres.database()
    async with processes(url, 2) as (a, b):
        erasing, leave = await erase_while_working(a, b)
        assert b.let_go_calls == 1  # b closed its people's stores before a erased

        later, later_begun, later_end = held_open(b.gate)  # b's next answer, during the erasure
        await wait_until(lambda: b.gate.held_back == 1, "b's new work held back")
        assert not later_begun.is_set()

        leave.set()
        await erasing
        await wait_until(later_begun.is_set, "b's new work running after the erasure")
        later_end.set()
        await later
        assert b.others.held_for_others == 1
        assert a.others.held_for_others == 0  # its own erasure is not another's
        granted = [(mode, ok) for _, mode, ok in await holders(url)]
        assert granted == [("ShareLock", True)] * 2  # both hold it shared again


async def test_a_process_that_does_not_hold_still_makes_the_erasure_give_up_erasing_nothing(
    postgres: PostgresServer,
) -> None:
    url = postgres.database()
    async with processes(url, 2, lock_timeout_s=0.5) as (a, b):
        assert b.others._watcher is not None
        b.others._watcher.cancel()  # hung: it holds the lock and never looks again
        ran = False
        with pytest.raises(ErasureBusy, match="nothing was erased"):
            async with a.erasing():
                ran = True
        assert not ran
        assert not a.gate.erasure_waiting
        assert a.gate.working_now == 0
        granted = sorted((mode, ok) for _, mode, ok in await holders(url))
        assert granted == [("ShareLock", True)] * 2  # a holds it shared again

        await b.others.close()  # the hung process ends: its connection releases the lock
        async with a.erasing():  # the control: now the erasure runs
            ran = True
        assert ran


async def test_a_process_whose_connection_was_lost_holds_still_until_it_holds_the_lock_again(
    postgres: PostgresServer,
) -> None:
    """Its lock went with the connection: it takes it again holding its own gate (its running
    work ends first, new work waits), and then holds still for erasures as before."""
    url = postgres.database()
    async with processes(url, 2) as (a, b):
        work, begun, end = held_open(b.gate)  # an answer running when the connection drops
        await begun.wait()
        lost = await (await b.others._database.query("SELECT pg_backend_pid() AS pid")).fetchone()
        admin = await Database.open(url, [])
        try:
            await admin.query("SELECT pg_terminate_backend(?)", (lost.pid,))
        finally:
            await admin.close()

        async def held_again() -> bool:
            now = await holders(url)
            return len(now) == 2 and lost.pid not in {pid for pid, _, _ in now}

        await wait_until(lambda: b.gate.erasure_waiting, "b taking the lock again, held still")
        later, later_begun, later_end = held_open(b.gate)
        await wait_until(lambda: b.gate.held_back == 1, "b's new work waits")
        assert not later_begun.is_set()
        assert not await held_again()  # not before its running work ended
        end.set()
        await work
        await wait_until(held_again, "b holding the lock on its new connection")
        await wait_until(later_begun.is_set, "b's new work running")
        later_end.set()
        await later

        # and it holds still for an erasure as before
        erasing, leave = await erase_while_working(a, b)
        leave.set()
        await erasing


async def test_a_process_goes_on_once_the_erasure_it_held_still_for_gave_up(
    postgres: PostgresServer,
) -> None:
    """b's long answer keeps a's erasure waiting past its limit: a gives up, and b's new work
    does not wait for that long answer to end."""
    async with processes(postgres.database(), 2, lock_timeout_s=0.5) as (a, b):
        work, begun, end = held_open(b.gate)
        await begun.wait()
        with pytest.raises(ErasureBusy):
            async with a.erasing():
                pass
        later, later_begun, later_end = held_open(b.gate)
        await wait_until(later_begun.is_set, "b's new work running beside its long answer")
        assert not work.done()
        assert b.let_go_calls == 0  # it never held still: its answer was still running
        end.set()
        later_end.set()
        await asyncio.gather(work, later)


async def test_two_erasures_in_two_processes_run_one_after_the_other(
    postgres: PostgresServer,
) -> None:
    async with processes(postgres.database(), 3) as (a, b, c):
        first, first_in, first_out = erasure(a)
        await wait_until(first_in.is_set, "a's erasure running")
        assert b.let_go_calls == 1
        assert c.let_go_calls == 1  # both held still for it

        second, second_in, second_out = erasure(b)
        await wait_until(lambda: b.gate.erasure_waiting, "b's erasure waiting")
        assert not second_in.is_set()  # a's is running: b's waits for it

        first_out.set()  # (a takes its share again once it can: maybe only after b's erasure)
        await wait_until(second_in.is_set, "b's erasure running after a's")
        assert c.let_go_calls == 2  # c held still again
        assert not c.gate.working_now
        second_out.set()
        await asyncio.gather(first, second)


# -- two mindroom processes: forget-me in one while the other answers the person ---------------


@pytest.mark.synapse
@pytest.mark.slow
async def test_forget_me_in_one_process_waits_for_the_answer_another_process_is_writing(
    synapse: EmbeddedHomeserver,
    bot: BotHarness,
    credential_cache: CredentialCache,
    human: Human,
    model: ScriptedModel,
    postgres: PostgresServer,
) -> None:
    """The companion runs in the other process and is still answering Alice when she presses
    forget-me on the dashboard of this one: the erasure waits for that answer, and then nothing
    of hers is left anywhere, the words the answer stored included."""
    from tests.integration.test_cluster import process, wait_holders
    from tests.integration.test_forget_me_postgresql import rows_holding
    from tests.integration.test_person_forget_pages import (
        companion,
        csrf_of,
        holding,
        holds,
        say,
        signed_in_as,
    )

    alice, url = human, postgres.database()
    model.set_handler(companion)
    bot.write_config(
        config_text(
            model.base_url,
            {"mind": {"private": {"per": "user"}, "streaming": False}},
            memory={"auto_flush": {"enabled": False}, "maintenance": {"enabled": False}},
            storage={"database": url, "failover_seconds": 3},
        )
    )
    other = process(synapse, bot.storage, credential_cache, "other", "mind")
    release = threading.Event()
    try:
        other.start()
        await other.wait_running(90)
        await bot.start()
        assert other.proc is not None
        await wait_holders(url, {"mind": other.proc.pid})  # the companion runs over there
        dash = await start_dashboard(bot)
        try:
            mind = f"@mindroom_mind:{synapse.server_name}"  # in the other process
            created = await alice.client.room_create(invite=[mind], is_direct=True)
            assert isinstance(created, nio.RoomCreateResponse), created
            room_id = created.room_id
            await alice.wait_for(joined(mind, room_id), timeout=30)
            await say(alice, room_id, "please remember: earlyword5510")
            alice_dir = bot.storage / "private_instances" / requester_key(alice.user_id)
            assert holds(alice_dir, b"earlyword5510")  # the control: her folder holds her words
            early = await asyncio.to_thread(rows_holding, url, {"early": "earlyword5510"})
            assert early["early"]  # and so do her sessions' tables

            model.set_handler(holding("heldword7720", release))
            asked = await alice.send(room_id, "please keep heldword7720 in mind")
            await wait_until(
                lambda: any("heldword7720" in last_user_text(r) for r in model.requests),
                "the companion's model was asked, in the other process",
            )

            session, home = await signed_in_as(dash, alice.user_id)
            async with session:
                base = f"http://127.0.0.1:{dash.port}"
                question = await (
                    await session.post(f"{base}/me/forget", data={"csrf": csrf_of(home)})
                ).text()
                confirm = asyncio.create_task(
                    session.post(
                        f"{base}/me/forget/confirm",
                        data={"csrf": csrf_of(question), "confirm": "yes"},
                    )
                )

                async def erasure_waiting() -> bool:
                    return any(
                        mode == "ExclusiveLock" and not ok for _, mode, ok in await holders(url)
                    )

                await wait_until(erasure_waiting, "forget-me waiting for the other process")
                assert not confirm.done()  # it waits for the answer over there
                assert holds(alice_dir, b"earlyword5510")  # nothing erased while it waits
                release.set()
                done = await confirm
                assert done.status == 200, await done.text()
            await alice.wait_for_reply(room_id, asked, timeout=60)
            await bot.settle(alice, room_id)
        finally:
            await dash.stop()
    finally:
        release.set()  # a failing test leaves no model thread waiting
        if other.proc is not None and other.proc.poll() is None:
            await other.stop()

    left = [
        p.relative_to(bot.storage).as_posix()
        for p in bot.storage.rglob("*")
        if p.is_file() and (b"heldword7720" in p.read_bytes() or b"earlyword5510" in p.read_bytes())
    ]
    assert left == [], left
    marks = {"held": "heldword7720", "early": "earlyword5510"}
    in_tables = await asyncio.to_thread(rows_holding, url, marks)  # sessions live there
    assert in_tables == {"held": [], "early": []}, in_tables


async def test_an_erasure_that_loses_its_connection_says_so(
    postgres: PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = postgres.database()
    async with processes(url, 2) as (a, _b):
        async with a.erasing():
            own = await (
                await a.others._database.query("SELECT pg_backend_pid() AS pid")
            ).fetchone()
            admin = await Database.open(url, [])
            try:
                await admin.query("SELECT pg_terminate_backend(?)", (own.pid,))
            finally:
                await admin.close()
        lost = [r for r in caplog.records if "lock was lost while erasing" in r.getMessage()]
        assert len(lost) == 1

        caplog.clear()
        async with a.erasing():  # the control: an erasure that keeps it says nothing
            pass
        assert not [r for r in caplog.records if "lock was lost" in r.getMessage()]


async def test_memory_forget_on_the_command_line_waits_for_the_processes_on_the_database(
    postgres: PostgresServer, tmp_path: Path, model: ScriptedModel
) -> None:
    """``mindroom memory forget --user`` (a process of its own) holds every mindroom process on
    the database still, as forget-me on /me does: here one still writing an answer."""
    url = postgres.database()
    storage = tmp_path / "storage"
    storage.mkdir()
    config = storage / "config.yaml"
    config.write_text(
        config_text(model.base_url, {"general": {"rooms": ["r"]}}, storage={"database": url})
    )
    async with processes(url, 1) as (b,):
        work, begun, end = held_open(b.gate)
        await begun.wait()
        forget = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "mindroom",
            "memory",
            "forget",
            "--user",
            "@alice:localhost",
            "--yes",
            "--config",
            str(config),
            cwd=storage,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            await wait_until(lambda: b.gate.erasure_waiting, "b holding still for the command")
            assert forget.returncode is None  # it waits for b's answer
            assert b.let_go_calls == 0
        finally:
            end.set()
            await work
        out, err = await forget.communicate()
    assert forget.returncode == 0, err.decode()
    assert "forgot @alice:localhost" in out.decode()
    assert "waiting for the mindroom processes" in err.decode()
    assert b.let_go_calls == 1
