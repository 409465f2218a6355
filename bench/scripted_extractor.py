"""A scripted extraction model for ``bench/structured_memory.py``: what the validator sees.

The bench runs the product's real extraction turn (``extract_facts``: the prompt, Agno, the
OpenAI-compatible HTTP client, the answer parser) against a local scripted model, the test
suite's :class:`tests.support.scripted_model.ScriptedModel`. This module is that model's handler: it
reads the transcript of the prompt and answers as an extractor that does what the prompt asks,
mechanically: each message of a person (small talk of fewer than four words skipped) becomes
facts of at most two of its sentences, tagged ``[general]``, rewritten in the third person
(first-person words become the speaker's name, second-person ones "the other person"). It is
not a language model: sentences come out as long as they were written, and a rewrite can be
clumsy. So the first-pass rate it gives measures the validator against plain extractions that
follow the prompt's form (does it reject or trim what it should not?), not any real model's
compliance; a real model passes when it follows the prompt's writing guard (third person,
1-2 sentences, 280 characters). ``--model-url`` runs the same turn against a real model.
"""

from __future__ import annotations

import re
from typing import Any

# a person's line as the product writes it: "Caroline (@caroline:locomo): text"
_LINE = re.compile(r"^(?P<speaker>[^()\n]{1,60}) \((?P<id>@[^)\s]+)\): (?P<text>.+)$")
_REWRITES = [
    (r"\bI'm\b", "{name} is"),
    (r"\bI've\b", "{name} has"),
    (r"\bI'd\b", "{name} would"),
    (r"\bI'll\b", "{name} will"),
    (r"\bI\b", "{name}"),
    (r"\b[Mm]y\b", "{name}'s"),
    (r"\b[Mm]ine\b", "{name}'s"),
    (r"\b[Mm]yself\b", "{name}"),
    (r"\b[Mm]e\b", "{name}"),
    (r"\b[Ww]e're\b", "{name} and family are"),
    (r"\b[Ww]e\b", "{name} and family"),
    (r"\b[Oo]ur\b", "their"),
    (r"\bus\b", "them"),
    (r"\b[Yy]ou're\b", "the other person is"),
    (r"\b[Yy]our\b", "the other person's"),
    (r"\b[Yy]ourself\b", "the other person"),
    (r"\b[Yy]ou\b", "the other person"),
]


def third_person(speaker: str, text: str) -> str:
    """``text`` by ``speaker`` with its first- and second-person words rewritten."""
    for pattern, replacement in _REWRITES:
        text = re.sub(pattern, replacement.format(name=speaker), text)
    return text


def transcript_lines(request: dict[str, Any]) -> list[tuple[str, str]]:
    """``(speaker, text)`` of each message in the extraction prompt's conversation."""
    prompt = str(request["messages"][-1]["content"])
    conversation = prompt.split("Conversation:\n", 1)[-1].rsplit("\n\nDurable facts", 1)[0]
    found = []
    for line in conversation.splitlines():
        match = _LINE.match(line)
        if match:
            found.append((match.group("speaker"), match.group("text")))
    return found


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def extract(request: dict[str, Any]) -> str:
    """The scripted extractor's answer to one extraction prompt."""
    facts = []
    for speaker, text in transcript_lines(request):
        if len(text.split()) < 4:  # small talk ("ok", "thanks!") is skipped, as asked
            continue
        sentences = [s for s in _SENTENCE.split(third_person(speaker, text)) if s.strip()]
        for start in range(0, len(sentences), 2):
            facts.append("- [general] " + " ".join(sentences[start : start + 2]))
    return "\n".join(facts) or "NO_REPLY"
