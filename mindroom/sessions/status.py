"""What ``!status`` and ``mindroom sessions list|show`` say about a session.

:func:`gather` reads one conversation's status from the ledger (the session book, the
compaction record, the flush state); :func:`status_text` and :func:`status_line` write it,
and :func:`status_json` gives it to scripts. Writing is pure.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from typing import Any

from mindroom.memory.flush.state import FlushEntry
from mindroom.sessions.book import SessionRecord
from mindroom.store.ledger import Ledger


@dataclass(frozen=True)
class SessionStatus:
    """A conversation's session with its compactions and its flush state."""

    record: SessionRecord
    agno_session: str  # the Agno session its turns run in now (with compaction's suffix)
    compactions: int
    flush: FlushEntry | None


async def gather(ledger: Ledger, record: SessionRecord) -> SessionStatus:
    """The status of ``record``'s session, from the ledger."""
    from mindroom.sessions.compaction import (
        compacted_id,  # compaction builds on the runtime: lazily
    )

    compactions, _ = await ledger.compactions.get(record.session_id)
    agno_session = compacted_id(record.session_id, compactions)
    flush = await ledger.flush.entry(
        FlushEntry(record.owner, agno_session, record.requester or None).key
    )
    return SessionStatus(record, agno_session, compactions, flush)


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} s ago"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min ago"
    if seconds < 36 * 3600:
        return f"{seconds / 3600:.1f} h ago"
    return f"{seconds / 86400:.1f} days ago"


def _when(moment: float, now: float) -> str:
    stamp = dt.datetime.fromtimestamp(moment, dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return f"{stamp} ({_ago(now - moment)})"


def _flush_text(flush: FlushEntry | None, now: float) -> str:
    if flush is None:
        return "nothing flushed yet"
    parts = [f"{flush.cursor} messages extracted"]
    if flush.flushed_updated_at:
        parts.append(f"last flush covered the session as of {_when(flush.flushed_updated_at, now)}")
    if flush.in_flight:
        parts.append("a flush is running")
    elif flush.dirty:
        parts.append("new turns wait for the flush")
    if flush.failures:
        parts.append(f"{flush.failures} failed attempts, next {_when(flush.next_attempt_at, now)}")
    return "; ".join(parts)


def status_text(status: SessionStatus, now: float, context_tokens: int | None = None) -> str:
    """The status of one conversation's session, as ``!status`` posts it (markdown)."""
    r = status.record
    who = f" with {r.requester}" if r.requester else ""
    context = f" of {context_tokens:,}" if context_tokens else ""
    lines = [
        f"**{r.owner}**{who}: session `{status.agno_session}`",
        f"- started {_when(r.started_at, now)}: {r.reason or 'new'}",
        f"- last active {_ago(now - r.last_active_at)}; {r.turns} turns",
        f"- tokens: {r.input_tokens:,} in, {r.output_tokens:,} out; last prompt "
        f"{r.context_tokens:,}{context} tokens" + (f" ({r.model})" if r.model else ""),
        f"- compactions: {status.compactions}",
        f"- memory flush: {_flush_text(status.flush, now)}",
    ]
    return "\n".join(lines)


def status_line(status: SessionStatus, now: float) -> str:
    """One line of ``mindroom sessions list``."""
    r = status.record
    return (
        f"{r.key}  session={status.agno_session}  kind={r.kind}  turns={r.turns}  "
        f"tokens={r.total_tokens}  compactions={status.compactions}  "
        f"active={_ago(now - r.last_active_at)}"
    )


def status_json(status: SessionStatus) -> dict[str, Any]:
    """The status as plain data (``--json``)."""
    record = asdict(status.record)
    record["total_tokens"] = status.record.total_tokens
    flush = asdict(status.flush) if status.flush else None
    return {
        **record,
        "agno_session": status.agno_session,
        "compactions": status.compactions,
        "flush": flush,
    }
