"""Appservice mode (``matrix.mode: appservice``): mindroom as the homeserver's application
service, acting as every agent through one token.

The homeserver loads a registration file (``mindroom appservice registration`` writes it:
``as_token``, ``hs_token``, the exclusive ``@mindroom_.*`` user namespace and the aliases it
may create, ``matrix.appservice.aliases``) and then pushes every event of the agents' rooms to
one HTTP endpoint, ``PUT /_matrix/app/v1/transactions/{txnId}``. No agent logs in, has a
device or long-polls:

- **Acting as an agent.** :class:`AppserviceClient` is a nio client whose every request carries
  the ``as_token`` and ``?user_id=@mindroom_<agent>:server`` (the spec's identity assertion), so
  everything mindroom does as an account (send, edit, react, join, read receipts, media) works
  unchanged. Agents' users are registered once with ``m.login.application_service``.
- **Receiving.** :class:`TransactionServer` checks the ``hs_token``, answers a transaction it
  has finished in this run with 200 and nothing else (the homeserver retries the same id after
  a lost answer), and otherwise hands the events to :class:`TransactionFeed`. It answers 200
  only once every message was *claimed* in the ledger (durably, as a sync's message is before
  its position is saved); a failed claim answers 500 and the homeserver sends it again (any
  other failure of one event is logged and the event skipped, as a sync would: one bad event
  never stops the stream). A message delivered twice, in two runs, is answered once: its claim.
- **The feed.** Each event reaches the accounts it concerns as a one-event sync response
  (:meth:`nio.AsyncClient.receive_response`): an account's room state stays nio's, kept by
  the same code as in client-server mode, and the accounts' callbacks run as after a /sync.
  A room an account has just joined gets its full state first (``/rooms/{id}/state``).

- **Several processes** on one database (:mod:`mindroom.cluster.share`) all listen on the port
  (``SO_REUSEPORT``). The one a transaction reaches appends its events to the shared inbox
  (:mod:`mindroom.cluster.inbox`) and answers 200 once they are committed there; every process hands
  them from there to the accounts it runs (:mod:`mindroom.adapters.matrix.inbox_tail`).

Each account still syncs once at start (:meth:`MatrixAccount.first_sync`, as the agent):
that is how it learns its rooms and the invites sent while mindroom was down. From there
:class:`CatchUp` asks every :data:`CATCH_UP_S` (a /sync without a wait) what its rooms got,
for what the homeserver kept and never pushed. Encryption is not available in this mode
(appservice users have no devices here).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import json
import logging
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import aiohttp
import nio
from aiohttp import web

from mindroom.adapters.matrix.accounts import ACCOUNT_PREFIX, localpart
from mindroom.adapters.matrix.client import MatrixAccount, RoomRulesClient
from mindroom.adapters.matrix.inbox_tail import InboxTail
from mindroom.atomic import atomic_write
from mindroom.errors import ClaimError, MatrixError
from mindroom.redact import redact_text

if TYPE_CHECKING:
    from mindroom.cluster.inbox import Inbox
    from mindroom.config.schema import AppserviceConfig

logger = logging.getLogger(__name__)

TOKENS_FILE = "appservice.json"  # under mindroom_data/, mode 0600
REGISTRATION_FILE = "appservice-registration.yaml"
SENDER = f"{ACCOUNT_PREFIX}appservice"  # the service's own user (never an agent)
_TRANSACTIONS_KEPT = 1000  # finished transaction ids remembered (this run only)
_DELIVERED_KEPT = 50_000  # events handed to accounts, remembered (this run; TransactionFeed)
CATCH_UP_S = 15.0
"""How often each account asks the homeserver what its rooms got, to hand on what the
homeserver stored and never pushed (:class:`CatchUp`)."""
_IN_FLIGHT_S = 2.0  # an event missing this long is not on its way as a transaction
_FIRST_CATCH_UP_S = 5.0  # the first round, after the homeserver's recovery at start
# the catch-up's /sync: the rooms' events and memberships, nothing else
_CATCH_UP_FILTER: dict[str, Any] = {
    "presence": {"not_types": ["*"]},
    "account_data": {"not_types": ["*"]},
    "room": {"timeline": {"limit": 50}, "ephemeral": {"not_types": ["*"]}},
}
_PING_S = 10.0  # how long the homeserver has to answer a ping
# A ping that fails is asked again after these pauses. Synapse answers 502 ("AlreadyCalled")
# when its retry timer for the service fired just before the ping: that retry, started
# before the endpoint listened, fails and backs off (doubling, up to minutes), and the ping
# forced nothing. The next ping finds the new timer and forces the delivery at once.
_PING_AGAIN_S = (0.5, 1.0)


@dataclass(frozen=True)
class AppserviceTokens:
    """The two secrets of the registration: the homeserver's proof of mindroom's identity
    (``as_token``) and mindroom's proof of the homeserver's (``hs_token``)."""

    as_token: str
    hs_token: str


def appservice_tokens(data_dir: Path) -> AppserviceTokens:
    """The tokens kept in ``mindroom_data/appservice.json``, made (0600) the first time."""
    path = data_dir / TOKENS_FILE
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        return AppserviceTokens(str(saved["as_token"]), str(saved["hs_token"]))
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise MatrixError(
            f"{path} is unreadable ({exc}); restore it, or delete it and give the homeserver "
            "the registration `mindroom appservice registration` writes then"
        ) from None
    tokens = AppserviceTokens(secrets.token_urlsafe(32), secrets.token_urlsafe(32))
    data_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(tokens.__dict__, indent=2) + "\n", mode=0o600)
    return tokens


def service_url(settings: AppserviceConfig) -> str:
    """Where the homeserver reaches the transaction endpoint."""
    return (settings.url or f"http://{settings.host}:{settings.port}").rstrip("/")


def registration_text(settings: AppserviceConfig, tokens: AppserviceTokens) -> str:
    """The registration YAML the homeserver loads (Synapse: ``app_service_config_files``)."""
    lines = [
        "# mindroom's application service registration: give this file to the homeserver",
        "# (Synapse: app_service_config_files) and restart it. It holds secrets: keep it 0600.",
        f"id: {json.dumps(settings.id)}",
        f"url: {json.dumps(service_url(settings))}",
        f"as_token: {json.dumps(tokens.as_token)}",
        f"hs_token: {json.dumps(tokens.hs_token)}",
        f"sender_localpart: {json.dumps(SENDER)}",
        "rate_limited: false",
        "namespaces:",
        "  users:",
        "    - exclusive: true",
        f"      regex: {json.dumps('@' + ACCOUNT_PREFIX + '.*')}",
        "  aliases:",
        "    - exclusive: false",
        f"      regex: {json.dumps(settings.aliases)}",
        "  rooms: []",
    ]
    return "\n".join(lines) + "\n"


def write_registration(data_dir: Path, settings: AppserviceConfig) -> Path:
    """Write (0600) the registration file under ``mindroom_data/``; its path."""
    path = data_dir / REGISTRATION_FILE
    data_dir.mkdir(parents=True, exist_ok=True)
    atomic_write(path, registration_text(settings, appservice_tokens(data_dir)), mode=0o600)
    return path


class AppserviceClient(RoomRulesClient):
    """A nio client acting as one user of the appservice: every request carries the
    ``as_token`` (nio sends it as the bearer token) and ``user_id``."""

    async def send(  # type: ignore[override]
        self, method: str, path: str, *args: Any, **kwargs: Any
    ) -> aiohttp.ClientResponse:
        parts = urlsplit(path)
        query = [
            (k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "user_id"
        ]
        query.append(("user_id", self.user_id))
        return await super().send(
            method, urlunsplit(parts._replace(query=urlencode(query))), *args, **kwargs
        )


async def _service_request(
    homeserver: str, as_token: str, method: str, path: str, body: dict[str, Any] | None = None
) -> tuple[int, dict[str, Any]]:
    headers = {"Authorization": f"Bearer {as_token}"}
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method, homeserver.rstrip("/") + path, json=body, headers=headers
        ) as answer,
    ):
        try:
            found = await answer.json(content_type=None)
        except ValueError:
            found = {}
        return answer.status, found if isinstance(found, dict) else {}


async def service_server_name(homeserver: str, tokens: AppserviceTokens) -> str:
    """The homeserver's name, from ``whoami`` of the service's own user (which also proves the
    homeserver loaded this registration)."""
    status, found = await _service_request(
        homeserver, tokens.as_token, "GET", "/_matrix/client/v3/account/whoami"
    )
    user = str(found.get("user_id", ""))
    if status != 200 or ":" not in user:
        raise MatrixError(
            f"the homeserver at {homeserver} does not accept mindroom's appservice token "
            f"({found.get('errcode') or status}): give it the registration file "
            "`mindroom appservice registration` writes, and restart it"
        )
    return user.split(":", 1)[1]


async def appservice_client(
    homeserver: str, name: str, tokens: AppserviceTokens, server_name: str
) -> AppserviceClient:
    """The client of agent ``name``'s user (registered the first time: no password, no
    device)."""
    user = localpart(name)
    status, found = await _service_request(
        homeserver,
        tokens.as_token,
        "POST",
        "/_matrix/client/v3/register",
        {"type": "m.login.application_service", "username": user, "inhibit_login": True},
    )
    if status != 200 and found.get("errcode") != "M_USER_IN_USE":
        raise MatrixError(
            f"cannot register @{user}:{server_name} through the appservice: "
            f"{found.get('errcode') or status} {found.get('error', '')}".rstrip()
        )
    config = nio.AsyncClientConfig(encryption_enabled=False, store_sync_tokens=False)
    client = AppserviceClient(homeserver, f"@{user}:{server_name}", config=config)
    client.user_id = f"@{user}:{server_name}"
    client.access_token = tokens.as_token
    return client


class Accounts(Protocol):
    def __call__(self) -> Iterable[MatrixAccount]: ...


class Receiver(Protocol):
    """What takes a transaction's events: raises when the transaction must come again."""

    async def __call__(self, events: list[dict[str, Any]]) -> None: ...


class TransactionFeed:
    """Hands a transaction's events to the accounts they concern, as sync responses.

    Each event once to each account in a run: an event both a transaction and the
    :class:`CatchUp` bring (or a transaction sent again after an event of it failed) reaches
    an account the first time only. An account that starts later (a reload, or a lease taken
    over from another process) still gets what its inbox hands it.
    """

    def __init__(self, accounts: Accounts) -> None:
        self.accounts = accounts
        self._batches = itertools.count(1)
        # (account, event id) handed on, oldest first
        self._delivered: collections.OrderedDict[tuple[str, str], None] = collections.OrderedDict()

    def delivered(self, event: dict[str, Any], account: MatrixAccount) -> bool:
        """Whether ``event`` was handed to ``account`` in this run (as far as remembered)."""
        return (account.user_id, str(event.get("event_id"))) in self._delivered

    async def deliver(
        self, events: list[dict[str, Any]], accounts: Iterable[MatrixAccount] | None = None
    ) -> None:
        """Every event, in order, to each of ``accounts`` (default: all) in its room. Raises
        when the transaction must come again: a claim failed (:class:`ClaimError`) or the
        homeserver did not answer; an event that cannot be handled otherwise (malformed, a
        room whose state is refused) is logged and skipped, as a sync would, so one bad event
        never stops the stream."""
        everyone = list(self.accounts() if accounts is None else accounts)
        for event in events:
            event_id = event.get("event_id")
            by_user = {
                a.user_id: a
                for a in everyone
                if not isinstance(event_id, str) or not self.delivered(event, a)
            }
            if not by_user:
                continue
            try:
                await self._deliver_one(event, by_user)
            except (ClaimError, aiohttp.ClientError, TimeoutError):
                raise  # not noted: it must be handed on when it comes again
            except Exception:
                logger.exception(
                    "skipping event %s of %s: it cannot be handled",
                    event.get("event_id"),
                    event.get("room_id"),
                )
            if isinstance(event_id, str):
                for user in by_user:
                    self._delivered[user, event_id] = None
                while len(self._delivered) > _DELIVERED_KEPT:
                    self._delivered.popitem(last=False)

    async def _deliver_one(self, event: dict[str, Any], by_user: dict[str, MatrixAccount]) -> None:
        room_id = event.get("room_id")
        if not isinstance(room_id, str) or not isinstance(event.get("type"), str):
            return
        content = event.get("content")
        target = event.get("state_key") if event.get("type") == "m.room.member" else None
        membership = content.get("membership") if isinstance(content, dict) else None
        for account in by_user.values():
            if account.user_id == target:
                await self._own_membership(account, room_id, event, membership)
            elif room_id in account.client.rooms:
                await self._receive(account, {"join": {room_id: _joined([event])}})

    async def _own_membership(
        self, account: MatrixAccount, room_id: str, event: dict[str, Any], membership: object
    ) -> None:
        client = account.client
        if membership == "invite" and room_id not in client.rooms:  # not one it is in already
            stripped = (event.get("unsigned") or {}).get("invite_room_state") or []
            await self._receive(
                account,
                {"invite": {room_id: {"invite_state": {"events": [*stripped, _stripped(event)]}}}},
            )
        elif membership == "join" and room_id not in client.rooms:
            state = await client.room_get_state(room_id)  # what a sync gives a new room
            if isinstance(state, nio.RoomGetStateError):
                raise MatrixError(
                    f"{account.user_id} cannot read the state of {room_id}: {state.message}"
                )
            client.invited_rooms.pop(room_id, None)
            await self._receive(account, {"join": {room_id: _joined([event], state.events)}})
        elif membership in ("leave", "ban"):
            client.rooms.pop(room_id, None)
            client.invited_rooms.pop(room_id, None)
            account.forget_room(room_id)
        elif room_id in client.rooms:
            await self._receive(account, {"join": {room_id: _joined([event])}})

    async def _receive(self, account: MatrixAccount, rooms: dict[str, Any]) -> None:
        batch = f"mindroom_as_{next(self._batches)}"
        response = nio.SyncResponse.from_dict({"next_batch": batch, "rooms": rooms})
        if not isinstance(response, nio.SyncResponse):
            raise MatrixError(f"an event could not be read: {response}")
        await account.receive(response)


def _joined(
    timeline: list[dict[str, Any]], state: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {"timeline": {"events": timeline, "limited": False}, "state": {"events": state or []}}


def _stripped(event: dict[str, Any]) -> dict[str, Any]:
    return {k: event[k] for k in ("type", "state_key", "sender", "content") if k in event}


class TransactionServer:
    """The endpoint the homeserver pushes transactions to (aiohttp, on the bot's loop)."""

    def __init__(
        self,
        settings: AppserviceConfig,
        tokens: AppserviceTokens,
        receive: Receiver | None = None,
        *,
        shared: bool = False,
    ) -> None:
        self.settings, self.tokens, self.receive = settings, tokens, receive
        # transactions wait for a receiver (:meth:`open`); :meth:`stop` sends them back
        self._open = asyncio.Event()
        if receive is not None:
            self._open.set()
        self._stopping = False
        self.shared = shared  # several processes listen on the one port (SO_REUSEPORT)
        # this run's finished transactions: a resend is acknowledged without feeding it again.
        # Not kept across runs: a homeserver may number from 1 again after its restart, and a
        # message delivered twice is answered once anyway (the ledger's claim of its event).
        self._done: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._lock = asyncio.Lock()  # one transaction at a time, in order
        self._runner: web.AppRunner | None = None
        self.received = 0  # transactions delivered (for the log and the bench)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=32 * 1024 * 1024)
        for prefix in ("/_matrix/app/v1", ""):  # the unprefixed paths of older homeservers
            app.router.add_put(prefix + "/transactions/{txn}", self._transaction)
            app.router.add_get(prefix + "/users/{user}", self._nobody)
            app.router.add_get(prefix + "/rooms/{alias}", self._nobody)
        app.router.add_post("/_matrix/app/v1/ping", self._ping)
        return app

    def _authorized(self, request: web.Request) -> bool:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        given = given or request.query.get("access_token", "")
        return secrets.compare_digest(given.encode(), self.tokens.hs_token.encode())

    @staticmethod
    def _error(status: int, errcode: str, error: str) -> web.Response:
        return web.json_response({"errcode": errcode, "error": error}, status=status)

    async def _transaction(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._error(403, "M_FORBIDDEN", "wrong or missing hs_token")
        txn = request.match_info["txn"]
        try:
            body = await request.json()
        except ValueError:
            return self._error(400, "M_NOT_JSON", "the transaction is not JSON")
        events = body.get("events") if isinstance(body, dict) else None
        if not isinstance(events, list):
            return self._error(400, "M_BAD_JSON", "a transaction needs an events list")
        await self._open.wait()
        async with self._lock:
            if self._stopping or self.receive is None:
                return self._error(503, "M_UNKNOWN", "mindroom is stopping; send it again")
            if txn in self._done:
                return web.json_response({})  # a retry of one handled: nothing again
            try:
                await self.receive([e for e in events if isinstance(e, dict)])
            except Exception:
                logger.exception("transaction %s failed; the homeserver will send it again", txn)
                return self._error(500, "M_UNKNOWN", "not handled; send it again")
            self._done[txn] = None
            while len(self._done) > _TRANSACTIONS_KEPT:
                self._done.popitem(last=False)
            self.received += 1
        return web.json_response({})

    async def _nobody(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._error(403, "M_FORBIDDEN", "wrong or missing hs_token")
        return self._error(404, "M_NOT_FOUND", "mindroom makes no users or rooms on demand")

    async def _ping(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return self._error(403, "M_FORBIDDEN", "wrong or missing hs_token")
        return web.json_response({})

    async def start(self) -> None:
        runner = web.AppRunner(self.app(), access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(
                runner, self.settings.host, self.settings.port, reuse_port=self.shared or None
            ).start()
        except OSError as exc:
            await runner.cleanup()
            raise MatrixError(
                f"the appservice cannot listen on {self.settings.host}:{self.settings.port} "
                f"({exc.strerror}): set matrix.appservice.port"
            ) from None
        self._runner = runner
        logger.info(
            "appservice listening on %s:%d (the homeserver sends to %s)",
            self.settings.host,
            self.settings.port,
            service_url(self.settings),
        )

    def open(self, receive: Receiver) -> None:
        """Hand transactions to ``receive`` from now on, those held meanwhile first."""
        self.receive = receive
        self._open.set()

    async def take(self, events: list[dict[str, Any]]) -> bool:
        """Hand ``events`` on as one more transaction would be (in turn with the
        transactions); False when there is no receiver (not open yet, or stopping). Raises
        as the receiver does."""
        async with self._lock:
            if self._stopping or self.receive is None:
                return False
            await self.receive(events)
            return True

    async def stop(self) -> None:
        self._stopping = True
        self._open.set()  # a held transaction is sent back, to come again
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


class CatchUp:
    """Hands on what the homeserver stored and never pushed.

    A homeserver can keep an event from the service for good. Synapse (1.163) reads whether
    the service is up *before* it stores a transaction, and sends it only if it was: an event
    that comes while Synapse marks the service up again (mindroom restarted, or refused a
    transaction) is stored as a transaction nobody sends until the service fails next. Every
    :data:`CATCH_UP_S` each account asks what its rooms got since it last asked (a /sync as
    its user, from its first sync's position on) and hands what no transaction brought in
    this run to the transactions' receiver, so it is handled as if pushed: a message claimed
    and answered once, an invite answered, a kick forgotten. An event may be missing only
    because its transaction is on its way: it is handed on once it has been missing for
    :data:`_IN_FLIGHT_S` (asked again that soon). A failed round hands nothing on and keeps
    its position, to ask again next time.
    """

    def __init__(self, accounts: Accounts, feed: TransactionFeed, server: TransactionServer):
        self.accounts, self.feed, self.server = accounts, feed, server
        self._since: dict[str, str] = {}  # the next question's position, per account
        # events found missing (by account and event) and when each was first found so
        self._missing: dict[tuple[str, str], float] = {}
        self.rounds = 0  # rounds finished (for tests and the log)
        self.found = 0  # events handed on that no transaction had brought

    async def run(self) -> None:
        # the first round soon: the homeserver keeps an event as it recovers, just after start
        await asyncio.sleep(min(_FIRST_CATCH_UP_S, CATCH_UP_S))
        while True:
            await self.round()
            await asyncio.sleep(_IN_FLIGHT_S if self._missing else CATCH_UP_S)

    async def round(self) -> None:
        """Ask once for every account."""
        accounts = list(self.accounts())
        for account in accounts:
            try:
                await self._catch_up(account)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning(
                    "catching up %s failed (%s); asked again in %.0f s",
                    account.user_id,
                    redact_text(str(exc))[:300],
                    CATCH_UP_S,
                )
        users = {account.user_id for account in accounts}
        self._since = {user: since for user, since in self._since.items() if user in users}
        self._missing = {key: t for key, t in self._missing.items() if key[0] in users}
        self.rounds += 1

    async def _catch_up(self, account: MatrixAccount) -> None:
        since = self._since.get(account.user_id) or account.first_position
        if since is None:  # not synced once yet: nothing to catch up from
            return
        changes = await _changes(account.client, since)
        events = await self._events(account, changes, since)
        # An event no transaction brought yet may be one on its way: it is handed on once it
        # has been seen missing for _IN_FLIGHT_S (by this clock: a server's may be off), and
        # until then the position stays, so the next round asks for it again.
        now, waiting, due = time.monotonic(), {}, []
        for event in events:
            if self.feed.delivered(event, account):
                continue
            key = _key(account, event)
            waiting[key] = self._missing.get(key, now)
            if now - waiting[key] >= _IN_FLIGHT_S:
                due.append(event)
                del waiting[key]
        self._missing = {k: t for k, t in self._missing.items() if k[0] != account.user_id}
        self._missing.update(waiting)
        if due:
            logger.warning(
                "%d events in the rooms of %s never reached mindroom as transactions "
                "(the homeserver kept or lost them): handing them on now",
                len(due),
                account.user_id,
            )
            if not await self.server.take(due):
                return  # stopping: asked again from the same position next run
            self.found += len(due)
        if not waiting:
            self._since[account.user_id] = str(changes["next_batch"])

    async def _events(
        self, account: MatrixAccount, changes: dict[str, Any], since: str
    ) -> list[dict[str, Any]]:
        """The events ``changes`` (a /sync's answer) holds, oldest first in each room, each
        with its room: joined rooms' timelines (a limited one with what it left out), the
        leave of a room left, an invite as the event the homeserver would have pushed."""
        client = account.client
        rooms = changes.get("rooms") or {}
        events: list[dict[str, Any]] = []
        for room_id, room in (rooms.get("join") or {}).items():
            timeline = room.get("timeline") or {}
            if timeline.get("limited") and timeline.get("prev_batch"):
                left_out = await account.events_between(room_id, timeline["prev_batch"], since)
                events.extend({**e.source, "room_id": room_id} for e in reversed(left_out))
            events.extend({**e, "room_id": room_id} for e in timeline.get("events") or [])
        for room_id, room in (rooms.get("leave") or {}).items():
            timeline = (room.get("timeline") or {}).get("events") or []
            events.extend({**e, "room_id": room_id} for e in timeline)
        for room_id, room in (rooms.get("invite") or {}).items():
            if room_id in client.rooms or room_id in client.invited_rooms:
                continue  # its invite was pushed (and is being answered), or it joined
            state = (room.get("invite_state") or {}).get("events") or []
            own = [
                e
                for e in state
                if e.get("type") == "m.room.member" and e.get("state_key") == client.user_id
            ]
            if own:
                others = [e for e in state if e is not own[-1]]
                events.append(
                    {
                        **own[-1],
                        "room_id": room_id,
                        "unsigned": {"invite_room_state": others},
                    }
                )
        return [e for e in events if isinstance(e, dict)]


def _key(account: MatrixAccount, event: dict[str, Any]) -> tuple[str, str]:
    """What names ``event`` among ``account``'s missing ones (an invite has no event id)."""
    event_id = event.get("event_id")
    if isinstance(event_id, str):
        return account.user_id, event_id
    return account.user_id, f"{event.get('type')}:{event.get('room_id')}:{event.get('state_key')}"


async def _changes(client: nio.AsyncClient, since: str) -> dict[str, Any]:
    """What the rooms of ``client``'s user got since ``since``: a /sync's answer, as JSON (not
    handed to nio: the events go through the transactions' receiver)."""
    method, path = nio.Api.sync(
        client.access_token, since=since, timeout=0, filter=_CATCH_UP_FILTER
    )
    answer = await client.send(method, path)
    try:
        found = await answer.json(content_type=None)
    except ValueError:
        found = None
    finally:
        answer.release()
    if answer.status != 200 or not isinstance(found, dict) or "next_batch" not in found:
        problem = found.get("errcode") if isinstance(found, dict) else None
        raise MatrixError(f"the homeserver answered /sync with {problem or answer.status}")
    return found


def registration_hint(path: Path) -> str:
    """What to tell a person who must hand the registration to their homeserver."""
    return (
        f"the appservice registration is in {path}: add it to the homeserver's "
        f"app_service_config_files (Synapse) and restart the homeserver"
    )


class Appservice:
    """Appservice mode for the bot: its accounts' clients, and the transaction endpoint."""

    def __init__(
        self,
        settings: AppserviceConfig,
        homeserver: str,
        data_dir: Path,
        inbox: Inbox | None = None,
    ) -> None:
        self.settings, self.homeserver = settings, homeserver
        # several processes on one database share the transactions through its inbox
        self.tail = None if inbox is None else InboxTail(inbox)
        self.tokens = appservice_tokens(data_dir)
        self.registration = write_registration(data_dir, settings)  # current with the config
        self.server: TransactionServer | None = None
        self.catch_up: CatchUp | None = None  # once listening
        self._server_name: str | None = None

    async def account(self, name: str) -> MatrixAccount:
        """The account ``name`` acting through the service (the homeserver checked once: it
        knows this service). A failed claim of its messages fails the transaction."""
        if self._server_name is None:
            try:
                self._server_name = await service_server_name(self.homeserver, self.tokens)
            except MatrixError as exc:
                raise MatrixError(f"{exc} ({registration_hint(self.registration)})") from None
        client = await appservice_client(self.homeserver, name, self.tokens, self._server_name)
        if self.tail is not None:  # before its first sync: what comes later is its own
            await self.tail.begin(client.user_id)
        return MatrixAccount(name, client)

    async def serve(self) -> TransactionServer:
        """Listen on the endpoint before the accounts log in and join their rooms: the
        homeserver pushes their joins at once, and a push it finds refused puts the service in
        its back-off (seconds, doubling) however soon mindroom listens. What arrives is held
        until :meth:`listen` names the accounts. Once is enough (:meth:`listen` calls it too)."""
        if self.server is None:
            shared = self.tail is not None  # the processes share the port
            server = TransactionServer(self.settings, self.tokens, shared=shared)
            await server.start()
            self.server = server
        return self.server

    async def listen(self, accounts: Accounts) -> InboxTail | None:
        """Take the homeserver's transactions for ``accounts``: handed to them at once, or
        with a shared inbox appended there, and the tail returned (to run) hands them on."""
        feed = TransactionFeed(accounts)
        receive: Receiver = feed.deliver
        if self.tail is not None:
            self.tail.feed, receive = feed, self.tail.receive
        server = await self.serve()
        server.open(receive)
        self.catch_up = CatchUp(accounts, feed, server)  # run by the bot
        await self.ping()  # and what the homeserver kept while mindroom was down comes now
        return self.tail

    async def ping(self) -> None:
        """Ask the homeserver to call the endpoint now (``/appservice/{id}/ping``): it checks
        the homeserver reaches it, and makes a homeserver that was backing off after mindroom
        was down send what it kept at once rather than at its next retry."""
        path = f"/_matrix/client/v1/appservice/{quote(self.settings.id, safe='')}/ping"
        status = 0
        found: dict[str, Any] = {}
        for pause in (0.0, *_PING_AGAIN_S):
            if pause:
                logger.debug("the appservice ping was answered %s %s; again", status, found)
                await asyncio.sleep(pause)
            try:
                async with asyncio.timeout(_PING_S):
                    status, found = await _service_request(
                        self.homeserver, self.tokens.as_token, "POST", path, {}
                    )
            except (aiohttp.ClientError, TimeoutError) as exc:
                status, found = 0, {"error": str(exc) or type(exc).__name__}
            if status == 200 or status == 404 or found.get("errcode") == "M_UNRECOGNIZED":
                break
        if status == 200:
            logger.info("the homeserver reaches the appservice (%s ms)", found.get("duration_ms"))
        elif found.get("errcode") == "M_UNRECOGNIZED" or status == 404:
            logger.debug("the homeserver has no appservice ping; it retries on its own schedule")
        else:
            logger.warning(
                "the homeserver cannot reach the appservice at %s (%s): events will not "
                "arrive until it can (matrix.appservice.url)",
                service_url(self.settings),
                found.get("error") or found.get("errcode") or status,
            )

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.stop()
