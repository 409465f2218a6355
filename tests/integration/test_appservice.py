"""Appservice mode against a real Synapse that loads mindroom's registration.

One Synapse for the module, started with the registration file ``write_registration`` makes;
each test's storage gets the same tokens. The agents act through the ``as_token`` (no login,
no device, no sync loop) and hear their rooms through the transaction endpoint.
"""

from __future__ import annotations

import asyncio
import functools
import json
import shutil
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from unittest.mock import ANY

import aiohttp
import nio
import pytest
import pytest_asyncio
import yaml
from aiohttp import web

from mindroom.adapters.matrix import appservice
from mindroom.adapters.matrix.appservice import (
    REGISTRATION_FILE,
    TOKENS_FILE,
    appservice_tokens,
    write_registration,
)
from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from mindroom.cli.main import main
from mindroom.config.schema import AppserviceConfig
from mindroom.dashboard.ops import health
from mindroom.errors import MatrixError
from mindroom.store.ledger import Ledger
from tests.integration.test_cluster import (
    alpha_and_beta,
    alpha_and_beta_config,
    pair,
    reload_adds_and_removes,
    share_and_fail_over,
)
from tests.support.harness import (
    BotHarness,
    CredentialCache,
    Human,
    config_text,
    joined,
    relation,
    unique,
)
from tests.support.network import free_port
from tests.support.postgres import PostgresServer
from tests.support.scripted_model import ScriptedModel, last_user_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


class Service:
    """The module's Synapse with mindroom's registration, and the tokens and port it names."""

    def __init__(self, homeserver: EmbeddedHomeserver, data_dir: Path, port: int) -> None:
        self.homeserver, self.data_dir, self.port = homeserver, data_dir, port

    def install(self, storage: Path) -> None:
        """Give ``storage`` the registration's tokens (as one mindroom install would have)."""
        target = storage / "mindroom_data"
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.data_dir / TOKENS_FILE, target / TOKENS_FILE)

    def matrix(self) -> dict:
        return {"mode": "appservice", "appservice": {"port": self.port}}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    # the registration as a person makes it: `mindroom appservice registration`
    folder = tmp_path_factory.mktemp("as-mindroom")
    port = free_port()
    config = {"agents": {}, "matrix": {"mode": "appservice", "appservice": {"port": port}}}
    (folder / "config.yaml").write_text(json.dumps(config))
    assert main(["appservice", "registration", "--config", str(folder / "config.yaml")]) == 0
    data_dir = folder / "mindroom_data"
    registration = data_dir / REGISTRATION_FILE
    homeserver = EmbeddedHomeserver(
        tmp_path_factory.mktemp("as-synapse"), port=0, app_services=(registration,)
    )
    loop = asyncio.new_event_loop()
    loop.run_until_complete(homeserver.start())
    try:
        yield Service(homeserver, data_dir, port)
    finally:
        loop.run_until_complete(homeserver.stop())
        loop.close()


@pytest_asyncio.fixture
async def as_bot(service: Service, tmp_path: Path) -> AsyncIterator[BotHarness]:
    storage = tmp_path / "storage"
    service.install(storage)
    harness = BotHarness(service.homeserver, storage, CredentialCache(tmp_path / "creds.json"))
    yield harness
    await harness.stop()


@pytest_asyncio.fixture
async def person(service: Service) -> AsyncIterator[Human]:
    human = await Human.create(service.homeserver)
    yield human
    await human.close()


class LossyLink:
    """Between the homeserver and mindroom, on the registration's port: passes every request
    on to mindroom's port, except a transaction holding an event ``lose`` picks, which it
    answers 200 itself. The homeserver counts that transaction delivered and mindroom never
    sees it: a transaction the homeserver keeps for good looks the same from mindroom."""

    def __init__(self, service: Service) -> None:
        self.service, self.inner = service, free_port()
        self.lose: Callable[[dict], bool] = lambda event: False
        self.lost: list[dict] = []  # the events it kept from mindroom
        self.passed: dict[str, float] = {}  # event id -> when mindroom took its transaction
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    def matrix(self) -> dict:
        return {"mode": "appservice", "appservice": {"port": self.inner}}

    async def start(self) -> None:
        app = web.Application(client_max_size=32 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._pass)
        self._session = aiohttp.ClientSession()
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.service.port).start()

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def _pass(self, request: web.Request) -> web.Response:
        body = await request.read()
        if request.method == "PUT" and "/transactions/" in request.path:
            events = json.loads(body).get("events") or []
            kept = [event for event in events if self.lose(event)]
            if kept:
                self.lost.extend(kept)
                return web.json_response({})
        assert self._session is not None
        async with self._session.request(
            request.method,
            f"http://127.0.0.1:{self.inner}{request.path_qs}",
            data=body,
            headers={k: v for k, v in request.headers.items() if k.lower() != "host"},
        ) as answer:
            content = await answer.read()
        if answer.status == 200 and request.method == "PUT" and "/transactions/" in request.path:
            taken = time.monotonic()
            for event in json.loads(body).get("events") or []:
                self.passed.setdefault(event.get("event_id", ""), taken)
        return web.Response(status=answer.status, body=content, content_type=answer.content_type)


@pytest_asyncio.fixture
async def lossy(service: Service, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[LossyLink]:
    """A :class:`LossyLink` on the registration's port, and mindroom's catch-up asking every
    half second (instead of every 15 s)."""
    monkeypatch.setattr(appservice, "CATCH_UP_S", 0.5)
    link = LossyLink(service)
    await link.start()
    yield link
    await link.stop()


async def transaction(
    service: Service, txn: str, events: list[dict], token: str | None = None
) -> tuple[int, dict]:
    """PUT a transaction to the running bot's endpoint as the homeserver would."""
    hs_token = token or appservice_tokens(service.data_dir).hs_token
    async with (
        aiohttp.ClientSession() as session,
        session.put(
            f"http://127.0.0.1:{service.port}/_matrix/app/v1/transactions/{txn}",
            json={"events": events},
            headers={"Authorization": f"Bearer {hs_token}"},
        ) as answer,
    ):
        return answer.status, await answer.json()


async def in_room_answering(
    as_bot: BotHarness,
    person: Human,
    model: ScriptedModel,
    service: Service,
    answer: str,
    said: str,
    matrix: dict | None = None,
) -> str:
    """Start mindroom in appservice mode (``matrix``: its settings, default the service's)
    with ``general`` in a new room that ``person`` joins, answering ``answer``; ``person``
    says ``said`` to it first and waits for the answer."""
    room = unique("as")
    model.set_handler(lambda request: answer)
    config = config_text(
        model.base_url, {"general": {"rooms": [room]}}, matrix=matrix or service.matrix()
    )
    room_id = await as_bot.start_in_room(config, room, person)
    first = await person.send(room_id, f"@general {said}")
    await person.wait_for_reply(room_id, first)
    return room_id


def pushed(room_id: str, sender: str, body: str, **extra: object) -> dict:
    """A message event as the homeserver pushes it, mentioning ``general`` (``extra``: more
    content)."""
    return {
        "type": "m.room.message",
        "room_id": room_id,
        "sender": sender,
        "event_id": f"${unique('e')}",
        "origin_server_ts": int(time.time() * 1000),
        "content": {
            "msgtype": "m.text",
            "body": body,
            "m.mentions": {"user_ids": ["@mindroom_general:localhost"]},
            **extra,
        },
    }


async def test_an_agent_answers_through_the_appservice_without_a_login_or_a_sync_loop(
    as_bot: BotHarness, person: Human, model: ScriptedModel, service: Service
) -> None:
    room = unique("as")
    model.set_handler(lambda request: "Hello from the appservice.")
    config = config_text(model.base_url, {"general": {"rooms": [room]}}, matrix=service.matrix())
    room_id = await as_bot.start_in_room(config, room, person)
    asked = await person.send(room_id, "@general hi")
    answer = await person.wait_for_reply(room_id, asked)

    assert as_bot.bot is not None
    data_dir = as_bot.storage / "mindroom_data"
    account = as_bot.bot.account("general")
    assert answer["sender"] == account.user_id == "@mindroom_general:localhost"
    assert "Hello from the appservice." in answer["content"]["body"]
    assert not (data_dir / "credentials.json").exists()  # nobody logged in
    assert not (data_dir / "crypto").exists()  # no device, no key store
    assert not as_bot.bot.tasks.running("sync:general")  # no sync loop
    assert as_bot.bot.tasks.running("memory-flush")  # the control: a loop that does run
    assert as_bot.bot.appservice is not None
    assert as_bot.bot.appservice.server is not None
    assert as_bot.bot.appservice.server.received > 0
    assert health(as_bot.bot) == (True, ANY)  # no sync loop, and healthy all the same


async def test_a_resent_transaction_is_answered_once_and_a_wrong_token_is_refused(
    as_bot: BotHarness, person: Human, model: ScriptedModel, service: Service
) -> None:
    room_id = await in_room_answering(as_bot, person, model, service, "Once.", "first")
    # a message the homeserver never sent: the same transaction twice, as after a lost answer
    event = pushed(room_id, person.user_id, "@general again")
    txn = unique("txn")
    wrong = await transaction(service, txn, [event], token="not-the-hs-token")
    once = await transaction(service, txn, [event])
    twice = await transaction(service, txn, [event])
    await as_bot.settle(person, room_id)

    assert wrong[0] == 403
    assert once == (200, {})
    assert twice == (200, {})
    asked = [r for r in model.requests if "again" in json.dumps(r.get("messages", []))]
    assert len(asked) == 1  # answered once, though delivered twice
    firsts = [r for r in model.requests if "first" in json.dumps(r.get("messages", []))]
    assert firsts  # the control: the live message reached the model through the same path


async def test_an_invite_to_a_direct_message_is_accepted_and_answered_with_the_rooms_state(
    as_bot: BotHarness, person: Human, model: ScriptedModel, service: Service
) -> None:
    model.set_handler(lambda request: "Hi in private.")
    await as_bot.start(
        config_text(model.base_url, {"general": {"rooms": []}}, matrix=service.matrix())
    )
    assert as_bot.bot is not None
    general = as_bot.bot.account("general")
    created = await person.client.room_create(invite=[general.user_id], is_direct=True)
    room_id = created.room_id
    await person.wait_for(joined(general.user_id, room_id))
    asked = await person.send(room_id, "psst")  # no mention: the only agent in a DM answers
    reply = await person.wait_for_reply(room_id, asked)

    assert reply["content"]["body"] == "Hi in private."
    # the room's state came with the join (no sync told it): the person is a member
    assert person.user_id in general.room_members(room_id)
    assert general.only_with(room_id, person.user_id, as_bot.bot.own_user_ids())


async def test_a_message_sent_while_mindroom_was_down_is_answered_once_after_the_restart(
    as_bot: BotHarness, person: Human, model: ScriptedModel, service: Service
) -> None:
    room_id = await in_room_answering(as_bot, person, model, service, "Answered.", "before")
    await as_bot.stop()  # the endpoint is gone: the homeserver keeps what it cannot deliver

    missed = await person.send(room_id, "@general while you were away")
    await as_bot.start()  # its ping makes the homeserver send what it kept, now
    answer = await person.wait_for_reply(room_id, missed, timeout=30)
    await as_bot.settle(person, room_id)

    assert answer["content"]["body"] == "Answered."
    away = [r for r in model.requests if "while you were away" in json.dumps(r["messages"])]
    assert len(away) == 1
    replies = [
        e
        for e in person.events
        if e.get("type") == "m.room.message" and relation(e).get("event_id") == missed
    ]
    assert len(replies) == 1  # answered once


def refused_pushes(service: Service) -> int:
    """How many times the homeserver found the endpoint closed when it pushed a transaction
    (its log; a refused push puts the service in the homeserver's doubling back-off)."""
    log = service.homeserver.log_file.read_text(errors="replace")
    return sum(1 for line in log.splitlines() if "push_bulk" in line and "refused" in line)


async def test_the_homeserver_never_finds_the_endpoint_closed_while_mindroom_starts(
    as_bot: BotHarness, person: Human, model: ScriptedModel, service: Service
) -> None:
    before = refused_pushes(service)
    # the start creates the room and joins it: the homeserver pushes those joins at once
    room_id = await in_room_answering(as_bot, person, model, service, "Up.", "are you there")
    assert refused_pushes(service) == before  # listening before the first join

    # the control: a push while mindroom is down is refused, and the count sees it
    await as_bot.stop()
    await person.send(room_id, "@general nobody home")
    await wait_until(lambda: refused_pushes(service) > before, "a refused push in the log")


async def test_the_registration_names_the_tokens_and_namespace_and_keeps_its_tokens(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "mindroom_data"
    first = write_registration(data_dir, AppserviceConfig(port=9100))
    text = first.read_text()
    again = write_registration(data_dir, AppserviceConfig(port=9101, url="https://as.example"))
    tokens = appservice_tokens(data_dir)

    loaded = yaml.safe_load(again.read_text())
    assert loaded["as_token"] == tokens.as_token  # made once, kept: the homeserver has them
    assert loaded["hs_token"] == tokens.hs_token
    assert f'as_token: "{tokens.as_token}"' in text
    assert loaded["url"] == "https://as.example"
    assert loaded["namespaces"]["users"] == [{"exclusive": True, "regex": "@mindroom_.*"}]
    assert loaded["sender_localpart"] == "mindroom_appservice"
    assert loaded["rate_limited"] is False
    assert first.stat().st_mode & 0o777 == 0o600
    assert (data_dir / TOKENS_FILE).stat().st_mode & 0o777 == 0o600
    (data_dir / TOKENS_FILE).write_text("{not json")
    with pytest.raises(MatrixError, match="unreadable"):  # never silently new tokens
        appservice_tokens(data_dir)


async def test_a_reload_adds_an_agent_that_answers_and_removes_it_in_appservice_mode(
    as_bot: BotHarness, person: Human, model: ScriptedModel, service: Service
) -> None:
    room_id = await in_room_answering(as_bot, person, model, service, "Here.", "hello")
    assert as_bot.bot is not None
    doc = json.loads((as_bot.storage / "config.yaml").read_text())
    room = doc["agents"]["general"]["rooms"][0]
    doc["agents"]["coder"] = {"role": "Writes code.", "rooms": [room]}
    (as_bot.storage / "config.yaml.tmp").write_text(json.dumps(doc))
    (as_bot.storage / "config.yaml.tmp").replace(as_bot.storage / "config.yaml")
    await wait_until(lambda: "coder" in as_bot.bot.agents)
    coder = as_bot.bot.agents["coder"].user_id
    await person.wait_for(joined(coder, room_id))
    asked = await person.send(room_id, "@coder hello", mention=[coder])
    reply = await person.wait_for_reply(room_id, asked)

    del doc["agents"]["coder"]
    (as_bot.storage / "config.yaml.tmp").write_text(json.dumps(doc))
    (as_bot.storage / "config.yaml.tmp").replace(as_bot.storage / "config.yaml")
    await person.wait_for(
        lambda e: (
            e.get("type") == "m.room.member"
            and e.get("state_key") == coder
            and e["content"].get("membership") == "leave"
        )
    )

    assert reply["sender"] == coder == "@mindroom_coder:localhost"
    assert "coder" not in as_bot.bot.agents
    assert not as_bot.bot.tasks.running("sync:coder")


async def test_an_encrypted_room_is_told_once_why_the_appservice_cannot_read_it(
    as_bot: BotHarness, person: Human, model: ScriptedModel, service: Service
) -> None:
    await as_bot.start(
        config_text(model.base_url, {"general": {"rooms": []}}, matrix=service.matrix())
    )
    assert as_bot.bot is not None
    general = as_bot.bot.account("general").user_id
    created = await person.client.room_create(
        invite=[general], is_direct=True, initial_state=[nio.EnableEncryptionBuilder().as_dict()]
    )
    room_id = created.room_id
    await person.wait_for(joined(general, room_id))
    ciphertext = {
        "algorithm": "m.megolm.v1.aes-sha2",
        "ciphertext": "AwgAEnAc",
        "device_id": "D",
        "sender_key": "c2VuZGVy",
        "session_id": "c2Vzc2lvbg",
    }
    for _ in range(2):  # what an encrypting client sends; the agent has no key for it
        sent = await person.client.room_send(room_id, "m.room.encrypted", ciphertext)
        assert isinstance(sent, nio.RoomSendResponse), sent
    notice = await person.wait_for(
        lambda e: (
            e.get("room_id") == room_id
            and e.get("sender") == general
            and e.get("type") == "m.room.message"
        )
    )
    await as_bot.settle(person, room_id)

    assert "application service" in notice["content"]["body"]
    told = [
        e
        for e in person.events
        if e.get("room_id") == room_id
        and e.get("sender") == general
        and e.get("type") == "m.room.message"
        and "encrypted" in e["content"].get("body", "")
    ]
    assert len(told) == 1  # once per room, though two arrived


async def test_an_event_that_fails_is_skipped_and_the_stream_goes_on(
    as_bot: BotHarness, person: Human, model: ScriptedModel, service: Service
) -> None:
    room_id = await in_room_answering(as_bot, person, model, service, "Still here.", "hello")
    # a thread reply whose root this homeserver never saw (federation can deliver one):
    # reading the thread fails; and an event that is not one. Neither may have their
    # transaction refused for ever.
    thread = {"rel_type": "m.thread", "event_id": "$no-such-root"}
    orphan = pushed(room_id, person.user_id, "@general about that", **{"m.relates_to": thread})
    malformed = {**pushed(room_id, person.user_id, "x"), "origin_server_ts": "yesterday"}
    answered = await transaction(service, unique("txn"), [malformed, orphan])
    after = await person.send(room_id, "@general are you there?")
    reply = await person.wait_for_reply(room_id, after)  # the next event still arrives

    assert answered == (200, {})
    assert reply["content"]["body"] == "Still here."


async def test_a_transaction_id_used_again_after_a_restart_is_handled(
    as_bot: BotHarness, person: Human, model: ScriptedModel, service: Service
) -> None:
    room_id = await in_room_answering(as_bot, person, model, service, "Yes.", "hello")

    first = pushed(room_id, person.user_id, "@general first run")
    assert await transaction(service, "1", [first]) == (200, {})
    await as_bot.settle(person, room_id)
    await as_bot.stop()
    await as_bot.start()  # a homeserver restarted meanwhile numbers its transactions from 1
    second = pushed(room_id, person.user_id, "@general second run")
    assert await transaction(service, "1", [second]) == (200, {})
    await as_bot.settle(person, room_id)

    said = [last_user_text(r) for r in model.requests]
    assert sum("first run" in t for t in said) == 1
    assert sum("second run" in t for t in said) == 1  # the reused id did not hide it


async def test_two_appservice_processes_share_the_transactions_and_kill_9_moves_the_agents(
    service: Service,
    tmp_path: Path,
    person: Human,
    model: ScriptedModel,
    postgres: PostgresServer,
) -> None:
    # Both processes listen on the registration's one port (SO_REUSEPORT): the homeserver's
    # transactions reach whichever the kernel picks, and the survivor once one is killed.
    url = postgres.database()
    room = unique("as-cluster")
    release = threading.Event()
    model.set_handler(functools.partial(alpha_and_beta, release))
    storage = tmp_path / "storage"
    service.install(storage)
    (storage / "config.yaml").write_text(
        alpha_and_beta_config(model.base_url, url, room, matrix=service.matrix())
    )
    cache = CredentialCache(tmp_path / "creds.json")
    async with pair(service.homeserver, storage, cache, url, "alpha", "beta") as (one, two):
        sent = await share_and_fail_over(
            one, two, storage, service.homeserver, person, model, url, room, release
        )
    for log in ("one.log", "two.log"):  # no agent logged in or synced: the appservice acted
        assert "appservice listening on" in (storage / log).read_text()
    assert not (storage / "mindroom_data" / "credentials.json").exists()
    ledger = await Ledger.open(url)
    try:
        inbox = ledger.inbox()
        seq_of = {e.get("event_id"): seq for seq, e in await inbox.since(0, 10_000)}
        beta = await inbox.position("@mindroom_beta:localhost")
    finally:
        await ledger.close()
    assert set(sent) <= set(seq_of)  # every message went through the shared inbox
    # beta read on in process one from where two had saved it, past the message sent while
    # two was down
    assert beta is not None
    assert beta >= seq_of[sent[-1]]


async def test_a_reload_adds_an_agent_to_one_of_two_appservice_processes_and_removes_it(
    service: Service,
    tmp_path: Path,
    person: Human,
    model: ScriptedModel,
    postgres: PostgresServer,
) -> None:
    # the new agent's inbox position is taken before its first sync: it answers what is sent
    # to it as soon as it has joined, whichever process the transaction reached
    storage = tmp_path / "storage"
    service.install(storage)
    await reload_adds_and_removes(
        service.homeserver,
        storage,
        CredentialCache(tmp_path / "creds.json"),
        postgres.database(),
        person,
        model,
        matrix=service.matrix(),
    )


def catch_up_of(as_bot: BotHarness) -> appservice.CatchUp:
    """The running bot's catch-up (it runs in appservice mode)."""
    assert as_bot.bot is not None
    assert as_bot.bot.appservice is not None
    catch_up = as_bot.bot.appservice.catch_up
    assert catch_up is not None
    return catch_up


def body_has(text: str) -> Callable[[dict], bool]:
    return lambda event: text in json.dumps(event.get("content") or {})


async def test_a_message_the_homeserver_never_pushed_is_answered_once_by_the_catch_up(
    as_bot: BotHarness,
    person: Human,
    model: ScriptedModel,
    lossy: LossyLink,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the control: the link passes on what it does not lose
    room_id = await in_room_answering(
        as_bot, person, model, lossy.service, "Caught up.", "pushed as usual", lossy.matrix()
    )
    catch_up = catch_up_of(as_bot)
    handed: dict[str, float] = {}  # event id -> when the catch-up handed it on
    take = catch_up.server.take

    async def noting(events: list[dict]) -> bool:
        for event in events:
            handed.setdefault(event["event_id"], time.monotonic())
        return await take(events)

    monkeypatch.setattr(catch_up.server, "take", noting)
    lossy.lose = body_has("lost on the way")
    lost = await person.send(room_id, "@general lost on the way")
    answer = await person.wait_for_reply(room_id, lost, timeout=30)
    rounds = catch_up.rounds
    await wait_until(lambda: catch_up.rounds >= rounds + 3, "three more rounds")
    await as_bot.settle(person, room_id)

    assert [event["event_id"] for event in lossy.lost] == [lost]  # kept from mindroom
    assert answer["content"]["body"] == "Caught up."
    assert lost in handed
    # nothing mindroom had from a transaction was handed on again (an event whose transaction
    # was slower than the catch-up's patience, on a loaded machine, may be: it came later)
    again = [e for e, when in handed.items() if e in lossy.passed and lossy.passed[e] < when]
    assert again == []
    said = [last_user_text(r) for r in model.requests]
    assert sum("lost on the way" in t for t in said) == 1
    assert sum("pushed as usual" in t for t in said) == 1
    replies = [
        e
        for e in person.events
        if e.get("type") == "m.room.message" and relation(e).get("event_id") == lost
    ]
    assert len(replies) == 1


async def test_an_invite_the_homeserver_never_pushed_is_accepted_by_the_catch_up(
    as_bot: BotHarness, person: Human, model: ScriptedModel, lossy: LossyLink
) -> None:
    model.set_handler(lambda request: "Found you.")
    await as_bot.start(
        config_text(model.base_url, {"general": {"rooms": []}}, matrix=lossy.matrix())
    )
    assert as_bot.bot is not None
    general = as_bot.bot.account("general").user_id
    lossy.lose = lambda event: (
        event.get("type") == "m.room.member"
        and event.get("state_key") == general
        and (event.get("content") or {}).get("membership") == "invite"
    )
    created = await person.client.room_create(invite=[general], is_direct=True)
    room_id = created.room_id
    await person.wait_for(joined(general, room_id), timeout=30)
    asked = await person.send(room_id, "psst")
    reply = await person.wait_for_reply(room_id, asked)

    assert [event.get("room_id") for event in lossy.lost] == [room_id]  # kept from mindroom
    assert reply["content"]["body"] == "Found you."
    assert as_bot.bot.account("general").only_with(
        room_id, person.user_id, as_bot.bot.own_user_ids()
    )


async def test_a_lost_message_buried_under_more_events_than_one_answer_holds_is_caught_up(
    as_bot: BotHarness,
    person: Human,
    model: ScriptedModel,
    lossy: LossyLink,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(appservice, "CATCH_UP_S", 3600.0)  # rounds only when this test asks
    monkeypatch.setattr(appservice, "_FIRST_CATCH_UP_S", 3600.0)
    monkeypatch.setattr(appservice, "_IN_FLIGHT_S", 0.0)
    room_id = await in_room_answering(
        as_bot, person, model, lossy.service, "Dug out.", "hello", lossy.matrix()
    )
    catch_up = catch_up_of(as_bot)
    await catch_up.round()  # from here on
    lossy.lose = body_has("under the pile")
    lost = await person.send(room_id, "@general under the pile")
    for i in range(60):  # more than the catch-up's /sync returns of a room (50)
        reacted = await person.react(room_id, lost, f"{i}")
    general = as_bot.bot.account("general")
    last = {"event_id": reacted}
    await wait_until(lambda: catch_up.feed.delivered(last, general), "the last one pushed")
    await catch_up.round()
    answer = await person.wait_for_reply(room_id, lost, timeout=30)

    assert [event["event_id"] for event in lossy.lost] == [lost]
    assert answer["content"]["body"] == "Dug out."
    assert catch_up.found == 1
