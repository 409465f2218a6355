"""What the bot keeps in memory about ongoing conversations (all of it rebuildable).

* which events were already seen (several accounts hear the same room),
* who has posted in each thread (so a thread keeps its agent),
* the last few messages of each room (context for the router model),
* how many agent replies followed the last human message (the hand-off cap).

Nothing here is durable: after a restart, thread participants are asked from the homeserver
again, and the ledger (not this) says what was answered.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Collection

from mindroom.adapters.matrix.events import IncomingMessage

REMEMBERED = 10_000

Conversation = tuple[str, str | None]  # (room ID, thread root or None)


class ConversationState:
    """Bounded, in-memory conversation facts; pure data, no I/O."""

    def __init__(self, context_messages: int) -> None:
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._noted: OrderedDict[str, None] = OrderedDict()
        self._threads: OrderedDict[Conversation, set[str]] = OrderedDict()
        self._hops: dict[Conversation, int] = {}
        self._recent: dict[str, deque[str]] = {}
        self._context_messages = context_messages

    def first_sight(self, event_id: str) -> bool:
        """True the first time ``event_id`` is offered; remembers it."""
        if event_id in self._seen:
            return False
        self._seen[event_id] = None
        if len(self._seen) > REMEMBERED:
            self._seen.popitem(last=False)
        return True

    def forget(self, event_id: str) -> None:
        """Offer ``event_id`` as new again (its handling failed before it was claimed)."""
        self._seen.pop(event_id, None)

    def defer(self, event_id: str) -> None:
        """Offer ``event_id`` as new again, though it was read: another process's account
        was to claim it, and that account may run here next (its delivery is then new)."""
        self.forget(event_id)
        self._noted.setdefault(event_id, None)

    def seen(self, event_id: str) -> bool:
        """True when ``event_id`` was offered to :meth:`first_sight` (it is not marked here),
        or read and deferred."""
        return event_id in self._seen or event_id in self._noted

    def thread_senders(self, room_id: str, thread_root: str | None) -> set[str] | None:
        """Known posters of a thread, None when the thread was never looked at."""
        return self._threads.get((room_id, thread_root)) if thread_root else set()

    def set_thread_senders(self, room_id: str, thread_root: str, senders: set[str]) -> set[str]:
        """Record who posted in a thread (merging with what is known)."""
        known = self._threads.setdefault((room_id, thread_root), set())
        known.update(senders)
        if len(self._threads) > REMEMBERED:
            self._threads.popitem(last=False)
        return known

    def note(self, message: IncomingMessage, own_user_ids: Collection[str]) -> None:
        """Keep the room's recent messages; a human message resets the agent-hop count.
        A message offered again (:meth:`forget`) is kept once."""
        if message.event_id:
            if message.event_id in self._noted:
                return
            self._noted[message.event_id] = None
            if len(self._noted) > REMEMBERED:
                self._noted.popitem(last=False)
        recent = self._recent.setdefault(message.room_id, deque(maxlen=self._context_messages))
        if not message.is_edit:
            recent.append(f"{message.sender}: {message.body[:500]}")
        if message.sender not in own_user_ids and not message.is_notice:
            self._hops[(message.room_id, message.thread_root)] = 0
            self._hops[(message.room_id, None)] = 0

    def set_context_messages(self, count: int) -> None:
        """How many recent messages per room to keep from now on (hot reload)."""
        if count != self._context_messages:
            self._context_messages = count
            self._recent = {
                room: deque(messages, maxlen=count) for room, messages in self._recent.items()
            }

    def recent(self, room_id: str) -> list[str]:
        """The room's last messages, oldest first."""
        return list(self._recent.get(room_id, ()))

    def count_agent_reply(self, conversation: Conversation) -> int:
        """Count one more agent reply in ``conversation``; returns the hops so far."""
        hops = self._hops.get(conversation, 0) + 1
        self._hops[conversation] = hops
        return hops
