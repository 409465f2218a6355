"""What a search looks for: the terms of a query, as FTS5 expressions. Pure, no I/O.

A query's terms are its words and its date expressions:

* Words are runs of letters and digits, lower-cased. Stop words (the general English list of
  NLTK's stopwords corpus, :data:`STOP_WORDS`) are dropped, and so are word fragments: a
  contraction or possessive is cut at the apostrophe (``what's`` -> ``what`` and ``s``) and
  one-character Latin letters and digits are dropped (``s``, ``t``, ``m``, ``8``). A query of
  nothing but stop words has no terms: it finds nothing (a memory is not found by "the").
* Date expressions (:func:`mindroom.memory.files.dates.find_dates`: "8 May 2023", "in May",
  "yesterday", "last week") are searched in the index's date column, and their words are not
  searched again as words (so "May" in "in May" does not match every "may" of the texts).

Terms are ORed (an AND of every word finds nothing for most real questions) and ranked by BM25,
which weights rare terms above common ones; :mod:`mindroom.memory.search.relevance` decides which
hits are worth a turn's context.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass

from mindroom.memory.files.dates import find_dates

MAX_TERMS = 32  # a pasted page is not 300 terms: its first words are searched

# NLTK's English stop word list (nltk_data corpora/stopwords/english), the usual general list
_STOP_TEXT = """
    i me my myself we our ours ourselves you you're you've you'll you'd your yours yourself
    yourselves he him his himself she she's her hers herself it it's its itself they them
    their theirs themselves what which who whom this that that'll these those am is are was
    were be been being have has had having do does did doing a an the and but if or because
    as until while of at by for with about against between into through during before after
    above below to from up down in out on off over under again further then once here there
    when where why how all any both each few more most other some such no nor not only own
    same so than too very s t can will just don don't should should've now d ll m o re ve y
    ain aren aren't couldn couldn't didn didn't doesn doesn't hadn hadn't hasn hasn't haven
    haven't isn isn't ma mightn mightn't mustn mustn't needn needn't shan shan't shouldn
    shouldn't wasn wasn't weren weren't won won't wouldn wouldn't
"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
# letters and digits (the FTS tokenizer's word characters), apostrophes kept to find fragments
_WORD_RE = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")


@dataclass(frozen=True)
class Term:
    """One term of a query: ``key`` names it (a word, or a date such as ``2023-05-08``),
    ``expression`` is the FTS5 expression that finds the entries holding it."""

    key: str
    expression: str
    exact_date: bool = False  # a date naming particular days ("yesterday", "8 May 2023")

    @property
    def is_date(self) -> bool:
        """Whether this term is a date (matched against the entries' dates)."""
        return self.expression.startswith("{dates}")


def words(text: str) -> list[str]:
    """The searchable words of ``text``: lower case, no stop words, no fragments, no repeats."""
    found: list[str] = []
    for token in _WORD_RE.findall(text.lower()):
        token = token.replace("\u2019", "'")
        if token in STOP_WORDS:
            continue
        found.extend(p for p in token.split("'") if p not in STOP_WORDS and not _fragment(p))
    return list(dict.fromkeys(found))


def _fragment(word: str) -> bool:
    """One Latin letter or digit is a fragment (of a contraction, an initial, a list number),
    not a word; one character of a script written without spaces may be a word."""
    return len(word) < 2 and word.isascii()


def _quoted(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def parse_query(query: str, now: dt.datetime | None = None) -> list[Term]:
    """The terms of ``query``: its dates (relative ones resolved against ``now``), then its
    words; at most :data:`MAX_TERMS`."""
    today = (now or dt.datetime.now()).date()
    dates, rest = find_dates(query, today)
    terms = [
        Term(d.label, "{dates} : (" + " OR ".join(map(_quoted, d.phrases)) + ")", d.exact)
        for d in dates
    ]
    terms += [Term(word, "{text} : " + _quoted(word)) for word in words(rest)]
    return terms[:MAX_TERMS]


def fts_query(terms: list[Term]) -> str:
    """An FTS5 query that ORs the terms (quoting keeps FTS syntax out of user text)."""
    return " OR ".join(f"({term.expression})" for term in terms)
