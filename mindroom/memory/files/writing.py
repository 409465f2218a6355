"""Writing constraints for memory the model writes, and the validator that holds them.

A *semantic* entry (a lasting fact) is one self-contained statement about someone in the third
person: 1-2 sentences, at most :data:`MAX_CHARS` characters, no "I", "me", "you" (who would
that be, read next month?). An *episodic* entry (what happened) is in the past tense. The
extraction prompt asks for exactly this (:data:`SEMANTIC_GUARD`, :data:`EPISODIC_GUARD`);
:func:`validate` checks what came back:

* it **trims** what can be trimmed without changing the meaning: list markers and quotes
  around the text, whitespace, sentences beyond the second, and a text over the length limit
  (cut at the last sentence or word that fits, with "…");
* it **rejects** what cannot be mended: an empty text, a first- or second-person statement, an
  episodic entry with no past-tense verb.

A result says whether it passed *as written* (the first-pass rate the bench reports), was
trimmed, or was rejected, and why. The person and tense checks are English word lists; a text
in another language is checked for length and sentences only (memories stay in the language
the person used, and a word list cannot judge it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_CHARS = 280
MAX_SENTENCES = 2

SEMANTIC_GUARD = (
    "Write each fact as a complete, self-contained, third-person statement that names who it "
    "is about (no I, me, you or we); neutral tone; 1-2 sentences; at most 280 characters."
)
EPISODIC_GUARD = (
    "Write what happened in the past tense, 1-2 sentences: what was discussed, decided or "
    "done; leave out lasting facts unless they changed."
)

# case matters: "US" (a country) is not "us", "I" is never lowercase
_FIRST_PERSON = re.compile(
    r"\b(?:I|I'm|I've|I'd|I'll|[Mm]e|[Mm]y|[Mm]ine|[Mm]yself|[Ww]e|[Ww]e're|us|[Oo]ur|[Oo]urs)\b"
)
_SECOND_PERSON = re.compile(r"\b(?:[Yy]ou|[Yy]ou're|[Yy]ou've|[Yy]our|[Yy]ours|[Yy]ourself)\b")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
_IRREGULAR_PAST = frozenset(
    [
        "was",
        "were",
        "had",
        "did",
        "went",
        "said",
        "made",
        "took",
        "got",
        "came",
        "saw",
        "met",
        "bought",
        "brought",
        "thought",
        "told",
        "gave",
        "found",
        "felt",
        "left",
        "kept",
        "began",
        "ran",
        "wrote",
        "read",
        "heard",
        "sent",
        "spent",
        "built",
        "lost",
        "paid",
        "sat",
        "stood",
        "won",
        "chose",
        "drove",
        "ate",
        "drank",
        "flew",
        "grew",
        "knew",
        "rode",
        "sang",
        "spoke",
        "swam",
        "taught",
        "threw",
        "understood",
        "woke",
        "wore",
        "became",
        "forgot",
        "caught",
        "fell",
        "held",
        "led",
        "meant",
        "put",
        "set",
        "shut",
        "hit",
        "cut",
        "let",
        "quit",
    ]
)
_PAST_ED = re.compile(r"\b[a-z]{3,}ed\b", re.I)
_MARKERS = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])(?:\s+|$)")


@dataclass(frozen=True)
class Written:
    """The validator's verdict on one text."""

    text: str  # as it will be stored ("" when rejected)
    first_pass: bool  # passed exactly as written
    reasons: tuple[str, ...]  # what was trimmed, or why it was rejected

    @property
    def accepted(self) -> bool:
        return bool(self.text)


def _english(text: str) -> bool:
    letters = [c for c in text if c.isalpha()]
    return bool(letters) and sum(c.isascii() for c in letters) / len(letters) > 0.9


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def _cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: whole sentences if one fits, else whole words."""
    kept = ""
    for sentence in _sentences(text):
        candidate = f"{kept} {sentence}".strip()
        if len(candidate) > limit:
            break
        kept = candidate
    if kept:
        return kept
    words = text[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:")
    return words + "…"


def is_past(text: str) -> bool:
    """Whether ``text`` has a past-tense verb (English: "-ed" or a common irregular one)."""
    words = {w.lower() for w in re.findall(r"[A-Za-z']+", text)}
    return bool(words & _IRREGULAR_PAST) or _PAST_ED.search(text) is not None


def validate(text: str, kind: str = "semantic") -> Written:
    """``text`` checked as a ``semantic`` or ``episodic`` entry (see the module docstring)."""
    original = text
    trimmed: list[str] = []
    text = _MARKERS.sub("", " ".join(text.split()))
    if len(text) > 1 and text[0] == text[-1] and text[0] in "\"'“”":
        text = text[1:-1].strip()
    if not any(c.isalnum() for c in text):
        return Written("", False, ("empty",))
    english = _english(text)
    if english and _FIRST_PERSON.search(text):
        return Written("", False, ("first person: write who it is about, by name",))
    if english and _SECOND_PERSON.search(text):
        return Written("", False, ("second person: write who it is about, by name",))
    if kind == "episodic" and english and not is_past(text):
        return Written("", False, ("episodic entries are in the past tense",))
    sentences = _sentences(text)
    if len(sentences) > MAX_SENTENCES:
        text = " ".join(sentences[:MAX_SENTENCES])
        trimmed.append(f"more than {MAX_SENTENCES} sentences")
    if len(text) > MAX_CHARS:
        text = _cut(text, MAX_CHARS)
        trimmed.append(f"longer than {MAX_CHARS} characters")
    first_pass = not trimmed and text == original.strip()
    return Written(text, first_pass, tuple(trimmed))


_STEP = re.compile(r"(?:^|\s)1[.)]\s+\S.*?(?:\s|^)2[.)]\s+\S", re.S)


def check_procedural(text: str) -> str | None:
    """Why ``text`` is not procedural memory (numbered steps "1. ... 2. ..."); None: it is."""
    if _STEP.search(text) is None:
        return (
            "procedural memory is numbered steps in the imperative, e.g. "
            "'1. Open the form 2. Attach two photos 3. Book a slot'"
        )
    return None
