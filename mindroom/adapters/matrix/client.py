"""One Matrix account run by mindroom: its sync loop, what it hears, what it sends.

This wraps a logged-in nio client and hands plain :class:`IncomingMessage` objects and invite
notifications to callbacks; nothing outside :mod:`mindroom.adapters.matrix` sees nio types.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import secrets
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
import nio
from nio.api import MessageDirection, RelationshipType

from mindroom.adapters.matrix import nio_checks
from mindroom.adapters.matrix.crypto import keep_keys
from mindroom.adapters.matrix.events import (
    Attachment,
    IncomingMessage,
    IncomingReaction,
    parse_message,
    parse_reaction,
)
from mindroom.adapters.matrix.key_backup import KeyBackup
from mindroom.adapters.matrix.media import download
from mindroom.errors import ClaimError, MatrixError
from mindroom.redact import redact_text
from mindroom.tasks import within

logger = logging.getLogger(__name__)

MessageHandler = Callable[["MatrixAccount", IncomingMessage], Awaitable[None]]
InviteHandler = Callable[["MatrixAccount", str, str], Awaitable[None]]
EncryptedHandler = Callable[["MatrixAccount", "Undecryptable"], Awaitable[None]]
ReactionHandler = Callable[["MatrixAccount", IncomingReaction], Awaitable[None]]
SyncedHandler = Callable[["MatrixAccount", str], Awaitable[None]]

SYNC_TIMEOUT_MS = 30_000
REST_POLL_S = 2.0
"""How often a resting account (see :meth:`MatrixAccount.rest_when`) asks for what is new."""
_SYNC_FILTER: dict[str, Any] = {
    "presence": {"not_types": ["*"]},
    "account_data": {"not_types": ["*"]},
    "room": {"timeline": {"limit": 50}, "ephemeral": {"not_types": ["*"]}},
}
_TYPING_TIMEOUT_MS = 30_000
_MAX_GAP_EVENTS = 1_000
_TYPING_REFRESH_S = 20.0
_TYPING_DELAY_S = 1.0
_ECHOES_KEPT = 64  # own events heard back, remembered for a wait that starts after them
_SYNCING: contextvars.ContextVar[tuple[object, asyncio.Task[Any]] | None] = contextvars.ContextVar(
    "mindroom_syncing", default=None
)
"""Inside an account's sync (its callbacks run there): the account and the task running it."""


@dataclass(frozen=True)
class Undecryptable:
    """An encrypted event the account could not decrypt (no room key reached it)."""

    room_id: str
    event_id: str
    sender: str
    receiver_membership: str | None  # "join" unless it is history from before the account joined
    thread_root: str | None = None  # relations stay readable: the thread it was sent in


def _content(event: nio.Event) -> dict[str, Any]:
    content = event.source.get("content")
    return content if isinstance(content, dict) else {}


# A room is closed to everyone but its members only with exactly these values (allow-lists:
# a rule or visibility added to Matrix later, or one not seen yet, means "not closed").
_SENT_LOOKUP_EVENTS = 200  # how far back :meth:`MatrixAccount.sent_with` looks
CLOSED_JOIN_RULES = frozenset({"invite"})  # not public, knock, restricted, knock_restricted
CLOSED_HISTORY = frozenset({"shared", "invited", "joined"})  # not world_readable
_RULE_STATE = {"m.room.join_rules": "join_rule", "m.room.history_visibility": "history_visibility"}


def closed_room_of(
    user_id: str, ours: set[str], present: set[str], rules: dict[str, object]
) -> bool:
    """Whether a room is ``user_id``'s alone with mindroom's accounts (``ours``).

    ``present`` are the room's members joined or invited; ``rules`` its ``join_rule`` and
    ``history_visibility`` as its state events said them (missing: never seen). The room
    qualifies only when nobody but the person and mindroom is joined or invited, nobody can
    join without an invite (join rule exactly ``invite``) and nobody outside can read its
    history.
    """
    return (
        present - ours == {user_id}
        and rules.get("join_rule") in CLOSED_JOIN_RULES
        and rules.get("history_visibility") in CLOSED_HISTORY
    )


def note_room_rules(rules: dict[str, dict[str, object]], response: nio.SyncResponse) -> None:
    """Keep in ``rules`` each joined room's join rule and history visibility as this sync's
    state and timeline give them (later events win); forget the rooms left."""
    for room_id, info in response.rooms.join.items():
        for event in [*info.state, *info.timeline.events]:
            source = getattr(event, "source", None)
            if not isinstance(source, dict) or source.get("state_key") != "":
                continue
            key = _RULE_STATE.get(str(source.get("type")))
            content = source.get("content")
            if key is not None and isinstance(content, dict):
                rules.setdefault(room_id, {})[key] = content.get(key)
    for room_id in response.rooms.leave:
        rules.pop(room_id, None)


class RoomRulesClient(nio.AsyncClient):
    """nio's client, also keeping who may join each room and who may read its history.

    nio's room starts as ``invite`` and ``shared`` before any state arrived, which would read
    as a closed room; this keeps only what the room's state events said (``room_rules``),
    noted before nio runs the event callbacks, so a message handled from a sync already sees
    the state that came with it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        nio_checks.install()  # nio's schema checks, compiled (see the module)
        super().__init__(*args, **kwargs)
        self.room_rules: dict[str, dict[str, object]] = {}

    async def receive_response(self, response: nio.Response) -> None:
        if isinstance(response, nio.SyncResponse):
            note_room_rules(self.room_rules, response)
        await super().receive_response(response)


class MatrixAccount:
    """A logged-in account: sync, callbacks, sending. ``name`` is the agent name (or 'router')."""

    def __init__(self, name: str, client: nio.AsyncClient, backup: KeyBackup | None = None) -> None:
        self.name = name
        self.client = client
        self.backup = backup  # the account's server-side key backup, when it has one
        self.synced_at: float | None = None  # when the last sync succeeded (for the dashboard)
        self.sync_problem: str | None = None  # why the last sync failed, until one succeeds
        self.log = logger.getChild(name)
        self._on_message: MessageHandler | None = None
        self._on_invite: InviteHandler | None = None
        self._on_encrypted: EncryptedHandler | None = None
        self._on_reaction: ReactionHandler | None = None
        self._stopping = False
        self._sync_filter: str | dict[str, Any] = _SYNC_FILTER
        # Rooms joined through this process: the client only learns of them at its next sync.
        self._joined: set[str] = set()
        self._listening = False
        self._echoes: deque[str] = deque(maxlen=_ECHOES_KEPT)  # see heard_back
        self._echo_waiters: dict[str, asyncio.Future[None]] = {}
        # resting (see rest_when): the loop polls instead of long-polling
        self._may_rest: Callable[[], bool] = lambda: False
        self._resting = False
        self._nudged = asyncio.Event()
        self._sync_lock = asyncio.Lock()  # one sync at a time: the loop's, or a catch-up
        self._position: str | None = None
        # where the first sync left the stream (appservice mode catches up from there)
        self.first_position: str | None = None
        self._on_synced: SyncedHandler | None = None
        self.on_rooms_changed: Callable[[], None] = lambda: None
        """Called when the rooms this account is joined to changed (a sync, a join, a leave)."""

    @property
    def user_id(self) -> str:
        """The account's full Matrix ID."""
        return self.client.user_id

    @property
    def server_name(self) -> str:
        """The homeserver's name, as it appears in the account's own user ID."""
        return self.user_id.split(":", 1)[1]

    def joined_rooms(self) -> set[str]:
        """Rooms this account is joined to: as of its last sync, plus joins made since."""
        return set(self.client.rooms) | self._joined

    def note_joined(self, room_id: str) -> None:
        """This account just joined ``room_id`` without :meth:`join` (it created the room, say):
        :meth:`joined_rooms` has it at once, not only after the next sync."""
        self._joined.add(room_id)
        self.on_rooms_changed()

    @property
    def listening(self) -> bool:
        """True while this account hears its rooms' events (it listens and is not stopping)."""
        return self._listening and not self._stopping

    @property
    def resting(self) -> bool:
        """True while the sync loop rests (:meth:`rest_when`): it polls, it does not long-poll."""
        return self._resting

    def rest_when(self, may_rest: Callable[[], bool]) -> None:
        """Let the sync loop rest while ``may_rest()`` is True: instead of a long-poll, which
        the homeserver answers at every event in every room of the account, it asks for what
        is new every :data:`REST_POLL_S` seconds, and delivers it as a long-poll would.

        For an account whose every room is heard by another account of this process (the
        router, in rooms with an agent): each event costs the homeserver a wake of every
        long-poll in its room, and a reply is two events. ``may_rest`` is asked before each
        request; :meth:`nudge` makes a resting loop ask again at once. While it rests the
        account catches up before it sends (so an encrypted message reaches the room's members
        as they are now), and its view of its rooms is at most one poll old.
        """
        self._may_rest = may_rest

    def nudge(self) -> None:
        """Ask a resting sync loop to ask :meth:`rest_when`'s question again now."""
        self._nudged.set()

    def room_members(self, room_id: str) -> set[str]:
        """Joined members of ``room_id`` as this account last saw them."""
        room = self.client.rooms.get(room_id)
        return set(room.users) if room else set()

    def pending_invites(self) -> list[tuple[str, str]]:
        """Invites not yet answered, as of the last sync: ``(room_id, inviter)`` pairs.

        An invite sent while the account was not running is only in the first sync's
        ``rooms.invite``; the start-up (and a reload adding the agent) answers these like the
        ones heard while listening.
        """
        return [
            (room_id, room.inviter or "")
            for room_id, room in self.client.invited_rooms.items()
            if room_id not in self.joined_rooms()
        ]

    def only_with(self, room_id: str, user_id: str, ours: set[str]) -> bool:
        """Whether ``room_id`` is a closed room of ``user_id`` and mindroom's accounts alone
        (what may be said there is for that person only): see :func:`closed_room_of`."""
        room = self.client.rooms.get(room_id)
        if room is None:
            return False
        rules = self.client.room_rules if isinstance(self.client, RoomRulesClient) else {}
        present = set(room.users) | set(room.invited_users)
        return closed_room_of(user_id, ours, present, rules.get(room_id, {}))

    def readers(self, room_id: str) -> tuple[frozenset[str], bool, bool, str | None, bool] | None:
        """Who can read ``room_id`` as this account last synced it: its members joined or
        invited, whether nobody else can (invite-only, history not readable from outside),
        whether it is encrypted, its name, and whether its state said both rules; None when
        this account is not in it."""
        room = self.client.rooms.get(room_id)
        if room is None:
            return None
        rules = self.client.room_rules if isinstance(self.client, RoomRulesClient) else {}
        known = rules.get(room_id, {})
        closed = (
            known.get("join_rule") in CLOSED_JOIN_RULES
            and known.get("history_visibility") in CLOSED_HISTORY
        )
        present = frozenset(room.users) | frozenset(room.invited_users)
        seen = "join_rule" in known and "history_visibility" in known
        return present, closed, bool(room.encrypted), room.name, seen

    def display_name(self, room_id: str, user_id: str) -> str | None:
        """``user_id``'s display name in ``room_id`` as this account last saw it."""
        room = self.client.rooms.get(room_id)
        return room.user_name(user_id) if room else None

    async def first_sync(self) -> None:
        """Learn joined rooms and state without delivering the backlog to callbacks.

        Synapse answers an identical /sync from the same device out of a cache for two minutes,
        which after a quick restart would hand back a stale position and replay everything
        since; a one-off filter makes this request unlike any earlier one.
        """
        nonce = f"mindroom.nonce.{secrets.token_hex(8)}"
        state_filter = {
            **_SYNC_FILTER,
            "room": {
                "timeline": {"limit": 1, "not_types": [nonce]},
                "ephemeral": {"not_types": ["*"]},
            },
        }
        response = await self.client.sync(timeout=0, full_state=True, sync_filter=state_filter)
        if isinstance(response, nio.SyncError):
            raise MatrixError(f"first sync of {self.user_id} failed: {response.message}")
        self.synced_at, self.first_position = time.time(), response.next_batch
        await self._keep_keys()
        # An uploaded filter is parsed once; an inline one costs the server a parse per sync.
        # Synapse stores identical filters once, so without this run's nonce the catch-up
        # request (saved position, same filter, same timeout) would be the very request the
        # previous run left long-polling, and could be answered from that run's cache.
        timeline = {**_SYNC_FILTER["room"]["timeline"], "not_types": [nonce]}
        room = {**_SYNC_FILTER["room"], "timeline": timeline}
        self._sync_filter = {**_SYNC_FILTER, "room": room}
        uploaded = await self.client.upload_filter(
            presence=_SYNC_FILTER["presence"], account_data=_SYNC_FILTER["account_data"], room=room
        )
        if isinstance(uploaded, nio.UploadFilterResponse):
            self._sync_filter = uploaded.filter_id
        else:
            self.log.warning("cannot upload the sync filter: %s", uploaded.message)

    def listen(
        self,
        on_message: MessageHandler,
        on_invite: InviteHandler,
        on_encrypted: EncryptedHandler | None = None,
        on_reaction: ReactionHandler | None = None,
    ) -> None:
        """Deliver messages, invites, reactions and encrypted events heard from now on to these
        callbacks.

        Encrypted messages and reactions arrive decrypted, as messages and reactions;
        ``on_encrypted`` hears the events that could not be decrypted (after the account asked
        the sender's devices for the key).
        """
        self._on_message, self._on_invite = on_message, on_invite
        self._on_encrypted, self._on_reaction = on_encrypted, on_reaction
        self._listening = True
        self.client.add_event_callback(self._own_event, nio.Event)  # see heard_back
        # nio hands a message its schema refuses (a client's bug) on as a BadEvent: read as
        # far as it can be, so its sender hears what was wrong instead of silence
        self.client.add_event_callback(self._message_event, (nio.RoomMessage, nio.BadEvent))
        self.client.add_event_callback(self._invite_event, nio.InviteMemberEvent)
        self.client.add_event_callback(self._reaction_event, nio.ReactionEvent)
        self.client.add_event_callback(
            self._encrypted_event, (nio.MegolmEvent, nio.UnknownEncryptedEvent)
        )

    async def _own_event(self, _room: nio.MatrixRoom, event: nio.Event) -> None:
        if event.sender != self.user_id:
            return
        self._echoes.append(event.event_id)
        waiter = self._echo_waiters.get(event.event_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def heard_back(self, event_id: str, timeout: float) -> bool:
        """Wait until this account hears ``event_id``, an event it sent, back from the
        homeserver (its sync, or in appservice mode a transaction), at most ``timeout`` s:
        the homeserver is then handing it out to the room. False when it did not in time, or
        the account is not listening, or rests (nothing would tell it soon)."""
        if not self._listening or self._stopping or self._resting:
            return False
        if event_id in self._echoes:
            return True
        waiter = self._echo_waiters.get(event_id)
        if waiter is None:
            waiter = self._echo_waiters[event_id] = asyncio.get_running_loop().create_future()
        try:
            await within(asyncio.shield(waiter), timeout)
            return not self._stopping
        except TimeoutError:
            self.log.debug("%s did not come back within %.1f s", event_id, timeout)
            return False
        finally:
            if self._echo_waiters.get(event_id) is waiter:
                del self._echo_waiters[event_id]

    async def _keep_keys(self) -> None:
        """Key upkeep after a sync, and the new room keys into the backup."""
        await keep_keys(self.client)
        if self.backup is not None:
            try:
                await self.backup.upload()
            except Exception:  # a transport failure: the next sync backs them up
                self.log.exception("backing up room keys failed")

    async def _from_backup(self, room_id: str, event: nio.Event) -> nio.Event | None:
        """``event`` decrypted with its room key from the key backup, when the backup has it
        (a key sent to an earlier device of this account)."""
        if self.backup is None or not isinstance(event, nio.MegolmEvent):
            return None
        try:
            if await self.backup.fetch(room_id, event.session_id):
                event.room_id = event.room_id or room_id
                return self.client.decrypt_event(event)
        except Exception as exc:  # no key after all: the event stays undecryptable
            self.log.warning("%s from the key backup cannot be decrypted: %s", event.event_id, exc)
        return None

    async def _encrypted_event(self, room: nio.MatrixRoom, event: nio.Event) -> None:
        if self._on_encrypted is None or event.sender == self.user_id:
            return
        decrypted = await self._from_backup(room.room_id, event)
        if isinstance(decrypted, nio.RoomMessage):
            await self._message_event(room, decrypted)
            return
        if isinstance(decrypted, nio.ReactionEvent):
            await self._reaction_event(room, decrypted)
            return
        try:
            if isinstance(event, nio.MegolmEvent) and self.client.olm is not None:
                with contextlib.suppress(Exception):  # asking is a courtesy; it may be refused
                    await self.client.request_room_key(event)
            parsed = parse_message(
                room.room_id,
                {
                    **event.source,
                    "type": "m.room.message",
                    "content": {**_content(event), "body": ""},
                },
            )
            await self._on_encrypted(
                self,
                Undecryptable(
                    room.room_id,
                    event.event_id,
                    event.sender,
                    parsed.receiver_membership if parsed else None,
                    parsed.thread_root if parsed else None,
                ),
            )
        except Exception:
            if not self._stopping:
                self.log.exception("handling encrypted event in %s failed", room.room_id)

    async def _message_event(self, room: nio.MatrixRoom, event: nio.Event) -> None:
        # The edge of every event: one bad event or failing handler must not end the sync loop.
        if isinstance(event, nio.BadEvent) and event.source.get("type") != "m.room.message":
            return
        try:
            message = parse_message(room.room_id, event.source)
            if message is not None and message.problem is not None:
                self.log.warning(
                    "event %s in %s from %s cannot be read as sent: %s",
                    event.event_id,
                    room.room_id,
                    message.sender,
                    message.problem,
                )
            if message is not None and self._on_message is not None:
                await self._on_message(self, message)
        except Exception as exc:
            # unclaimed (the ledger's database failed): the event must be heard again, so
            # the sync (or the appservice's transaction) that brought it fails and comes
            # again from the same position; any other failure is logged and the event skipped
            if isinstance(exc, ClaimError):
                raise
            if not self._stopping:  # requests cut short by shutdown are expected
                self.log.exception("handling event %s in %s failed", event.event_id, room.room_id)

    async def _reaction_event(self, room: nio.MatrixRoom, event: nio.Event) -> None:
        if self._on_reaction is None or event.sender == self.user_id:
            return
        try:
            reaction = parse_reaction(room.room_id, event.source)
            if reaction is not None:
                await self._on_reaction(self, reaction)
        except Exception:
            if not self._stopping:
                self.log.exception(
                    "handling reaction %s in %s failed", event.event_id, room.room_id
                )

    async def _invite_event(self, room: nio.MatrixRoom, event: nio.InviteMemberEvent) -> None:
        if (
            event.state_key != self.user_id
            or event.membership != "invite"
            or self._on_invite is None
        ):
            return
        try:
            await self._on_invite(self, room.room_id, event.sender)
        except Exception:
            self.log.exception("handling invite to %s failed", room.room_id)

    async def sync_forever(
        self, since: str | None = None, on_synced: SyncedHandler | None = None
    ) -> None:
        """Long-poll the homeserver until :meth:`stop`; transient failures back off and retry.

        Starts from ``since`` (a saved position, to catch up on what arrived while mindroom was
        down) or from the first sync. ``on_synced`` gets each new position once the events
        before it were handled, so it can be saved. While :meth:`rest_when` allows, it polls
        instead of long-polling.
        """
        self._position = since or self.client.next_batch
        self._on_synced = on_synced
        self.log.debug("syncing from %r (saved %r)", self._position, since)
        if not since and on_synced is not None:
            # Nothing saved yet: the first sync's position is where a restart must catch up
            # from, even when this run ends before its first long-poll returns.
            await on_synced(self, self._position)
        try:
            await self._sync_loop()
        finally:
            self._resting = False  # whatever ended the loop: nothing polls for it any more

    async def _sync_loop(self) -> None:
        """:meth:`sync_forever`'s requests, one after the other, until :meth:`stop`."""
        backoff = 1.0
        while not self._stopping:
            self._nudged.clear()  # before the question: a nudge from now on is seen
            resting, self._resting = self._resting, self._may_rest()
            if self._resting and not resting:
                self.log.info(
                    "another account hears each of its rooms: it polls every %.0f s", REST_POLL_S
                )
            elif resting and not self._resting:
                self.log.info("listens to its rooms again")
            response = await self._sync_once(0 if self._resting else SYNC_TIMEOUT_MS)
            if isinstance(response, nio.SyncResponse):
                backoff = 1.0
                if self._resting and not self._stopping:
                    with contextlib.suppress(TimeoutError):
                        await within(self._nudged.wait(), REST_POLL_S)
                continue
            if self._stopping:
                break
            self.sync_problem = redact_text(str(response))[:300]  # nio may quote a URL + token
            self.log.warning("sync failed (%s); retrying in %.0f s", response, backoff)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)

    async def _sync_once(self, timeout_ms: int) -> nio.SyncResponse | object:
        """One sync from the current position, its events delivered and the position kept;
        the response, or what went wrong."""
        async with self._sync_lock:
            task = asyncio.current_task()
            inside = _SYNCING.set(None if task is None else (self, task))
            try:
                return await self._synced_once(timeout_ms)
            finally:
                _SYNCING.reset(inside)

    async def _synced_once(self, timeout_ms: int) -> nio.SyncResponse | object:
        """:meth:`_sync_once`'s work, under its lock."""
        position = self._position
        rooms = self.joined_rooms()
        # nio drops a sync response whose next_batch equals its own ("already received")
        # without running any callback. After first_sync its position is the head of the
        # stream, which is exactly where the catch-up from a saved position ends when
        # nothing else happened since: the whole backlog would be thrown away. Its position
        # must be the one this request starts from.
        self.client.next_batch = position
        try:
            response = await self.client.sync(
                timeout=timeout_ms, sync_filter=self._sync_filter, since=position
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # the loop's edge: log, back off, keep listening
            return exc
        if not isinstance(response, nio.SyncResponse):
            return response
        self._left(response)
        await self._keep_keys()  # room keys for the people in encrypted rooms
        try:
            await self._fill_gaps(response, since=position)
        except ClaimError as exc:  # unclaimed: the same batch comes again (see _message_event)
            return exc
        self._position = response.next_batch
        self.synced_at, self.sync_problem = time.time(), None
        if self._on_synced is not None:
            await self._on_synced(self, self._position)
        if self.joined_rooms() != rooms:
            self.on_rooms_changed()
        return response

    def _left(self, response: nio.SyncResponse) -> None:
        """Forget the rooms ``response`` says this account left (kicked, banned, or left from
        another client): nio keeps them among its rooms, as if still joined."""
        for room_id in response.rooms.leave:
            self.client.invited_rooms.pop(room_id, None)  # an invite withdrawn or declined
            if room_id not in self.client.rooms and room_id not in self._joined:
                continue
            self.log.info("is no longer in %s", room_id)
            self.client.rooms.pop(room_id, None)
            self._joined.discard(room_id)
            self._forget_rules(room_id)

    async def _current(self) -> None:
        """Before a resting account speaks: catch up, so its view of the room (its members
        and their devices, for an encrypted message) is as it is now. A sync under way is
        waited for instead (it is as recent); inside one of its own (its callbacks) the view
        is current. Inside another account's (a reaction the agent heard, answered from the
        router's prompt) it is not: it catches up there too. A failed catch-up costs only its
        freshness: the message is sent."""
        if not self._resting or self._stopping:
            return
        task, syncing = asyncio.current_task(), _SYNCING.get()
        if task is not None and syncing is not None and syncing == (self, task):
            return
        if self._sync_lock.locked():
            async with self._sync_lock:
                return
        try:
            response = await self._sync_once(0)
        except Exception as exc:  # a callback of the catch-up failed: its events are logged
            self.log.warning("catching up before sending failed: %s", exc)
            return
        if not isinstance(response, nio.SyncResponse):
            self.log.debug("catching up before sending failed: %s", response)

    async def _fill_gaps(self, response: nio.SyncResponse, since: str | None) -> None:
        """Deliver the events a *limited* timeline left out, so no message is ever skipped.

        When more events arrived in a room than the sync returns, the server says so
        (``limited``); the rest are fetched with /messages between the previous position and
        the start of the returned timeline, and handed to the callbacks oldest first.
        """
        if not since:
            return
        for room_id, info in response.rooms.join.items():
            if not info.timeline.limited or not info.timeline.prev_batch:
                continue
            missed = await self.events_between(room_id, info.timeline.prev_batch, since)
            room = self.client.rooms.get(room_id)
            if room is None:
                continue
            if missed:  # a limited timeline with nothing left out needs no line
                self.log.info("filling a gap of %d events in %s", len(missed), room_id)
            for event in reversed(missed):
                await self._deliver_missed(room, event)

    async def events_between(self, room_id: str, start: str | None, since: str) -> list[nio.Event]:
        """The events of ``room_id`` from ``start`` back to ``since`` (newest first), at most
        about :data:`_MAX_GAP_EVENTS`."""
        missed: list[nio.Event] = []
        while start and len(missed) < _MAX_GAP_EVENTS:
            page = await self.client.room_messages(
                room_id, start=start, end=since, direction=MessageDirection.back, limit=100
            )
            if not isinstance(page, nio.RoomMessagesResponse) or not page.chunk:
                break
            missed.extend(page.chunk)
            start = page.end if page.end != start else None
        return missed

    async def _deliver_missed(self, room: nio.MatrixRoom, event: nio.Event) -> None:
        """Hand one event a gap left out to the callbacks, decrypted where the keys are here."""
        await self._own_event(room, event)  # an answer of its own may come back this way too
        if isinstance(event, nio.MegolmEvent) and self.client.olm is not None:
            with contextlib.suppress(Exception):  # undecryptable: reported below
                event = self.client.decrypt_event(event)
        if isinstance(event, nio.RoomMessage | nio.BadEvent):
            await self._message_event(room, event)
        elif isinstance(event, nio.ReactionEvent):
            await self._reaction_event(room, event)
        elif isinstance(event, nio.MegolmEvent | nio.UnknownEncryptedEvent):
            await self._encrypted_event(room, event)

    async def receive(self, response: nio.SyncResponse) -> None:
        """Take ``response`` as if a sync had returned it (appservice mode's events): room
        state, then the callbacks."""
        await self.client.receive_response(response)
        self.synced_at, self.sync_problem = time.time(), None

    def forget_room(self, room_id: str) -> None:
        """This account left ``room_id`` (appservice mode: no sync tells the client)."""
        self._joined.discard(room_id)
        self._forget_rules(room_id)
        self.on_rooms_changed()

    def _forget_rules(self, room_id: str) -> None:
        if isinstance(self.client, RoomRulesClient):
            self.client.room_rules.pop(room_id, None)

    def stop(self) -> None:
        """Make :meth:`sync_forever` return after the current request."""
        self._stopping = True
        self._nudged.set()  # a resting loop ends now
        for waiter in self._echo_waiters.values():  # nothing more will be heard
            if not waiter.done():
                waiter.set_result(None)

    async def _room_send(
        self, room_id: str, event_type: str, content: dict[str, Any], txn_id: str | None
    ) -> nio.RoomSendResponse | nio.RoomSendError:
        """Every room event this account sends: caught up first when it rests (:meth:`_current`),
        encrypted where the room is, to every device of its members."""
        await self._current()
        return await self.client.room_send(
            room_id, event_type, content, tx_id=txn_id, ignore_unverified_devices=True
        )

    async def send(self, room_id: str, content: dict[str, Any], txn_id: str | None = None) -> str:
        """Send an ``m.room.message`` and return its event ID.

        The same ``txn_id`` from the same device is deduplicated by the homeserver, which makes
        a retried send idempotent.
        """
        response = await self._room_send(room_id, "m.room.message", content, txn_id)
        if not isinstance(response, nio.RoomSendResponse):
            raise MatrixError(f"{self.user_id} cannot send to {room_id}: {response.message}")
        return response.event_id

    async def mark_read(self, room_id: str, event_id: str, thread_root: str | None) -> None:
        """A read receipt for ``event_id`` (in its thread); a failure only costs the receipt."""
        try:
            response = await self.client.update_receipt_marker(
                room_id, event_id, thread_id=thread_root or "main"
            )
        except Exception as exc:  # the receipt is a courtesy: never worth the answer
            self.log.debug("receipt for %s in %s failed: %s", event_id, room_id, exc)
            return
        if isinstance(response, nio.ErrorResponse):
            self.log.debug("receipt for %s in %s failed: %s", event_id, room_id, response.message)

    async def react(self, room_id: str, event_id: str, key: str, txn_id: str) -> str | None:
        """React to ``event_id`` with ``key``; the reaction's event ID (None when refused)."""
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
        response = await self._room_send(room_id, "m.reaction", content, txn_id)
        if not isinstance(response, nio.RoomSendResponse):
            self.log.warning("cannot react in %s: %s", room_id, response.message)
            return None
        return response.event_id

    async def download(self, attachment: Attachment, max_bytes: int) -> bytes:
        """The file of a media message (see :mod:`mindroom.adapters.matrix.media`)."""
        return await download(self.client, attachment, max_bytes)

    async def sent_with(self, room_id: str, txn_id: str) -> str | None:
        """The event this account's device sent to ``room_id`` with transaction ``txn_id``,
        among the room's latest :data:`_SENT_LOOKUP_EVENTS` events; None when not there (never
        sent). The homeserver shows a device its own transaction IDs, so nothing is sent to
        find out."""
        page = await self.client.room_messages(  # no start: from the room's latest event
            room_id, start="", direction=MessageDirection.back, limit=_SENT_LOOKUP_EVENTS
        )
        if not isinstance(page, nio.RoomMessagesResponse):
            self.log.warning("cannot look for %s in %s: %s", txn_id, room_id, page)
            return None
        for event in page.chunk:
            unsigned = event.source.get("unsigned") or {}
            if event.sender == self.user_id and unsigned.get("transaction_id") == txn_id:
                return str(event.event_id)
        return None

    async def redact(self, room_id: str, event_id: str, reason: str) -> None:
        """Redact ``event_id``; a failure is logged (it may be gone already)."""
        response = await self.client.room_redact(room_id, event_id, reason=reason)
        if isinstance(response, nio.ErrorResponse):
            self.log.warning("cannot redact %s in %s: %s", event_id, room_id, response.message)

    async def set_typing(self, room_id: str, typing: bool) -> None:
        """Show or hide the typing notice; a failure only costs the notice."""
        response = await self.client.room_typing(room_id, typing, timeout=_TYPING_TIMEOUT_MS)
        if isinstance(response, nio.ErrorResponse):
            self.log.debug("typing notice in %s failed: %s", room_id, response.message)

    @contextlib.asynccontextmanager
    async def typing(self, room_id: str) -> AsyncIterator[None]:
        """Show a typing notice while the block runs, refreshed while it lasts.

        A quick answer needs none (it would be two more events in the room), so the notice
        appears only once the block has run for a moment.
        """
        shown = False

        async def keep_typing() -> None:
            nonlocal shown
            await asyncio.sleep(_TYPING_DELAY_S)
            while True:
                shown = True
                await self.set_typing(room_id, True)
                await asyncio.sleep(_TYPING_REFRESH_S)

        task = asyncio.create_task(keep_typing(), name=f"typing:{self.name}:{room_id}")
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            if shown:
                await self.set_typing(room_id, False)

    async def body_of(self, room_id: str, event_id: str) -> str | None:
        """The text ``event_id`` shows as first posted (decrypted where this account has the
        key); None when it cannot be read (nor the homeserver asked)."""
        try:
            response = await self.client.room_get_event(room_id, event_id)
        except (aiohttp.ClientError, TimeoutError) as exc:
            self.log.debug("cannot read %s in %s: %s", event_id, room_id, exc)
            return None
        if not isinstance(response, nio.RoomGetEventResponse):
            return None
        event: nio.Event = response.event
        if isinstance(event, nio.MegolmEvent) and self.client.olm is not None:
            try:
                event = self.client.decrypt_event(event)
            except Exception:  # no key here: unreadable
                return None
        body = getattr(event, "body", None)
        return body if isinstance(body, str) else None

    async def thread_senders(self, room_id: str, thread_root: str) -> set[str]:
        """Everyone who has posted in a thread, its root included (asks the server)."""
        senders: set[str] = set()
        root = await self.client.room_get_event(room_id, thread_root)
        if isinstance(root, nio.RoomGetEventResponse):
            senders.add(root.event.sender)
        try:
            async for event in self.client.room_get_event_relations(
                room_id, thread_root, RelationshipType.thread
            ):
                senders.add(event.sender)
        except (aiohttp.ClientError, TimeoutError, AttributeError) as exc:
            # the homeserver did not answer; or it answered with an error (a thread whose root
            # it does not know), on which nio's iterator fails with AttributeError
            self.log.warning("cannot read thread %s in %s: %s", thread_root, room_id, exc)
        return senders

    async def join(self, room: str) -> str:
        """Join a room by ID or alias; returns the room ID."""
        response = await self.client.join(room)
        if not isinstance(response, nio.JoinResponse):
            raise MatrixError(f"{self.user_id} cannot join {room}: {response.message}")
        self._joined.add(response.room_id)
        self.on_rooms_changed()
        return response.room_id

    async def leave(self, room_id: str) -> None:
        """Leave ``room_id`` (a failure is logged: the room may already be gone)."""
        response = await self.client.room_leave(room_id)
        if isinstance(response, nio.ErrorResponse):
            self.log.warning("cannot leave %s: %s", room_id, response.message)
        self._joined.discard(room_id)
        self.client.rooms.pop(room_id, None)
        self._forget_rules(room_id)
        self.on_rooms_changed()

    async def close(self) -> None:
        """Stop syncing and close the HTTP session."""
        self.stop()
        await self.client.close()
        if self.backup is not None:
            self.backup.close()
