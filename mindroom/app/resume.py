"""What a previous run claimed but did not finish (a crash, a ``kill -9``): found at start-up,
before any event is heard, so the catch-up does not answer a resumed message a second time."""

from __future__ import annotations

import logging
import time

from mindroom.adapters.matrix.events import IncomingMessage, parse_message
from mindroom.pipeline.conversation import ConversationState
from mindroom.store.ledger import Ledger, PendingEvent

logger = logging.getLogger(__name__)

Unfinished = list[tuple[IncomingMessage, PendingEvent]]


async def unfinished(
    ledger: Ledger, state: ConversationState, catch_up_seconds: float, collect: bool = True
) -> Unfinished:
    """The unfinished messages within the catch-up window, oldest first (marked seen in
    ``state``); older ones are skipped and an unreadable one is failed.

    With ``collect`` False only the old ones are skipped: several processes share the
    ledger, and each takes what its own accounts left (:mod:`mindroom.cluster.share`)."""
    window_start = time.time() - catch_up_seconds
    expired = await ledger.expire(older_than=window_start)
    await ledger.forget_finished_reply_parts()
    if expired:
        logger.info("%d unfinished replies are older than the catch-up window; skipped", expired)
    found: Unfinished = []
    if not collect:
        return found
    for pending in await ledger.pending(newer_than=window_start):
        message = parse_message(pending.room_id, pending.source)
        if message is None:
            await ledger.finish(pending.event_id, "failed")
            continue
        state.first_sight(message.event_id)  # a re-delivery by the catch-up is ignored
        found.append((message, pending))
    return found
