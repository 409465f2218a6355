"""What two memory entries have in common, and what that makes of them. Pure, no I/O.

Signals (all in [0, 1]):

* exact: the texts are equal after normalising case, accents-as-written, punctuation and spaces
  (:func:`normal_form`);
* lexical: Jaccard overlap of their content words (stop words dropped, a light stemming so
  "likes" and "like" meet);
* semantic: the cosine of their embeddings, when the scope has a semantic index.

Words that carry a fact's identity are compared on their own (:func:`key_words`): numbers and
dates, names (capitalised words not at a sentence start) and negations. Two entries that agree
on every other word but differ in those are never one fact ("Alice lives in Berlin" and "Alice
lives in Lisbon"); if they share a subject they may contradict.

:func:`classify` puts a pair into one band:

* ``exact``: the same text: merged without a model;
* ``merge``: near-exact (similarity at or above ``merge_similarity`` or word overlap at or
  above ``lexical_merge``) where one says every word of the other: merged without a model,
  keeping the text with more detail. Two texts that each have a word of their own may differ
  in a value ("engineer", "manager"), so however similar they go to the model;
* ``polarity``: the same words but one negated ("Alice eats meat", "Alice does not eat
  meat"): a contradiction, recorded without a model;
* ``synthesis``: similar (from ``synthesis_similarity``) but not provably one fact: the model
  decides in a deep run;
* ``conflict``: about one subject (they share a name, or their first content word) with
  similarity from ``conflict_similarity``: the model checks for a contradiction in a deep run;
* ``none``: left alone.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from mindroom.memory.search.query import STOP_WORDS

Band = Literal["exact", "merge", "polarity", "synthesis", "conflict", "none"]

NEGATIONS = frozenset(
    [
        "not",
        "no",
        "never",
        "nobody",
        "nothing",
        "none",
        "nor",
        "cannot",
        "can't",
        "don't",
        "doesn't",
        "didn't",
        "isn't",
        "aren't",
        "wasn't",
        "weren't",
        "won't",
        "wouldn't",
        "shouldn't",
        "couldn't",
        "hasn't",
        "haven't",
        "hadn't",
        "n't",
    ]
)
_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_SENTENCE_END = re.compile(r"[.!?:;]\s*$")
# stop words that still carry a fact (negations) are kept apart from the rest
_STOP = STOP_WORDS - NEGATIONS


def normal_form(text: str) -> str:
    """``text`` for exact comparison: NFKC, case-folded, words only, single spaces."""
    text = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    return " ".join(_WORD.findall(text))


_SIBILANT = ("s", "x", "z", "ch", "sh")


def _stem(word: str) -> str:
    """A light English stem, the same for a word's common forms: "like", "likes", "liked" and
    "liking"; "move" and "moved"; "watches" and "watch"; "cats" and "cat"."""
    stem = word
    if word.endswith("ies") and len(word) > 4:
        stem = word[:-3] + "y"
    elif word.endswith("es") and word[:-2].endswith(_SIBILANT) and len(word) > 4:
        stem = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        stem = word[:-1]
    elif word.endswith("ed") and len(word) > 4:
        stem = word[:-2]
    elif word.endswith("ing") and len(word) > 5:
        stem = word[:-3]
    if stem != word and len(stem) > 3 and stem[-1] == stem[-2] and stem[-1] not in "aeiouls":
        stem = stem[:-1]  # "stopped", "running"
    if stem.endswith("e") and len(stem) > 3:
        stem = stem[:-1]  # "like" meets "liked"
    return stem


def _bare(word: str) -> str:
    """``word`` without a possessive ("Alice's", "James'")."""
    for suffix in ("'s", "\u2019s"):
        if word.endswith(suffix) and len(word) > len(suffix):
            return word[: -len(suffix)]
    return word.rstrip("'\u2019") or word


@dataclass(frozen=True)
class Words:
    """The words of one entry that the signals compare."""

    normal: str  # normal_form of the text
    content: frozenset[str]  # stemmed content words (no stop words, negations apart)
    keys: frozenset[str]  # numbers, names and negations, as written (case-folded)
    negated: bool
    subject: str | None  # the first content word (usually who or what the entry is about)
    lead: tuple[str, ...] = ()  # the first two content words, in order (whose fact, what of it)


def words(text: str) -> Words:
    """The comparable words of ``text``."""
    found = _WORD.findall(unicodedata.normalize("NFKC", text).replace("\u2019", "'"))
    content: list[str] = []
    keys: set[str] = set()
    negated = False
    start_of_sentence = True
    position = 0
    for word in found:
        at = text.find(word, position)
        if at >= 0:
            start_of_sentence = position == 0 or bool(_SENTENCE_END.search(text[:at]))
            position = at + len(word)
        folded = word.casefold()
        if folded in NEGATIONS or folded.endswith("n't"):
            negated = True
            keys.add("<not>")
            continue
        word = _bare(word)
        folded = word.casefold()
        if (
            any(ch.isdigit() for ch in word)
            or word[0].isupper()
            and not start_of_sentence
            and folded not in _STOP
        ):
            keys.add(folded)
        if folded not in _STOP and len(folded) > 1:
            content.append(_stem(folded))
    return Words(
        normal=normal_form(text),
        content=frozenset(content),
        keys=frozenset(keys),
        negated=negated,
        subject=content[0] if content else None,
        lead=tuple(content[:2]),
    )


def lexical(a: Words, b: Words) -> float:
    """Jaccard overlap of the content words."""
    if not a.content or not b.content:
        return 0.0
    return len(a.content & b.content) / len(a.content | b.content)


def _names(w: Words) -> frozenset[str]:
    """The names of an entry (stemmed like its content words), its subject among them."""
    names = {_stem(k) for k in w.keys if k != "<not>" and not any(c.isdigit() for c in k)}
    return frozenset(names | ({w.subject} if w.subject else set()))


def same_subject(a: Words, b: Words) -> bool:
    """Whether the two entries are plausibly about one subject: a name of one is a name or the
    subject of the other ("Navy is Geshirvil's colour", "Geshirvil's colour is mint"), or
    they start with the same content word."""
    return bool(_names(a) & _names(b))


@dataclass(frozen=True)
class Thresholds:
    """The bands' limits (``memory.maintenance.consolidation``)."""

    merge_similarity: float = 0.90
    synthesis_similarity: float = 0.75
    conflict_similarity: float = 0.5
    lexical_merge: float = 0.85


def classify(a: Words, b: Words, cosine: float | None, limits: Thresholds) -> tuple[Band, float]:
    """The band of a pair and its similarity (the best of lexical and cosine)."""
    if a.normal and a.normal == b.normal:
        return "exact", 1.0
    overlap = lexical(a, b)
    similarity = max(overlap, cosine or 0.0)
    if a.negated != b.negated and a.content == b.content and a.content:
        return "polarity", similarity
    plain_keys_a = a.keys - {"<not>"}
    plain_keys_b = b.keys - {"<not>"}
    nested = a.content <= b.content or b.content <= a.content
    keys_nested = plain_keys_a <= plain_keys_b or plain_keys_b <= plain_keys_a
    one_detailed = (
        nested and keys_nested and (plain_keys_a <= plain_keys_b) == (a.content <= b.content)
    )
    keys_agree = plain_keys_a == plain_keys_b or one_detailed
    # without a model, only a pair where one says everything the other says is one fact: two
    # texts that each have a word of their own may differ in a value ("engineer", "manager")
    near = similarity >= limits.merge_similarity or overlap >= limits.lexical_merge
    # ...and the added words must not change whose fact it is ("Bo's birthday" is not "Bo's
    # brother's birthday"): both start with the same two content words
    same_lead = a.lead == b.lead or min(len(a.lead), len(b.lead)) < 2
    if near and nested and keys_agree and same_lead and a.negated == b.negated:
        return "merge", similarity
    if similarity >= limits.synthesis_similarity and keys_agree and a.negated == b.negated:
        return "synthesis", similarity
    if similarity >= limits.conflict_similarity and same_subject(a, b):
        return "conflict", similarity
    if similarity >= limits.synthesis_similarity:
        return "synthesis", similarity
    return "none", similarity


def more_detailed(a: Words, b: Words) -> bool:
    """Whether ``a`` says at least everything ``b`` says (word for word), and more."""
    return (
        b.content <= a.content
        and (b.keys - {"<not>"}) <= (a.keys - {"<not>"})
        and (len(a.content) + len(a.keys) > len(b.content) + len(b.keys))
    )
