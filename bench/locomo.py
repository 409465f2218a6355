"""LoCoMo conversations stored in a mindroom memory: shared by the LoCoMo benchmarks.

A LoCoMo file is a JSON list of samples; each has a ``conversation`` (``speaker_a``,
``speaker_b``, ``session_N`` lists of turns with ``speaker``, ``dia_id`` like ``"D1:3"`` and
``text``, and ``session_N_date_time`` like ``"1:56 pm on 8 May, 2023"``) and ``qa`` (``question``,
``evidence``: a list of dia_ids, ``category`` 1-5, 5 being adversarial).

Each turn becomes one entry ``"<speaker> (<D Month YYYY>): <text>"`` in the daily file of its
session's date, written with the product's public memory API (``FileMemory.add`` with the
daily file's path, as :meth:`MemoryScope.daily_path` names it; on the mem0 backend the same
text is one mem0 memory, stored verbatim by ``Mem0Memory.add``). Only the turn's ``text`` is
stored: an image turn's ``blip_caption`` (a generated description of a shared photo) is left
out, because the issue defines the entry as the text and a person's memory would hold what was
said, not a captioner's guess. The memory is opened the way the product opens an agent's
memory (:class:`MemoryRegistry` over a :class:`Config`); :func:`bench_config` and
:func:`opened` are the one seam where a memory setting such as an embedder or the backend goes
in.

Nothing here scores anything; the benchmark scripts do.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mindroom.config.schema import Config  # noqa: E402
from mindroom.memory.files.store import FileMemory  # noqa: E402
from mindroom.memory.mem0 import Mem0Memory  # noqa: E402
from mindroom.memory.registry import MemoryRegistry  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = (REPO / ".." / "shared" / "data" / "locomo-dev.json").resolve()
EMBEDDERS = ("none", "default")
BACKENDS = ("file", "mem0")
AGENT = "bench"
ACTOR = "locomo"

_SESSION_RE = re.compile(r"session_(\d+)")
_DATE_RE = re.compile(r"(\d{1,2}) ([A-Za-z]+),? (\d{4})\s*$")


@dataclass(frozen=True)
class Turn:
    """One turn of a conversation and the day its session took place."""

    dia_id: str
    speaker: str
    text: str
    day: dt.date


@dataclass(frozen=True)
class Question:
    """One LoCoMo question with the dia_ids of its evidence."""

    text: str
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    @property
    def last_day(self) -> dt.date:
        """The date of the latest session."""
        return max(turn.day for turn in self.turns)


def session_day(date_time: str) -> dt.date:
    """The date of a session: ``"1:56 pm on 8 May, 2023"`` -> 2023-05-08."""
    match = _DATE_RE.search(date_time)
    if match is None:
        raise ValueError(f"unrecognised session date {date_time!r}")
    day, month, year = match.groups()
    return dt.datetime.strptime(f"{day} {month} {year}", "%d %B %Y").date()


def entry_text(turn: Turn) -> str:
    """The memory entry of a turn: ``"Caroline (8 May 2023): I went to a support group."``."""
    return f"{turn.speaker} ({turn.day.day} {turn.day:%B %Y}): {turn.text}"


def parse_conversation(sample: dict[str, Any]) -> Conversation:
    """A LoCoMo sample as plain data (sessions that have a date but no turns are ignored)."""
    conversation = sample["conversation"]
    sessions = sorted(
        (int(m.group(1)), key)
        for key in conversation
        if (m := _SESSION_RE.fullmatch(key)) and conversation[key]
    )
    turns = []
    for _, key in sessions:
        day = session_day(conversation[f"{key}_date_time"])
        for turn in conversation[key]:
            turns.append(Turn(turn["dia_id"], turn["speaker"], turn.get("text", ""), day))
    questions = tuple(
        Question(str(qa["question"]), tuple(qa.get("evidence") or ()), int(qa["category"]))
        for qa in sample.get("qa", [])
    )
    return Conversation(str(sample.get("sample_id", "")), tuple(turns), questions)


def load_conversations(path: Path) -> list[Conversation]:
    """Every conversation of a LoCoMo JSON file."""
    return [parse_conversation(s) for s in json.loads(path.read_text(encoding="utf-8"))]


LOCAL_EMBEDDER = "local_embedder"
"""The ``models:`` key of the local default embedder in the benchmarks' configs."""


def model_entries(embedder: str) -> dict[str, Any]:
    """The ``models:`` entries ``--embedder`` needs besides the chat model (as a user writes
    them: an embedder is a ``models:`` entry of ``kind: embedder``)."""
    if embedder == "default":
        return {LOCAL_EMBEDDER: {"kind": "embedder", "provider": "sentence_transformers"}}
    return {}


def memory_section(embedder: str) -> dict[str, Any]:
    """The ``memory:`` config for ``--embedder``: ``none`` is keyword-only (said explicitly: the
    local embedder is on by default where ``mindroom[embeddings]`` is installed), ``default``
    asks for the local default embedder (the ``models:`` entry of :func:`model_entries`)."""
    if embedder == "none":
        return {"embedder": "none"}
    if embedder == "default":
        return {"embedder": LOCAL_EMBEDDER}
    raise ValueError(f"--embedder must be one of {', '.join(EMBEDDERS)}, not {embedder!r}")


def bench_config(
    embedder: str = "none",
    backend: str = "file",
    llm_base_url: str | None = None,
    search_database: str | None = None,
) -> Config:
    """A config with one shared agent whose memory (``backend``) the benchmark fills and
    searches; ``llm_base_url``: an OpenAI-compatible server for mem0's extraction model;
    ``search_database``: search in a PostgreSQL index there (``memory.search.index``).

    Raises SystemExit with a clear message when the product does not accept the embedder
    setting (``memory.embedder`` is not in its config schema yet).
    """
    memory = memory_section(embedder)
    models: dict[str, Any] = {"default": {"id": "unused"}, **model_entries(embedder)}
    if backend != "file":
        memory["backend"] = backend
    if llm_base_url is not None:
        models["extractor"] = {
            "provider": "openai",
            "id": "scripted",
            "base_url": llm_base_url,
            "api_key": "test",
        }
        memory["llm"] = "extractor"
    raw: dict[str, Any] = {
        "models": models,
        "agents": {AGENT: {}},
        "memory": memory,
    }
    if search_database is not None:
        memory["search"] = {"index": "postgresql"}
        raw["storage"] = {"database": search_database}
    try:
        return Config.model_validate(raw)
    except ValidationError as exc:
        if embedder != "none" and "embedder" in str(exc):
            raise SystemExit(
                f"--embedder {embedder}: embedder support is not built yet "
                "(this mindroom's config has no memory.embedder)"
            ) from None
        raise


def open_memory(config: Config, storage: Path) -> FileMemory:
    """The agent's memory under ``storage``, opened as the runtime opens it."""
    memory = MemoryRegistry(config, storage).for_agent(AGENT)
    if memory is None:
        raise SystemExit("the benchmark config has no memory for its agent")
    return memory


@contextlib.contextmanager
def opened(config: Config, storage: Path) -> Iterator[FileMemory | Mem0Memory]:
    """The agent's memory under ``storage`` on either backend, closed (with everything the
    registry opened for it, such as mem0's engine) on leaving."""
    registry = MemoryRegistry(config, storage)
    try:
        memory = registry.for_agent(AGENT)
        if memory is None:
            raise SystemExit("the benchmark config has no memory for its agent")
        yield memory
    finally:
        registry.close()


async def store(
    memory: FileMemory | Mem0Memory,
    conversation: Conversation,
    latencies: list[float] | None = None,
) -> dict[str, str]:
    """Write every turn into its day's file, or verbatim into mem0 (and embed them, with an
    embedder: searches leave a big backlog to the background); returns entry id -> dia_id.
    The time of each add goes to ``latencies`` when given."""
    dia_ids: dict[str, str] = {}
    for turn in conversation.turns:
        start = time.perf_counter()
        if isinstance(memory, Mem0Memory):
            entry = await memory.add(entry_text(turn), actor=ACTOR)
        else:
            daily = memory.scope.daily_path(turn.day.isoformat())
            entry = await memory.add(entry_text(turn), actor=ACTOR, path=daily)
        if latencies is not None:
            latencies.append(time.perf_counter() - start)
        dia_ids[entry.id] = turn.dia_id
    vectors = memory.vectors if isinstance(memory, FileMemory) else None
    if vectors is not None:  # embed them all now, as the bot does in the background
        await asyncio.to_thread(vectors.sync)
    return dia_ids


def answerable(conversation: Conversation) -> Iterator[Question]:
    """Questions with evidence that is all in the conversation (others are skipped: some
    LoCoMo evidence is empty or malformed, like ``"D8:6; D9:17"``, and cannot be scored)."""
    present = {turn.dia_id for turn in conversation.turns}
    for question in conversation.questions:
        if question.evidence and all(e in present for e in question.evidence):
            yield question
