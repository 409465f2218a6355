"""Recall gate: how much stored memory per-turn recall puts in front of chit-chat, and questions.

One LoCoMo conversation (by default the one with the most turns; ``--conversation ID`` picks
another) is stored as ``bench/locomo_retrieval.py`` stores it: one entry per turn in the daily
file of its session's date. Then each message below goes through the product's per-turn recall
(``recall_block`` of ``mindroom/memory/search/recall.py``, the function the runtime calls, with the
config's ``memory.file`` settings), with the clock set to noon of the day after the last session,
as if the conversation had ended yesterday:

* 30 chit-chat messages (a fixed, generic list, not taken from the data set): none of them asks
  for anything stored, so every memory they get is noise in the prompt.
* The conversation's category 1-4 questions whose evidence is all in the conversation: each
  should get at least one of its evidence turns.

The workspace holds nothing but the stored turns (no ``MEMORY.md``), so any memory in a block is
a stored turn. A turn counts as injected when its entry text appears verbatim in the block,
whichever section (search hits, today's or yesterday's file, anything later) put it there.
The output ends with exactly these two lines:

    chitchat: injected=I/30 hits=H
    questions: evidence_injected=E/Q

``I``: chit-chat messages whose block holds at least one stored turn; ``H``: stored turns in
those blocks, summed over the 30 messages; ``E``: questions whose block holds at least one of
their evidence turns, of ``Q`` scored questions. Lines starting with ``#`` before them are
context: which conversation and date, and the chit-chat counts again with the clock a year
later, when no daily file is recent and only what recall searches for can come in.

    python bench/recall_gate.py [--data FILE] [--conversation ID] [--embedder none|default]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import tempfile
from pathlib import Path

from locomo import (
    DEFAULT_DATA,
    EMBEDDERS,
    Conversation,
    answerable,
    bench_config,
    entry_text,
    load_conversations,
    open_memory,
    store,
)

from mindroom.config.schema import Config
from mindroom.memory.files.store import FileMemory
from mindroom.memory.search.recall import recall_block as runtime_recall_block

CHITCHAT = (
    "thanks!",
    "tell me a joke",
    "ok sounds good",
    "good morning",
    "lol",
    "hi there",
    "how are you?",
    "cool, thanks a lot",
    "haha that's funny",
    "good night!",
    "what's up?",
    "nice",
    "ok",
    "thank you so much, that helps",
    "see you later",
    "hey",
    "awesome!",
    "can you say that again?",
    "never mind",
    "I'm bored",
    "you're the best",
    "sorry, I didn't get that",
    "sure, go ahead",
    "hmm, let me think about it",
    "what time is it?",
    "have a great day",
    "yes please",
    "no thanks",
    "that makes sense",
    "brb",
)


def recall_block(memory: FileMemory, config: Config, message: str, now: dt.datetime) -> str:
    """The memory block a turn answering ``message`` gets, with the runtime's settings."""
    return runtime_recall_block(config, memory, message, now=now)


def injected(block: str, texts: dict[str, str]) -> set[str]:
    """The dia_ids of the stored turns (``dia_id -> entry text``) whose text is in ``block``."""
    return {dia_id for dia_id, text in texts.items() if text in block}


def counts(blocks: list[set[str]]) -> str:
    """``injected=I/N hits=H`` for the turns injected into each of N blocks."""
    return f"injected={sum(1 for ids in blocks if ids)}/{len(blocks)} hits={sum(map(len, blocks))}"


def pick(conversations: list[Conversation], sample_id: str | None) -> Conversation:
    """The conversation named ``sample_id``, or the one with the most turns."""
    if sample_id is None:
        return max(conversations, key=lambda c: len(c.turns))
    for conversation in conversations:
        if conversation.sample_id == sample_id:
            return conversation
    known = ", ".join(c.sample_id for c in conversations)
    raise SystemExit(f"no conversation {sample_id!r} (the file has: {known})")


def main(data: Path, sample_id: str | None, embedder: str) -> None:
    config = bench_config(embedder)
    if not data.is_file():
        raise SystemExit(f"no LoCoMo data at {data}: pass --data FILE")
    conversation = pick(load_conversations(data), sample_id)
    texts = {turn.dia_id: entry_text(turn) for turn in conversation.turns}
    now = dt.datetime.combine(conversation.last_day + dt.timedelta(days=1), dt.time(12))
    with tempfile.TemporaryDirectory(prefix="recall-gate-") as tmp:
        memory = open_memory(config, Path(tmp))
        try:
            asyncio.run(store(memory, conversation))
            chatty = [injected(recall_block(memory, config, m, now), texts) for m in CHITCHAT]
            later = now + dt.timedelta(days=365)  # no recent daily file: search alone
            searched = [injected(recall_block(memory, config, m, later), texts) for m in CHITCHAT]
            questions = list(answerable(conversation))
            questions = [q for q in questions if 1 <= q.category <= 4]
            found = [
                injected(recall_block(memory, config, q.text, now), texts) & set(q.evidence)
                for q in questions
            ]
        finally:
            memory.close()
    print(f"# {conversation.sample_id}: {len(conversation.turns)} turns stored, now={now:%Y-%m-%d}")
    print(f"# chitchat a year later (no recent days): {counts(searched)}")
    print(f"chitchat: {counts(chatty)}")
    print(f"questions: evidence_injected={sum(1 for ids in found if ids)}/{len(questions)}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="a LoCoMo JSON file")
    parser.add_argument("--conversation", help="sample_id (default: the longest conversation)")
    parser.add_argument("--embedder", choices=EMBEDDERS, default="none")
    args = parser.parse_args()
    main(args.data, args.conversation, args.embedder)
