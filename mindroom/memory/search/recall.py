"""Recall in every turn: the memory block put into the agent's context before it answers.

The system recalls; the model does not have to remember to. The block holds:

* ``MEMORY.md``, the curated long-term memory, as it is (capped at ``max_entrypoint_lines``,
  with a marker saying how many lines were left out and how to read them);
* recent entries (today's and yesterday's daily files) that are relevant to the message, best
  first, at most ``max_daily_lines`` lines;
* older entries (every other file) relevant to the message, best first, at most
  ``recall_hits``.

Relevant means what :mod:`mindroom.memory.search.relevance` says: the hit shares terms specific
enough to be about the same thing. So chit-chat gets no entries, and yesterday's file is not
pasted whole into every turn. Entries show their date, so "when" questions can be answered.
The whole block fits in ``recall_max_chars``: the relevant entries are placed first, and
``MEMORY.md`` is cut (with its marker) only when it would not fit beside them. The block is
clearly delimited and names its files, so the agent does not re-read them.

A mem0 scope has no files: its block is mem0's own semantic retrieval, the ``recall_hits``
memories most similar to the message, kept only when their cosine similarity reaches the gate's
``min_similarity`` (the rule the file backend applies to its embedder's hits; mem0 has no
keyword half), in the same frame and within the same ``recall_max_chars``.

:func:`agent_recall` is the one place that decides what a turn of an agent recalls (its own
memory, the requester's private one, its teams'); the runtime and ``mindroom memory recall``
both call it, so what the command prints is what a turn gets.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from mindroom.config.schema import Config, FileMemoryConfig
from mindroom.errors import MemoryStoreError
from mindroom.memory.backend import MemoryBackend, in_engine, keeps_files
from mindroom.memory.files.markdown import MemoryEntry
from mindroom.memory.files.store import FileMemory
from mindroom.memory.jobs.consolidate.records import ConsolidationRecords, db_path
from mindroom.memory.jobs.insights import INSIGHT_WEIGHT
from mindroom.memory.mem0 import Mem0Memory
from mindroom.memory.mem0.memory import MEM0_PATH
from mindroom.memory.ops_events import OpEvent, emit
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.audience import AudiencePolicy
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.policy.view import AgentView
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.scope import ENTRYPOINT
from mindroom.memory.search.budget import budgeted_section
from mindroom.memory.search.delta import revisions_of
from mindroom.memory.search.hybrid import hybrid_search
from mindroom.memory.search.index import SearchHit
from mindroom.memory.search.relations import RelationSettings, boosted, related_entries
from mindroom.memory.search.relevance import Candidate, Gate, judge, relevant
from mindroom.memory.search.session_source import recall_section

logger = logging.getLogger(__name__)

OPEN = "<memory>"
CLOSE = "</memory>"
POOL = 100  # search hits judged per turn: the relevant ones are among the best of them
ALWAYS_LIMIT = 50  # entries of "context: all" categories a turn may get (then the budget)


@dataclass(frozen=True)
class RecallSettings:
    """How much of a memory a turn sees (``memory.file`` in the config)."""

    max_entrypoint_lines: int = 200
    max_recent_lines: int = 20
    hits: int = 5
    max_chars: int = 12000
    gate: Gate = field(default_factory=Gate)

    @classmethod
    def of(cls, settings: FileMemoryConfig) -> RecallSettings:
        """The settings ``memory.file`` of a config gives."""
        return cls(
            max_entrypoint_lines=settings.max_entrypoint_lines,
            max_recent_lines=settings.max_daily_lines,
            hits=settings.recall_hits,
            max_chars=settings.recall_max_chars,
            gate=Gate(
                rare_word_entries=settings.recall_gate.rare_word_entries,
                min_similarity=settings.recall_gate.min_similarity,
                min_similarity_with_keywords=settings.recall_gate.min_similarity_with_keywords,
            ),
        )


def _line(entry: MemoryEntry) -> str:
    date = entry.date
    when = f" ({date.isoformat()})" if date else ""
    if entry.path == MEM0_PATH:  # a mem0 memory: no file and line to name, its id instead
        return f"- [{entry.id}]{when} {entry.text}"
    return f"- [{entry.path}:{entry.start_line}]{when} {entry.text}"


def _relevant(
    memory: FileMemory,
    query: str,
    settings: RecallSettings,
    now: dt.datetime,
    view: AgentView,
) -> tuple[list[Candidate], list[Candidate]]:
    """The relevant entries the view may read of today's and yesterday's files, and of the
    other files (not ``MEMORY.md``, which is shown as it is), best first; recency breaks ties;
    at most a category's ``rag_length`` of each category."""
    if settings.max_recent_lines <= 0 and settings.hits <= 0:
        return [], []
    fused = hybrid_search(
        memory,
        query,
        POOL,
        weights=memory.search_weights,
        exclude_paths=frozenset({ENTRYPOINT}),
        now=now,
        only=view.reading(),
    )
    hits = [SearchHit(f.entry, f.score) for f in fused]
    similarity = {(f.entry.path, f.entry.start_line): f.similarity for f in fused}
    judged = judge(
        memory.index,
        query,
        hits,
        settings.gate,
        now=now,
        similarity={key: value for key, value in similarity.items() if value is not None},
    )
    # the read gate on each entry as read now (the search's filter is its SQL form)
    found = [c for c in judged if relevant(c, settings.gate) and not view.hidden(c.entry)]
    # insights are surfaced with low weight: below a fact that is as relevant
    found = [
        replace(c, score=c.score * INSIGHT_WEIGHT) if c.entry.fields.type == "insight" else c
        for c in found
    ]
    found.sort(key=lambda c: (-c.score, -(c.entry.date or dt.date.min).toordinal()))
    found = _within_rag_lengths(_linked_first(memory, found, view), view.access)
    days = (now.date(), now.date() - dt.timedelta(days=1))
    recent_paths = {memory.scope.daily_path(day.isoformat()) for day in days}
    recent = [c for c in found if c.entry.path in recent_paths]
    older = [c for c in found if c.entry.path not in recent_paths]
    return recent, older


def _linked_first(memory: FileMemory, found: list[Candidate], view: AgentView) -> list[Candidate]:
    """``found`` with the relations boost (a hit linked to another hit rises a little)."""
    boost = view.relations.boost if view.relations else 0.0
    if not boost:
        return found
    by_place = {(c.entry.path, c.entry.start_line): c for c in found}
    ranked = boosted(memory, [(c.entry, c.score) for c in found], boost)
    return [replace(by_place[(e.path, e.start_line)], score=score) for e, score in ranked]


def _related_section(
    memory: FileMemory, picked: list[MemoryEntry], view: AgentView, budget: list[int]
) -> str:
    """Up to two entries linked to the best entries shown that the search did not bring."""
    if not view.relations or not picked:
        return ""
    related = related_entries(memory, picked[:3], lambda e: not view.hidden(e), limit=2)
    found = [Candidate(entry, 0.0, 0.0) for entry, _ in related]
    return _entries_section("### Linked to these", found, budget, picked=picked)


def _within_rag_lengths(found: list[Candidate], access: CategoryAccess) -> list[Candidate]:
    """``found`` (best first) without what a category's ``rag_length`` leaves out, and
    without ``context: all`` categories (their entries have a section of their own)."""
    kept: list[Candidate] = []
    taken: dict[str, int] = {}
    for candidate in found:
        category = candidate.entry.fields.category_or(access.default)
        rule = access.rule(category)
        if rule is not None and rule.context == "all":
            continue
        limit = rule.rag_length if rule is not None else None
        if limit is not None and taken.get(category, 0) >= limit:
            continue
        taken[category] = taken.get(category, 0) + 1
        kept.append(candidate)
    return kept


def _always(memory: FileMemory, view: AgentView) -> list[Candidate]:
    """The entries of ``context: all`` categories the view may read, outside ``MEMORY.md``
    (shown whole), most recently changed first."""
    everywhere = {r.name for r in view.access.rules if r.context == "all"}
    reading = view.reading()
    granted = everywhere & reading.categories if reading.categories is not None else everywhere
    if not granted:
        return []
    only = replace(reading, categories=frozenset(granted))
    entries = memory.index.select(only.where(), ALWAYS_LIMIT)
    return [
        Candidate(e, 1.0, 0.0, None) for e in entries if e.path != ENTRYPOINT and not view.hidden(e)
    ]


def _entries_section(
    title: str,
    found: list[Candidate],
    budget: list[int],
    *,
    lines: int | None = None,
    entries: int | None = None,
    picked: list[MemoryEntry] | None = None,
) -> str:
    """A section of entries, best first, while they fit in ``lines`` lines, ``entries`` entries
    and the budget (a one-item list of the characters left, spent here); the entries shown are
    added to ``picked``."""
    shown: list[str] = []
    used = 0
    for candidate in found:
        line = _line(candidate.entry)
        count = line.count("\n") + 1
        cost = len(line) + 1 + (0 if shown else len(title) + 2)
        if len(shown) == entries:
            break
        if (lines is not None and used + count > lines) or cost > budget[0]:
            continue  # a shorter one further down may still fit
        budget[0] -= cost
        used += count
        shown.append(line)
        if picked is not None:
            picked.append(candidate.entry)
    return f"{title}\n" + "\n".join(shown) if shown else ""


def _entrypoint_section(memory: FileMemory, max_lines: int, budget: int, view: AgentView) -> str:
    """``MEMORY.md``'s first lines, as many as ``max_lines`` and ``budget`` characters allow,
    with a marker naming the lines left out; entries the view may not read are left out, and
    so is guidance for people (HTML comments, see :mod:`mindroom.memory.files.lines`)."""
    head = memory.head(ENTRYPOINT, max_lines, hide=view.hidden)
    lines = head.lines
    if not any(line.strip() for _, line in lines):
        return ""
    title = f"### Long-term memory: {ENTRYPOINT}"

    def render(shown: list[tuple[int, str]]) -> str:
        body = "\n".join([title, *(line for _, line in shown)])
        left = head.readable - len(shown)
        if left > 0:  # the read starts after the last line shown and runs to the file's end
            start = shown[-1][0] + 1 if shown else 1
            body += (
                f"\n[... {left} more lines not shown: read them with "
                f'memory_get("{ENTRYPOINT}", {start}, {head.total - start + 1})]'
            )
        return body

    text = render(lines)
    while len(text) + 2 > budget and lines:
        lines = lines[: max(0, min(len(lines) - 1, len(lines) * budget // len(text)))]
        text = render(lines)
    return text if len(text) + 2 <= budget else ""


def build_recall(
    memory: FileMemory,
    query: str,
    settings: RecallSettings,
    *,
    now: dt.datetime | None = None,
    label: str = "",
    count: bool = True,
    access: CategoryAccess | None = None,
    thread: str | None = None,
    relations: RelationSettings | None = None,
    sessions: bool = False,
    room: RoomAudience | None = None,
    policy: AudiencePolicy = "strict",
) -> str:
    """The recall block of ``memory`` for a turn answering ``query`` ('' when it is empty),
    of what ``access`` (default: every category) may read and ``room`` (the room the answer
    is shown in, under ``policy``; None: no room) may show; in ``thread`` it starts with
    what changed since the thread's last turn (:mod:`mindroom.memory.search.delta`).

    With ``count`` the entries it shows are counted as retrieved (consolidation looks at
    entries recalled often) and the thread's revision moves on; a preview (``mindroom memory
    recall``) does neither.
    """
    memory.prepare()
    now = now or dt.datetime.now()
    view = AgentView(
        memory,
        access or CategoryAccess.everything(),
        relations=relations,
        room=room,
        policy=policy,
    )
    header = _delta(memory, thread, view, count) if thread else ""
    recent, older = _relevant(memory, query, settings, now, view)
    always = _always(memory, view)
    scope = f" ({label})" if label else ""
    intro = (
        f"Your memory{scope}, loaded from your memory files for this turn: the long-term "
        "memory, and the entries relevant to this message, with their dates. It is already "
        "here: do not read these files again. Search your memory for more; use the memory "
        "tools to add, update or delete."
    )
    # what is left once the frame is paid; the relevant entries go first
    budget = [settings.max_chars - len(OPEN) - len(intro) - len(CLOSE) - 6]
    picked: list[MemoryEntry] = []
    always_text = _entries_section(
        "### Always in context",
        always,
        budget,
        lines=settings.max_entrypoint_lines,
        picked=picked,
    )
    recent_text = _entries_section(
        "### Recent (today and yesterday)",
        recent,
        budget,
        lines=settings.max_recent_lines,
        picked=picked,
    )
    older_text = _entries_section(
        "### Related memories", older, budget, entries=settings.hits, picked=picked
    )
    try:
        linked_text = _related_section(memory, list(picked), view, budget)
    except Exception:  # relations are extra: never worth the recall
        logger.exception("recall of %s: linked entries not read", memory.scope_id)
        linked_text = ""
    try:
        conflicts_text = _conflicts_section(memory, picked, budget, view, count=count)
    except Exception:  # the consolidation records are extra: never worth the recall
        logger.exception("recall of %s: open conflicts not read", memory.scope_id)
        conflicts_text = ""
    entrypoint = _entrypoint_section(memory, settings.max_entrypoint_lines, budget[0], view)
    past_text = recall_section(memory, query, budget, view.conversations) if sessions else ""
    sections = (
        entrypoint,
        always_text,
        recent_text,
        older_text,
        linked_text,
        conflicts_text,
        past_text,
    )
    present = [s for s in sections if s]
    if count:  # "skipped": nothing recalled
        best = max(
            (c.similarity for c in [*recent, *older] if c.similarity is not None), default=None
        )
        status = "ok" if present else "skipped"
        emit(memory, OpEvent("context", "search", status, sim=best, thread_id=thread))
    if not present and not header:
        return ""
    return "\n\n".join([OPEN, *([header] if header else []), intro, *present, CLOSE])


def _delta(memory: FileMemory, thread: str, view: AgentView, advance: bool) -> str:
    """The delta header of ``thread`` ('' when nothing changed it may see); never fails a
    recall."""
    try:
        with revisions_of(memory) as revisions:
            return revisions.take(thread, view, advance=advance).render()
    except Exception:
        logger.exception("recall of %s: the delta header was not read", memory.scope_id)
        return ""


def _conflicts_section(
    memory: FileMemory,
    picked: list[MemoryEntry],
    budget: list[int],
    view: AgentView,
    *,
    count: bool,
) -> str:
    """The open conflicts (recorded by consolidation, not yet settled by a person) among the
    entries shown and ``MEMORY.md``'s, so the agent does not pick one side silently; counts
    the retrieval of the shown entries when ``count``. Nothing when the scope has no
    consolidation records yet."""
    path = db_path(memory.scope.state_dir)
    if not picked and not path.exists():
        return ""
    records = ConsolidationRecords(path)
    try:
        if count and picked:
            records.note_retrieved(e.id for e in picked if not e.hand_written)
        if not path.exists():
            return ""
        try:
            curated = [e for e in memory.entries_of(ENTRYPOINT) if not view.hidden(e)]
        except MemoryStoreError:  # unreadable (recall says so where it shows it)
            curated = []
        live = {e.id: e for e in [*picked, *curated]}
        conflicts = records.open_for(live)
    finally:
        records.close()
    sides: list[tuple[MemoryEntry, MemoryEntry, str]] = []
    for conflict in conflicts:  # both sides as they are now; one gone: nothing to weigh
        found = [
            live.get(i) or memory.lookup(i)
            for i in (conflict.memory_id, conflict.conflicting_memory_id)
        ]
        # a side this agent may not read is not shown, nor the conflict
        a, b = found
        if a is not None and b is not None and not (view.hidden(a) or view.hidden(b)):
            sides.append((a, b, conflict.reason))
    title = (
        "### Open conflicts (contradicting memories a person has not settled yet: when one "
        "matters, say both and ask, do not pick one)"
    )
    lines = (f"- {a.text!r} [{a.id}] / {b.text!r} [{b.id}]: {reason}" for a, b, reason in sides)
    return budgeted_section(title, lines, budget)


def build_mem0_recall(
    memory: Mem0Memory,
    query: str,
    settings: RecallSettings,
    *,
    label: str = "",
    access: CategoryAccess | None = None,
) -> str:
    """The recall block of a mem0 scope for a turn answering ``query`` ('' when it is empty):
    mem0's search, gated by similarity (see the module docstring), of what ``access`` may
    read (mem0 keeps no categories: its memories are all in the default one)."""
    view = AgentView(memory, access or CategoryAccess.everything())
    hits = view.search_sync(query, settings.hits) if settings.hits > 0 else []
    found = [
        Candidate(hit.entry, hit.score, 0.0, hit.score)
        for hit in hits
        if hit.score >= settings.gate.min_similarity
    ]
    scope = f" ({label})" if label else ""
    intro = (
        f"Your memory{scope}, the memories relevant to this message, found by meaning for "
        "this turn. It is already here: do not search for these again. Search your memory for "
        "more; use the memory tools to add, update or delete (by the id in brackets)."
    )
    budget = [settings.max_chars - len(OPEN) - len(intro) - len(CLOSE) - 6]
    related = _entries_section("### Related memories", found, budget, entries=settings.hits)
    return "\n\n".join([OPEN, intro, related, CLOSE]) if related else ""


def recall_block(
    config: Config,
    memory: MemoryBackend,
    text: str,
    label: str = "",
    now: dt.datetime | None = None,
    *,
    count: bool = True,
    reader: str | None = None,
    members: Sequence[str] | None = None,
    thread: str | None = None,
    room: RoomAudience | None = None,
) -> str:
    """The recall block of ``memory`` for ``text`` with ``config``'s settings, of what agent
    ``reader`` (a team, with its ``members``) may read (None: every category) and ``room``
    (where the answer is shown; None: no room) may show; a failure is logged and recalls
    nothing (recall must never cost the answer)."""
    settings = RecallSettings.of(config.memory.file)
    access = CategoryAccess.for_owner(config, reader, members)
    try:
        if in_engine(memory):
            return build_mem0_recall(memory, text, settings, label=label, access=access)
        if not keeps_files(memory):
            return ""
        return build_recall(
            memory,
            text,
            settings,
            now=now,
            label=label,
            count=count,
            access=access,
            thread=thread,
            relations=RelationSettings.of(config.memory.relations),
            sessions=config.memory.sessions_source,
            room=room,
            policy=config.memory.audience,
        )
    except Exception:
        logger.exception("recall of %s failed", memory.scope_id)
        return ""


def agent_recall(
    config: Config,
    memories: MemoryRegistry,
    agent: str,
    text: str,
    requester: str | None = None,
    *,
    private_recall: bool = True,
    now: dt.datetime | None = None,
    count: bool = True,
    thread: str | None = None,
    room: RoomAudience | None = None,
) -> tuple[MemoryBackend | None, str]:
    """The memory of ``agent`` for ``requester`` and what a new turn answering ``text`` in
    ``thread`` recalls: its own memory's block and each of its teams' (blocking: run it in a
    thread), of what ``room`` (where the answer is shown; None: no room) may show.

    Without ``private_recall`` a private agent gets neither: its answer may be read by
    people other than the requester (see :mod:`mindroom.pipeline.turns`).
    """
    if not private_recall and config.agents[agent].private is not None:
        return None, ""
    memory = memories.for_agent(agent, requester)
    blocks = (
        [
            recall_block(
                config,
                memory,
                text,
                now=now,
                count=count,
                reader=agent,
                thread=thread,
                room=room,
            )
        ]
        if memory is not None
        else []
    )
    for team in config.teams_of(agent):
        team_memory = memories.for_team(config.teams[team].agents)
        if team_memory is not None:  # what the agent may read, in the team's memory too
            label = f"team {team}"
            blocks.append(
                recall_block(
                    config,
                    team_memory,
                    text,
                    label,
                    now,
                    count=count,
                    reader=agent,
                    thread=thread,
                    room=room,
                )
            )
    return memory, "\n\n".join(b for b in blocks if b)
