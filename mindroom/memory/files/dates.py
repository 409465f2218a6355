"""Dates of memory entries, and the dates a message asks about. Pure functions, no I/O.

An entry's dates are the day of its daily file (``memory/YYYY-MM-DD.md``) and the full dates
written in its text (``2023-05-08``, ``8 May 2023``, ``May 8th, 2023``), in that order; its
*date* is the first of them. The search index keeps them in a column of its own, spelled
``2023-05-08 8 May 2023`` per date (:func:`date_words`), so a message naming a day, a month or
a year matches the entries of that time whether or not their text spells it out.

:func:`find_dates` reads the date expressions of a message: absolute ones (a day, a month of a
year, a day of a month, a month after a preposition like "in May", a year after one like "in
2023") and relative ones, resolved against today (today, tonight, this morning, yesterday, last
night, N days ago, this/last week, N weeks ago, this/last month, this/last year, last Monday or
on Monday: the most recent one before today). Each becomes a :class:`DateQuery`: phrases of
the date column, any of which matches. A bare month name ("May I ...") is not a date.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass

MAX_ENTRY_DATES = 8  # a long note full of dates is still one entry: index its first few

# English names, not the locale's (calendar.month_name follows LC_TIME)
MONTHS = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
]
_MONTH_NUMBER = {name: n for n, name in enumerate(MONTHS, 1)}
_MONTH_NUMBER.update({name[:3]: n for n, name in enumerate(MONTHS, 1)})
_MONTH_NUMBER["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTH_NUMBER, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>\d{4})"
_PREP = (
    r"(?P<prep>in|during|since|until|till|before|after|by|from|of|early|late|mid|around"
    r"|last|this)"
)
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
_COUNT = r"(?P<count>\d{1,3}|" + "|".join(_NUMBER_WORDS) + r")"

_DAILY_RE = re.compile(r"^memory/(\d{4})-(\d{2})-(\d{2})\.md$")
_ISO_RE = re.compile(r"(?<![\d-])(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})(?![\d-])")
_DMY_RE = re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)
_MDY_RE = re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE)
_MY_RE = re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE)
_DM_RE = re.compile(rf"\b{_DAY}(?:\s+of)?\s+{_MONTH}(?!\w)", re.IGNORECASE)
_MD_RE = re.compile(rf"\b{_MONTH}\s+{_DAY}\b", re.IGNORECASE)
_PREP_MONTH_RE = re.compile(rf"\b{_PREP}\s+(?:the\s+)?{_MONTH}(?!\w)", re.IGNORECASE)
_PREP_YEAR_RE = re.compile(rf"\b{_PREP}\s+{_YEAR}\b", re.IGNORECASE)


@dataclass(frozen=True)
class DateQuery:
    """A date expression of a message: ``label`` says what it stands for (``2023-05-07``,
    ``May 2023``, ``2023-05-01..2023-05-07``), ``phrases`` are date-column phrases (lower case,
    as :func:`date_words` spells dates), any of which matches."""

    label: str
    phrases: tuple[str, ...]
    exact: bool = True  # names particular days (not a whole month or year)


_Reader = Callable[[re.Match[str], dt.date], "DateQuery | None"]


def daily_date(path: str) -> dt.date | None:
    """The day of a daily file ``memory/YYYY-MM-DD.md`` (None for any other path)."""
    match = _DAILY_RE.match(path)
    return _date(*map(int, match.groups())) if match else None


# cheap tests before the full patterns (every entry of a big file goes through them): each of
# them needs a four-digit year, and the two with a month name one of these beginnings
_YEARISH_RE = re.compile(r"\d{4}")
_MONTHISH_RE = re.compile(r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)", re.IGNORECASE)


def written_dates(text: str) -> list[dt.date]:
    """Full dates written in ``text``, in the order they appear (impossible dates skipped)."""
    if _YEARISH_RE.search(text) is None:
        return []
    patterns = (_ISO_RE, _DMY_RE, _MDY_RE) if _MONTHISH_RE.search(text) else (_ISO_RE,)
    found: list[tuple[int, dt.date]] = []
    for pattern in patterns:
        for match in pattern.finditer(text):
            day = _date(int(match["year"]), _month(match["month"]), int(match["day"]))
            if day is not None:
                found.append((match.start(), day))
    return list(dict.fromkeys(day for _, day in sorted(found, key=lambda f: f[0])))


def entry_dates(path: str, text: str) -> list[dt.date]:
    """The dates of an entry: its daily file's day first, then the dates in its text."""
    daily = daily_date(path)
    dates = ([daily] if daily else []) + written_dates(text)
    return list(dict.fromkeys(dates))[:MAX_ENTRY_DATES]


def entry_date(path: str, text: str) -> dt.date | None:
    """The date of an entry (see :func:`entry_dates`), None when it has none."""
    dates = entry_dates(path, text)
    return dates[0] if dates else None


def date_words(dates: list[dt.date]) -> str:
    """The date column of an entry: ``2023-05-08 8 May 2023`` for each date."""
    return " ".join(
        f"{d.isoformat()} {d.day} {MONTHS[d.month - 1].title()} {d.year}" for d in dates
    )


def find_dates(text: str, today: dt.date) -> tuple[list[DateQuery], str]:
    """The date expressions of a message, and the message with them blanked out (so their
    words are not searched again as words)."""
    found: list[tuple[int, DateQuery]] = []
    chars = list(text)

    def take(pattern: re.Pattern[str], read: _Reader) -> None:
        for match in pattern.finditer("".join(chars)):
            query = read(match, today)
            if query is None:
                continue
            found.append((match.start(), query))
            chars[match.start() : match.end()] = " " * (match.end() - match.start())

    for pattern, read in _READERS:
        take(pattern, read)
    queries = list(dict.fromkeys(query for _, query in sorted(found, key=lambda f: f[0])))
    return queries, "".join(chars)


# -- readers: a match of one pattern -> its DateQuery (None: not a date after all) -----------


def _date(year: int, month: int, day: int) -> dt.date | None:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return None


def _month(text: str) -> int:
    return int(text) if text.isdigit() else _MONTH_NUMBER[text.lower().rstrip(".")]


def _day_query(day: dt.date | None) -> DateQuery | None:
    return DateQuery(day.isoformat(), (_iso_phrase(day),)) if day else None


def _iso_phrase(day: dt.date) -> str:
    return f"{day.year} {day.month:02d} {day.day:02d}"


def _days_query(first: dt.date, last: dt.date) -> DateQuery:
    count = (last - first).days + 1
    days = [first + dt.timedelta(days=n) for n in range(count)]
    return DateQuery(f"{first.isoformat()}..{last.isoformat()}", tuple(map(_iso_phrase, days)))


def _month_query(year: int, month: int) -> DateQuery:
    name = MONTHS[month - 1]
    return DateQuery(f"{name.title()} {year}", (f"{name} {year}",), exact=False)


def _full(match: re.Match[str], _today: dt.date) -> DateQuery | None:
    return _day_query(_date(int(match["year"]), _month(match["month"]), int(match["day"])))


def _month_year(match: re.Match[str], _today: dt.date) -> DateQuery | None:
    return _month_query(int(match["year"]), _month(match["month"]))


def _day_month(match: re.Match[str], _today: dt.date) -> DateQuery | None:
    month, day = _month(match["month"]), int(match["day"])
    if _date(2000, month, day) is None:  # a leap year: 29 February is a day of a month
        return None
    return DateQuery(f"{day} {MONTHS[month - 1].title()}", (f"{day} {MONTHS[month - 1]}",))


def _prep_month(match: re.Match[str], today: dt.date) -> DateQuery | None:
    month = _month(match["month"])
    prep = match["prep"].lower()
    if prep == "this":
        return _month_query(today.year, month)
    if prep == "last":  # the most recent such month before this one
        return _month_query(today.year if month < today.month else today.year - 1, month)
    name = MONTHS[month - 1]
    return DateQuery(name.title(), (name,), exact=False)


def _prep_year(match: re.Match[str], _today: dt.date) -> DateQuery | None:
    year = match["year"]
    return DateQuery(year, (year,), exact=False) if 1000 <= int(year) <= 2999 else None


def _count(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBER_WORDS[text.lower()]


def _monday(day: dt.date) -> dt.date:
    return day - dt.timedelta(days=day.weekday())


def _this(unit: str, today: dt.date) -> DateQuery | None:
    """``today``, ``tonight``, ``this <unit>``."""
    if unit == "week":
        return _days_query(_monday(today), today)
    if unit == "month":
        return _month_query(today.year, today.month)
    if unit == "year":
        return DateQuery(str(today.year), (str(today.year),), exact=False)
    return _day_query(today)  # this morning, this afternoon, this evening


def _last(words: str, today: dt.date) -> DateQuery | None:
    """``last|past week|month|year``: the week before this one (``past week``: the seven
    days up to today), last month, last year."""
    unit = words.split()[-1]
    if unit == "week" and words.startswith("past "):
        return _days_query(today - dt.timedelta(days=6), today)
    if unit == "week":
        start = _monday(today) - dt.timedelta(days=7)
        return _days_query(start, start + dt.timedelta(days=6))
    if unit == "month":
        last = today.replace(day=1) - dt.timedelta(days=1)
        return _month_query(last.year, last.month)
    if unit == "year":
        return DateQuery(str(today.year - 1), (str(today.year - 1),), exact=False)
    return None


def _ago(words: str, count: int, today: dt.date) -> DateQuery | None:
    """``<count> days ago`` (that day), ``<count> weeks ago`` (that week)."""
    if words.endswith(("day ago", "days ago")):
        return _day_query(today - dt.timedelta(days=count))
    if words.endswith(("week ago", "weeks ago")):
        start = _monday(today - dt.timedelta(days=7 * count))
        return _days_query(start, start + dt.timedelta(days=6))
    return None


_DAYS_BACK = {"yesterday": 1, "last night": 1, "the day before yesterday": 2}


def _relative(match: re.Match[str], today: dt.date) -> DateQuery | None:
    words = " ".join(match.group(0).lower().split())
    if words in ("today", "tonight") or words.startswith("this "):
        return _this(words.split()[-1], today)
    if words in _DAYS_BACK:
        return _day_query(today - dt.timedelta(days=_DAYS_BACK[words]))
    if words.startswith(("last ", "past ")):
        return _last(words, today)
    return _ago(words, _count(match["count"]) if match["count"] else 0, today)


def _weekday(match: re.Match[str], today: dt.date) -> DateQuery | None:
    wanted = _WEEKDAYS.index(match["weekday"].lower())
    back = (today.weekday() - wanted) % 7 or 7  # the most recent one before today
    return _day_query(today - dt.timedelta(days=back))


_RELATIVE_RE = re.compile(
    r"\b(?:the\s+day\s+before\s+yesterday|today|tonight|yesterday|last\s+night"
    r"|this\s+(?:morning|afternoon|evening|week|month|year)"
    r"|(?:last|past)\s+(?:week|month|year)"
    rf"|{_COUNT}\s+(?:days?|weeks?)\s+ago)\b",
    re.IGNORECASE,
)
_WEEKDAY_RE = re.compile(
    r"\b(?:last|on)\s+(?P<weekday>" + "|".join(_WEEKDAYS) + r")\b", re.IGNORECASE
)


# the longest expressions first: what one takes, the later ones no longer see
_READERS: list[tuple[re.Pattern[str], _Reader]] = [
    (_ISO_RE, _full),
    (_DMY_RE, _full),
    (_MDY_RE, _full),
    (_MY_RE, _month_year),
    (_DM_RE, _day_month),
    (_MD_RE, _day_month),
    (_RELATIVE_RE, _relative),
    (_WEEKDAY_RE, _weekday),
    (_PREP_MONTH_RE, _prep_month),
    (_PREP_YEAR_RE, _prep_year),
]
