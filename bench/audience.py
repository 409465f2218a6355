"""Audience: a fact is never shown in a room more people can read than where it was told.

Two people (Alice, Bob), a shared agent (``general``), a team (``crew``: general and helper)
and a private companion (``buddy``, one memory per person), in five rooms as the bot sees them
(:class:`~mindroom.memory.policy.gate.RoomAudience`, as ``BotPresence.audience`` builds it):
Alice's DM, Bob's DM, an invite-only room of both, an encrypted invite-only room of both, and a
lobby anyone can join. ``--facts`` facts (synthetic, each with a unique made-up word) are
planted as the product writes them, each through a view made for the room it was told in, so
the audience is stamped as in a turn: the flush's writer (``store_facts`` into the daily file),
the memory tool (``add_memory``), the long-term file (``MEMORY.md``, as curation promotes a
fact) and past conversations (the session index, with the room's audience word, as the
transcript indexer keeps them). The shared agent's and the team's facts are told in every
room, the companion's in each person's DM, into that person's private memory.

Then every read path is asked from every room, by each person who reads it, through the
product's own calls: recall (``agent_recall`` for the agent and the companion, the team
leader's ``recall_block``; with past conversations as a source), the memory tools
(``search_memories``, ``list_memories``, ``get_memory`` of every planted id, ``memory_get``
of every memory file and transcript, page by page) and ``memory_query``, each over the
turn's tools (``MemoryToolsets.for_turn``); and the delta header of a thread in every room,
read after each fact is planted (those recalls count, so each thread's revision moves on). A
turn of the companion where its person's private memory may not be used gets no memory
(``private_memory_allowed``), as in the runtime: its reads are counted, and show nothing.

A fact is allowed in a room when everyone who can read that room could read the room it was
told in (worked out here from the rooms' members and join rules, not with the product's
``covers``). A **leak** is a fact's word in the output of a read asked from a room where it is
not allowed (counted once per read and fact). ``reads`` is the number of reads done (path,
room and person, query). ``recalled_where_allowed`` is the share of (fact, allowed room and
person) pairs where recall, asked with the fact's own words, shows it. The same share is
measured again with ``memory.audience: shared`` (no audience rule, the behaviour before
audiences) on the same data, with its leaks; both use recall as a preview (``count`` off),
so neither run changes what the other sees.

    python bench/audience.py [--facts 200] [--seed 11]

Search is by keywords alone (``memory.embedder: none``), as in the tests.

The output ends with the lines (the last is the contract)::

    shared: leaks=N recalled_where_allowed=F
    audience_leaks=N reads=N recalled_where_allowed=F
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mindroom.adapters.agno.memory_tools import MemoryTools  # noqa: E402
from mindroom.adapters.agno.memory_toolset import MemoryToolsets  # noqa: E402
from mindroom.config import parse_config  # noqa: E402
from mindroom.config.schema import Config  # noqa: E402
from mindroom.memory.backend import MemoryBackend  # noqa: E402
from mindroom.memory.files.facts import store_facts  # noqa: E402
from mindroom.memory.files.store import FileMemory, today  # noqa: E402
from mindroom.memory.policy.access import CategoryAccess  # noqa: E402
from mindroom.memory.policy.audience import AudienceBook, word_for  # noqa: E402
from mindroom.memory.policy.consent import Person, WriteConsent  # noqa: E402
from mindroom.memory.policy.gate import RoomAudience, private_memory_allowed  # noqa: E402
from mindroom.memory.policy.view import AgentView  # noqa: E402
from mindroom.memory.registry import MemoryRegistry  # noqa: E402
from mindroom.memory.search.recall import agent_recall, recall_block  # noqa: E402
from mindroom.memory.search.relations import RelationSettings  # noqa: E402
from mindroom.memory.search.session_index import (  # noqa: E402
    TRANSCRIPT_DIR,
    TranscriptMessage,
    session_name,
)
from mindroom.memory.search.session_source import close_all, index_transcript  # noqa: E402
from mindroom.pipeline.turns import private_session_id, session_id_for  # noqa: E402

ALICE = "@alice:bench.example"
BOB = "@bob:bench.example"
ANYONE = "(anyone who finds the room)"
AGENT, TEAM, COMPANION = "general", "crew", "buddy"
MEMBERS = ["general", "helper"]
WRITERS = ("flush", "tool", "long-term", "conversation")
TOKEN_RE = re.compile(r"\bzq[a-z]{6}\b")
HEADER = "Memory changes since your last turn here"

ADJECTIVES = ("blue", "spare", "old", "night", "winter", "back", "small", "second", "upper")
THINGS = ("locker", "gate", "printer", "boat", "bicycle", "freezer", "shed", "alarm", "router")
PLACES = (
    "harbour office",
    "north workshop",
    "east barn",
    "library annex",
    "garden house",
    "river depot",
    "old mill",
    "train yard",
)


@dataclass(frozen=True)
class Room:
    """A room as its state says: members (joined or invited), join rule, history
    visibility, encryption."""

    key: str
    room_id: str
    name: str
    members: frozenset[str]
    join_rule: str  # "invite" or "public"
    history: str = "shared"  # "world_readable" lets anyone read it from outside
    encrypted: bool = False

    @property
    def readers(self) -> frozenset[str]:
        """Who can read it: its members, and anyone at all unless it is closed."""
        closed = self.join_rule == "invite" and self.history != "world_readable"
        return self.members if closed else self.members | {ANYONE}

    def audience(self) -> RoomAudience:
        """The room as the bot's presence sees it (a DM: a closed room of one person and
        mindroom's accounts)."""
        closed = ANYONE not in self.readers
        if closed and len(self.members) == 1:
            return RoomAudience.private_to(next(iter(self.members)), self.room_id)
        return RoomAudience.shared(
            self.members,
            closed=closed,
            room_id=self.room_id,
            encrypted=self.encrypted,
            name=self.name,
        )


ROOMS = (
    Room("dm-alice", "!dmalice:bench.example", "", frozenset({ALICE}), "invite"),
    Room("dm-bob", "!dmbob:bench.example", "", frozenset({BOB}), "invite"),
    Room("invite-only", "!closed:bench.example", "Plans", frozenset({ALICE, BOB}), "invite"),
    Room(
        "encrypted",
        "!secret:bench.example",
        "Secrets",
        frozenset({ALICE, BOB}),
        "invite",
        encrypted=True,
    ),
    Room("lobby", "!lobby:bench.example", "Lobby", frozenset({ALICE, BOB}), "public"),
)
VANTAGES = [(room, person) for room in ROOMS for person in sorted(room.members)]


def allowed(told: Room, asked: Room) -> bool:
    """Whether a fact told in ``told`` may be shown in ``asked``: everyone who can read
    ``asked`` could read ``told``."""
    return asked.readers <= told.readers


@dataclass
class Fact:
    """One planted fact: its unique word, its text, whose memory (``general``, ``crew`` or
    ``buddy``), the room it was told in, who said it, and how it was written."""

    token: str
    text: str
    owner: str
    room: Room
    speaker: str
    writer: str
    entry_id: str | None = None

    def allowed_for(self, room: Room, person: str) -> bool:
        return allowed(self.room, room) and (self.owner != COMPANION or person == self.speaker)


def make_facts(count: int, rng: random.Random) -> list[Fact]:
    """``count`` facts spread over every (memory, room) pair and every writer; their words
    overlap (a small vocabulary; the facts one memory is told in one round, one in each room,
    differ only in it), their ``zq...`` word is unique."""
    places = [(AGENT, room) for room in ROOMS] + [(TEAM, room) for room in ROOMS]
    places += [(COMPANION, room) for room in ROOMS if len(room.members) == 1]
    seen: set[str] = set()
    topics: dict[tuple[str, int], str] = {}  # the words of a round's facts
    facts = []
    for n in range(count):
        owner, room = places[n % len(places)]
        writer = WRITERS[(n + n // len(places)) % len(WRITERS)]  # every writer in each room
        token = ""
        while not token or token in seen:
            token = "zq" + "".join(rng.choice("bcdfghjklmnprstvwxz") for _ in range(6))
        seen.add(token)
        # the facts one memory is told in one round say the same but for their word: a read
        # for one finds the others, told in other rooms, each one the room may not show
        topic = topics.setdefault(
            (owner, n // len(places)),
            f"{rng.choice(ADJECTIVES)} {rng.choice(THINGS)} code at the {rng.choice(PLACES)} "
            f"for vo{''.join(rng.choice('aeiou') for _ in range(5))}",
        )
        text = f"The {topic} is {token}"
        speaker = sorted(room.members)[n % len(room.members)]
        facts.append(Fact(token, text, owner, room, speaker, writer))
    return facts


def config(root: Path, policy: str) -> Config:
    doc = {
        "models": {
            "default": {
                "provider": "openai",
                "id": "unused",
                "base_url": "http://127.0.0.1:9/v1",
                "api_key": "unused",
            }
        },
        "agents": {
            "general": {"rooms": []},
            "helper": {"rooms": []},
            "buddy": {"rooms": [], "private": {"per": "user"}},
        },
        "teams": {"crew": {"agents": MEMBERS, "rooms": []}},
        "memory": {
            "auto_flush": {"enabled": False},
            "embedder": "none",
            "maintenance": {"enabled": False},
            "sources": ["memory", "sessions"],
            "audience": policy,
        },
    }
    return parse_config(json.dumps(doc), str(root / "config.yaml"))


class Bench:
    """The registry, the planted facts, and the reads with their outcome."""

    def __init__(self, cfg: Config, root: Path) -> None:
        self.config = cfg
        self.root = root
        self.memories = MemoryRegistry(cfg, root, config_dir=root)
        self.toolsets = MemoryToolsets()
        self.reads: Counter[str] = Counter()
        self.leaks: Counter[str] = Counter()
        self.shown: Counter[str] = Counter()  # facts shown where allowed (positive controls)
        self.leaked: list[str] = []

    def scope(self, owner: str, person: str) -> FileMemory:
        if owner == TEAM:
            memory = self.memories.for_team(MEMBERS)
        else:
            memory = self.memories.for_agent(owner, person if owner == COMPANION else None)
        assert isinstance(memory, FileMemory)
        return memory

    def access(self, owner: str) -> CategoryAccess:
        return CategoryAccess.for_owner(self.config, owner, MEMBERS if owner == TEAM else None)

    def check(
        self, path: str, text: str, room: Room, person: str, facts: dict[str, Fact]
    ) -> set[str]:
        """Count one read and judge every fact word in its output; the words shown."""
        self.reads[path] += 1
        found = set(TOKEN_RE.findall(text)) & facts.keys()
        for token in found:
            if facts[token].allowed_for(room, person):
                self.shown[path] += 1
            else:
                self.leaks[path] += 1
                if len(self.leaked) < 5:
                    self.leaked.append(f"{path} in {room.key} for {person}: {facts[token].text}")
        return found

    # -- the turn's memory, as the runtime gets it -----------------------------------------

    def recall(
        self, agent: str, room: Room, person: str, query: str, thread: str | None = None
    ) -> tuple[MemoryBackend | None, str]:
        """What a turn of ``agent`` for ``person`` in ``room`` gets: its memory (None: none)
        and its recall block (the team's: the leader's own)."""
        audience = room.audience()
        count = thread is not None  # a thread's revision moves only when counted
        if agent == TEAM:
            memory = self.memories.for_team(MEMBERS)
            block = recall_block(
                self.config,
                memory,  # type: ignore[arg-type]
                query,
                reader=TEAM,
                members=MEMBERS,
                thread=thread,
                room=audience,
                count=count,
            )
            return memory, block
        return agent_recall(
            self.config,
            self.memories,
            agent,
            query,
            person,
            private_recall=private_memory_allowed(person, audience),
            count=count,
            thread=thread,
            room=audience,
        )

    def tools(self, agent: str, room: Room, person: str) -> tuple[MemoryTools, Any] | None:
        """The memory tools of that turn (None: it has no memory): the toolkit and the
        ``memory_query`` function."""
        memory, _ = self.recall(agent, room, person, "")
        if memory is None:
            return None
        found = self.toolsets.for_turn(
            self.config,
            agent,
            memory,
            requester=person,
            members=MEMBERS if agent == TEAM else None,
            room=room.audience(),
        )
        toolkit = next(t for t in found if isinstance(t, MemoryTools))
        query = next(t for t in found if getattr(t, "name", "") == "memory_query")
        return toolkit, query.entrypoint

    def close(self) -> None:
        self.memories.close()
        close_all()


def threads_of(fact: Fact) -> Iterable[tuple[str, Room, str]]:
    """The (agent, room, person) whose delta header may change when ``fact`` is planted."""
    agents = {AGENT: [AGENT], TEAM: [TEAM, AGENT], COMPANION: [COMPANION]}[fact.owner]
    for agent in agents:
        for room, person in VANTAGES:
            if fact.owner != COMPANION or person == fact.speaker:
                yield agent, room, person


def thread_id(agent: str, room: Room, person: str) -> str:
    return f"{agent}:{room.room_id}:{person}"


async def write(
    bench: Bench, fact: Fact, n: int, conversations: dict[str, list[TranscriptMessage]]
) -> None:
    """Write ``fact`` (the ``n``-th) as its writer does, in the room it was told in."""
    cfg = bench.config
    memory = bench.scope(fact.owner, fact.speaker)
    audience = fact.room.audience()
    session = session_id_for(fact.owner, fact.room.room_id, None)
    if fact.owner == COMPANION:
        session = private_session_id(session, fact.speaker)
    relations = RelationSettings.of(cfg.memory.relations)
    view = AgentView(
        memory, bench.access(fact.owner), relations=relations, room=audience, policy="strict"
    )
    if fact.writer == "flush":
        written, _ = store_facts(
            view,
            [fact.text],
            turns=1,
            daily_cap=10**6,
            run=session,
            path=memory.scope.daily_path(today()),
            user_id=fact.speaker,
            people=[Person(fact.speaker)],
        )
        assert written, f"the flush did not write {fact.text!r}"
    elif fact.writer == "tool":
        toolkit = bench.toolsets.for_turn(
            cfg,
            fact.owner,
            memory,
            requester=fact.speaker,
            members=MEMBERS if fact.owner == TEAM else None,
            room=audience,
        )[0]
        assert isinstance(toolkit, MemoryTools)
        said = await toolkit.calls.add(fact.text, None, None, False)
        assert said.startswith("remembered"), said
    elif fact.writer == "long-term":
        added = view.append_unique_sync(
            fact.text, actor="curation", path="MEMORY.md", consent=WriteConsent.model()
        )
        assert added is not None, fact.text
    else:
        clock = time.time() - 3600 + 2 * n
        messages = conversations[session]
        messages.append(TranscriptMessage("user", fact.text, fact.speaker, clock))
        messages.append(TranscriptMessage("assistant", "Noted.", None, clock + 1))
        word = word_for(audience, AudienceBook(memory.scope.state_dir))
        index_transcript(memory, session, messages, min_new=1, audience=word)


async def plant(bench: Bench, facts: list[Fact], token_of: dict[str, Fact]) -> None:
    """Write each fact as the product would in its room, then read every delta header it
    may show up in."""
    for agent in (AGENT, TEAM, COMPANION):  # a first turn in each thread: its revision starts
        for room, person in VANTAGES:
            bench.recall(agent, room, person, "hello", thread_id(agent, room, person))
    conversations: dict[str, list[TranscriptMessage]] = defaultdict(list)
    for n, fact in enumerate(facts):
        await write(bench, fact, n, conversations)
        for agent, room, person in threads_of(fact):
            _, block = bench.recall(agent, room, person, "hello", thread_id(agent, room, person))
            # the header of each block (the agent's, each of its teams')
            header = "\n".join(p for p in block.split("\n\n") if p.startswith(HEADER))
            bench.check("delta header", header, room, person, token_of)
    for fact in facts:  # the ids the tools gave them (a conversation has none)
        if fact.writer != "conversation":
            memory = bench.scope(fact.owner, fact.speaker)
            entry = next(e for e in memory.list_sync(10**5) if fact.token in e.text)
            fact.entry_id = entry.id


def queries_of(agent: str, facts: list[Fact]) -> list[Fact]:
    """The facts whose words each agent is asked with: its own memory's, and for the shared
    agent its team's too (its recall holds the team's block)."""
    wanted = {AGENT: {AGENT, TEAM}, TEAM: {TEAM}, COMPANION: {COMPANION}}[agent]
    return [f for f in facts if f.owner in wanted]


def own_recall(agent: str, fact: Fact) -> bool:
    """Whether ``agent``'s recall is the one that should show ``fact`` (its owner's)."""
    return fact.owner == agent


def recall_pass(
    bench: Bench, facts: list[Fact], token_of: dict[str, Fact], path: str
) -> tuple[int, int]:
    """Ask recall with every fact's words from every room; returns (pairs where the fact is
    allowed and recall should show it, pairs where it did)."""
    pairs = hits = 0
    for agent in (AGENT, TEAM, COMPANION):
        for room, person in VANTAGES:
            for fact in queries_of(agent, facts):
                _, block = bench.recall(agent, room, person, fact.text)
                found = bench.check(path, block, room, person, token_of)
                if own_recall(agent, fact) and fact.allowed_for(room, person):
                    pairs += 1
                    hits += fact.token in found
    return pairs, hits


async def tool_pass(bench: Bench, facts: list[Fact], token_of: dict[str, Fact]) -> None:
    """Every memory tool and ``memory_query``, from every room, for every person."""
    for agent in (AGENT, TEAM, COMPANION):
        own = [f for f in facts if f.owner == agent]
        for room, person in VANTAGES:
            found = bench.tools(agent, room, person)
            if found is None:  # no memory in this turn: every read of it shows nothing
                for _ in queries_of(agent, facts):
                    bench.check("search_memories", "", room, person, token_of)
                    bench.check("memory_query", "", room, person, token_of)
                continue
            toolkit, query = found
            calls = toolkit.calls
            for fact in queries_of(agent, facts):
                text = await calls.search(fact.text, 5)
                bench.check("search_memories", text, room, person, token_of)
                text = await query(query=fact.text, top_k=5)
                bench.check("memory_query", text, room, person, token_of)
            for fact in own:
                if fact.entry_id is not None:
                    text = await calls.get(fact.entry_id)
                    bench.check("get_memory", text, room, person, token_of)
            bench.check("list_memories", await calls.list(200), room, person, token_of)
            await read_files(bench, toolkit, agent, room, person, token_of)


async def read_files(
    bench: Bench,
    toolkit: MemoryTools,
    agent: str,
    room: Room,
    person: str,
    token_of: dict[str, Fact],
) -> None:
    """``memory_get`` of every memory file and past conversation of the turn's memory, page
    by page to the end."""
    memory = toolkit.memory
    assert isinstance(memory, FileMemory)
    files = ["MEMORY.md", memory.scope.daily_path(today())]
    sessions = {
        private_session_id(session_id_for(agent, r.room_id, None), person)
        if agent == COMPANION
        else session_id_for(agent, r.room_id, None)
        for r in ROOMS
    }
    files += [f"{TRANSCRIPT_DIR}/{session_name(s)}.jsonl" for s in sorted(sessions)]
    for path in files:
        start = 1
        while True:
            text = await toolkit.calls.read_file(path, start, 100)
            bench.check("memory_get", text, room, person, token_of)
            if not re.search(rf"^\s*{start + 99}\s", text, re.M):
                break
            start += 100


def share(hits: int, pairs: int) -> float:
    return hits / pairs if pairs else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=200)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    facts = make_facts(max(12, args.facts), random.Random(args.seed))
    token_of = {f.token: f for f in facts}
    with tempfile.TemporaryDirectory(prefix="audience-bench-") as tmp:
        root = Path(tmp)
        begun = time.perf_counter()
        bench = Bench(config(root, "strict"), root)
        try:
            asyncio.run(plant(bench, facts, token_of))
            planted = time.perf_counter() - begun
            pairs, hits = recall_pass(bench, facts, token_of, "recall")
            asyncio.run(tool_pass(bench, facts, token_of))
        finally:
            bench.close()
        today_bench = Bench(config(root, "shared"), root)
        try:
            shared_pairs, shared_hits = recall_pass(today_bench, facts, token_of, "recall")
        finally:
            today_bench.close()
    kinds = Counter((f.owner, f.writer) for f in facts)
    print(
        f"# {len(facts)} facts planted in {planted:.1f} s: "
        + ", ".join(f"{owner}/{writer} {n}" for (owner, writer), n in sorted(kinds.items()))
    )
    print(f"# rooms asked from: {', '.join(f'{r.key} ({p})' for r, p in VANTAGES)}")
    print("# path                reads   shown where allowed   leaks")
    for path in sorted(bench.reads):
        print(f"# {path:18} {bench.reads[path]:7} {bench.shown[path]:21} {bench.leaks[path]:7}")
    for line in bench.leaked:
        print(f"# leak: {line}")
    print(f"# recall asked with a fact's words where it is allowed: {pairs} (fact, room) pairs")
    print(
        f"shared: leaks={sum(today_bench.leaks.values())} "
        f"recalled_where_allowed={share(shared_hits, shared_pairs):.3f}"
    )
    print(
        f"audience_leaks={sum(bench.leaks.values())} reads={sum(bench.reads.values())} "
        f"recalled_where_allowed={share(hits, pairs):.3f}"
    )


if __name__ == "__main__":
    main()
