"""The plant of ``bench/consolidation.py``: generated people and facts, with known duplicates
and contradictions, written into memory files; and the oracle that answers the judge from it.

See that bench's docstring for what is planted and why.
"""

from __future__ import annotations

import datetime as dt
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from mindroom.memory.files.markdown import hand_id

DUPLICATE_KINDS = ("exact", "near-exact", "paraphrase")
CONFLICT_KINDS = ("negation", "value change")
CURATED = "MEMORY.md"

# -- vocabularies ------------------------------------------------------------------------------


def _words(spec: str) -> tuple[str, ...]:
    return tuple(w.strip() for w in spec.split(",") if w.strip())


_ONSETS = _words(
    "b, d, f, g, h, k, l, m, n, p, r, s, t, v, z, br, dr, fr, gr, kr, pr, st, tr, sh, th, ch, j, w"
)
_VOWELS = _words("a, e, i, o, u, a, e, i, o, ai, ei, ou, ia")
_CODAS = ["", "", "", "n", "r", "l", "s", "m", "th", "k"]
_PLACE_ENDS = ["", "", "a", "ton", "burg", "holm", "dal", "ford", "mouth", "vik", "stead"]
JOBS = _words(
    "nurse, pilot, teacher, plumber, architect, accountant, electrician, baker, chef, dentist, "
    "journalist, librarian, pharmacist, firefighter, carpenter, translator, lawyer, vet, "
    "surveyor, geologist, paramedic, photographer, midwife, barista, tailor, welder, zookeeper, "
    "florist, optician, physiotherapist, economist, locksmith, sommelier, glazier, cartographer, "
    "actuary, stonemason, software engineer, data analyst, graphic designer, social worker, "
    "bus driver, air traffic controller, urban planner, sound engineer, flight attendant"
)
HOBBIES = _words(
    "hiking/going on hikes, chess/playing chess, pottery/making pottery, rock climbing, "
    "birdwatching/watching birds, knitting, sailing/going sailing, gardening, salsa dancing/"
    "dancing salsa, photography/taking photos, fencing, archery, surfing/going surfing, baking "
    "bread, woodworking, kayaking/paddling a kayak, board games/playing board games, calligraphy, "
    "stargazing/looking at the stars, cycling/riding a bike, running/going for runs, watercolour "
    "painting/painting with watercolours, fishing/going fishing, yoga/doing yoga, bouldering, "
    "origami/folding origami, skiing/going skiing, tennis/playing tennis, scuba diving, juggling, "
    "embroidery, crossword puzzles/solving crosswords, geocaching, ice skating/skating, "
    "badminton/playing badminton, model trains/building model trains, metal detecting"
)
FOODS = _words(
    "ramen, dumplings, lentil soup, sushi, tacos, paella, goulash, pho, falafel, kimchi, pierogi, "
    "risotto, green curry, lasagne, croissants, dark chocolate, blue cheese, olives, pancakes, "
    "borscht, gnocchi, ceviche, baklava, dim sum, moussaka, halloumi, pad thai, shakshuka, "
    "jollof rice, tiramisu, empanadas, pretzels, mango sticky rice"
)
ALLERGENS = _words(
    "peanuts, shellfish, penicillin, cat hair, pollen, latex, strawberries, sesame, bee stings, "
    "dust mites, kiwi fruit, hazelnuts, mustard, celery, eggs, soy, wasp stings, ragweed, mould"
)
INSTRUMENTS = _words(
    "violin, cello, piano, trumpet, banjo, harp, oboe, drums, accordion, ukulele, flute, "
    "clarinet, saxophone, mandolin, bagpipes, harmonica, trombone, bassoon, tuba, sitar, "
    "harpsichord, xylophone, bass guitar, double bass, french horn"
)
LANGUAGES = _words(
    "Portuguese, Finnish, Korean, Swahili, Icelandic, Greek, Turkish, Polish, Dutch, Hungarian, "
    "Tagalog, Vietnamese, Hebrew, Arabic, Hindi, Bengali, Czech, Romanian, Norwegian, Danish, "
    "Japanese, Mandarin, Italian, Welsh, Basque, Catalan, Ukrainian, Amharic, Yoruba, Thai"
)
COLOURS = _words(
    "red, blue, green, yellow, purple, orange, teal, crimson, turquoise, lavender, maroon, "
    "olive, navy, amber, coral, indigo, mint, ochre, magenta"
)
CAR_COLOURS = _words("red, blue, silver, green, black, white, yellow, grey")
CAR_BRANDS = _words(
    "Volvo, Toyota, Skoda, Fiat, Renault, Kia, Subaru, Mazda, Peugeot, Honda, Dacia, Saab, "
    "Citroen, Nissan, Hyundai, Lancia, Opel, Suzuki"
)
SUBJECTS = _words(
    "geology, philosophy, marine biology, economics, architecture, mechanical engineering, "
    "art history, linguistics, chemistry, nursing, law, statistics, astronomy, music theory, "
    "agriculture, anthropology, civil engineering, medieval history, mathematics"
)
COMMUTES = _words("bike, bus, train, tram, car, ferry, scooter, motorbike")
PETS = _words("cats, dogs, rabbits, parrots, hamsters, tortoises, goldfish, ferrets")
TITLE_ADJECTIVES = _words(
    "Silent, Hidden, Last, Golden, Broken, Distant, Quiet, Northern, Burning, Salt, Paper, Iron, "
    "Glass, Winter, Lost, Second, Wild, Narrow, Crooked, Hollow, Velvet, Forgotten"
)
TITLE_NOUNS = _words(
    "Harbour, Orchard, Lighthouse, Kingdom, River, Archive, Mountain, Letter, Bridge, Island, "
    "Station, Clockmaker, Tide, Forest, Lantern, Ferryman, Mirror, Valley, Shepherd, Compass"
)
TEAMS = _words("Rovers, United, Athletic, Wanderers, Rangers, Albion, Harriers, Town")
COMPANIES = _words("Labs, Systems, Foods, Logistics, Bank, Studio, Robotics, Insurance, Energy")
MONTHS = _words(
    "January, February, March, April, May, June, July, August, September, October, November, "
    "December"
)
RELATIVES = _words("sister, brother, mother, father, cousin, aunt, uncle")
NUMBERS = ("zero", "one", "two", "three", "four", "five", "six")
# a habit: its positive wordings and its negated ones ("|" between wordings)
HABITS = [
    ("eats meat|is a meat eater", "does not eat meat|doesn't eat meat|never eats meat"),
    ("eats fish|likes to eat fish", "does not eat fish|doesn't eat fish|never eats fish"),
    ("drinks coffee|is a coffee drinker", "does not drink coffee|never drinks coffee"),
    ("drinks alcohol|enjoys a drink", "does not drink alcohol|never drinks alcohol"),
    ("smokes|is a smoker", "does not smoke|doesn't smoke|never smokes"),
    ("can swim|knows how to swim", "cannot swim|can't swim"),
    ("can drive|knows how to drive", "cannot drive|can't drive"),
    ("likes flying|enjoys flying", "does not like flying|doesn't like flying"),
    ("works on weekends|works weekends", "does not work on weekends|never works on weekends"),
    ("is afraid of dogs|fears dogs", "is not afraid of dogs|isn't afraid of dogs"),
    ("likes crowds|enjoys crowds", "does not like crowds|doesn't like crowds"),
    ("sleeps well|sleeps soundly", "does not sleep well|doesn't sleep well"),
    ("enjoys cooking|likes to cook", "does not enjoy cooking|doesn't like to cook"),
    ("has a passport|holds a passport", "does not have a passport|doesn't have a passport"),
]


def _syllables(rng: random.Random, count: int) -> str:
    parts = (rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(count))
    return "".join(parts).capitalize()


def _place(rng: random.Random) -> str:
    return _syllables(rng, rng.choice((1, 2, 2))) + rng.choice(_PLACE_ENDS)


# -- attributes --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Value:
    """One value of an attribute: its key, the equivalent ways to say it (each fills the
    wordings' slots) and what a change of it keeps (``parts``)."""

    key: str
    forms: tuple[dict[str, str], ...]
    parts: tuple[str, ...] = ()


Make = Callable[[random.Random, Value | None], Value]


@dataclass(frozen=True)
class Attribute:
    """A kind of fact. ``make(rng, old)`` gives a value (with ``old``: a changed one);
    ``changed`` are the wordings of a changed value (none: never contradicted); a ``single``
    attribute has one value per person."""

    name: str
    wordings: tuple[str, ...]
    make: Make
    details: tuple[str, ...]  # one is added for a near-exact copy
    single: bool = True
    changed: tuple[str, ...] = ()
    negation: bool = False


def _attr(
    name: str, wordings: str, make: Make, details: str, changed: str = "", single: bool = True
) -> Attribute:
    """An attribute from ";"-separated wordings ({p}: who, {v}: the value) and details."""

    def split(spec: str) -> tuple[str, ...]:
        return tuple(s.strip() for s in spec.split(";") if s.strip())

    return Attribute(name, split(wordings), make, split(details), single, split(changed))


def _pick(items: tuple[str, ...], article: bool = False) -> Make:
    """Values drawn from ``items`` ("a/b": two ways to say one value)."""

    def make(rng: random.Random, old: Value | None) -> Value:
        forms = rng.choice(items).split("/")
        if article:
            forms = [("an " if f[0] in "aeiou" else "a ") + f for f in forms]
        return Value(forms[0], tuple({"v": f} for f in forms))

    return make


def _made(build: Callable[[random.Random], str]) -> Make:
    return lambda rng, old: Value(value := build(rng), ({"v": value},))


def _counted(things: tuple[str, ...]) -> Make:
    """A count of things ("2 cats" / "two cats"); a change keeps the thing."""

    def make(rng: random.Random, old: Value | None) -> Value:
        thing, n = old.parts[0] if old else rng.choice(things), rng.randint(2, 6)
        forms = ({"v": f"{n} {thing}"}, {"v": f"{NUMBERS[n]} {thing}"})
        return Value(f"{n} {thing}", forms, (thing,))

    return make


def _birthday(rng: random.Random, old: Value | None) -> Value:
    month, day = rng.choice(MONTHS), rng.randint(1, 28)
    return Value(f"{month} {day}", ({"v": f"{month} {day}"}, {"v": f"{day} {month}"}))


def _age(rng: random.Random, old: Value | None) -> Value:
    n = int(old.key) + rng.randint(1, 2) if old else rng.randint(19, 79)
    return Value(str(n), ({"v": str(n)},))


def _trip(rng: random.Random, old: Value | None) -> Value:
    place, month = old.parts[0] if old else _place(rng), rng.choice(MONTHS)
    return Value(f"{place} {month}", ({"place": place, "month": month},), (place,))


def _study(rng: random.Random, old: Value | None) -> Value:
    subject, school = rng.choice(SUBJECTS), _place(rng) + " University"
    return Value(subject, ({"subject": subject, "school": school},))


def _child(rng: random.Random, old: Value | None) -> Value:
    kind, name = rng.choice(("son", "daughter")), _syllables(rng, 2)
    return Value(name, ({"v": f"a {kind} named {name}"}, {"v": f"a {kind} called {name}"}))


def _habit(rng: random.Random, old: Value | None) -> Value:
    """A habit, positive or negated; a change says the opposite."""
    index = int(old.parts[0]) if old else rng.randrange(len(HABITS))
    positive = old.parts[1] == "no" if old else rng.random() < 0.5
    forms = HABITS[index][0 if positive else 1].split("|")
    return Value(
        f"{index} {positive}",
        tuple({"v": f} for f in forms),
        (str(index), "yes" if positive else "no"),
    )


_SINCE = "since {year}"
ATTRIBUTES = (
    _attr(
        "job",
        "{p} works as {v}; {p} is {v} by profession; {p} has a job as {v}; "
        "{p} is employed as {v}; {p} earns a living as {v}",
        _pick(JOBS, article=True),
        f"{_SINCE}; on the night shift; at a small firm; part-time",
        "{p} now works as {v}; {p} changed careers and is now {v}; {p} retrained as {v}",
    ),
    _attr(
        "home",
        "{p} lives in {v}; {p} is based in {v}; {p} resides in {v}; {p}'s home is in {v}",
        _made(_place),
        f"{_SINCE}; near the old harbour; in a flat by the river; with two flatmates",
        "{p} moved to {v}; {p} relocated to {v}; {p} now lives in {v}",
    ),
    _attr(
        "employer",
        "{p} works at {v}; {p} is employed by {v}; {p} has a job at {v}; {p}'s employer is {v}",
        _made(lambda r: f"{_syllables(r, 2)} {r.choice(COMPANIES)}"),
        f"{_SINCE}; in the finance department; as a contractor; remotely",
        "{p} now works at {v}; {p} left for a job at {v}; {p} joined {v}",
    ),
    _attr(
        "pets",
        "{p} has {v}; {p} owns {v}; {p} looks after {v}",
        _counted(PETS),
        "at home; that are all rescues; named after painters",
        "{p} now has {v}; {p} has {v} these days",
    ),
    _attr(
        "siblings",
        "{p} has {v}; {p} grew up with {v}",
        _counted(("sisters", "brothers")),
        "who all live abroad; who are all older; and sees them every summer",
        "{p} actually has {v}",
    ),
    _attr(
        "hobby",
        "{p} likes {v}; {p} enjoys {v}; {p} is into {v}; {p} has a hobby: {v}",
        _pick(HOBBIES),
        "every weekend; since childhood; with friends from work; twice a month",
        single=False,
    ),
    _attr(
        "food",
        "{p} loves {v}; {p} is a big fan of {v}; {p} really enjoys eating {v}",
        _pick(FOODS),
        "from the stall near work; especially on Fridays; since a trip abroad",
        single=False,
    ),
    _attr(
        "allergy",
        "{p} is allergic to {v}; {p} has an allergy to {v}; {p} reacts badly to {v}",
        _pick(ALLERGENS),
        "since childhood; and carries medication; quite severely",
        single=False,
    ),
    _attr(
        "instrument",
        "{p} plays the {v}; {p} can play the {v}; {p} knows how to play the {v}",
        _pick(INSTRUMENTS),
        "in a local band; since the age of {n}; every evening",
        single=False,
    ),
    _attr(
        "language",
        "{p} speaks {v}; {p} is fluent in {v}; {p} can speak {v}",
        _pick(LANGUAGES),
        "fluently; from years abroad; with family at home",
        single=False,
    ),
    _attr(
        "birthday",
        "{p}'s birthday is on {v}; {p} was born on {v}; {p} celebrates a birthday on {v}",
        _birthday,
        "and likes a small party; and always takes the day off",
        "{p}'s birthday is actually on {v}; correction: {p} was born on {v}",
    ),
    _attr(
        "age",
        "{p} is {v} years old; {p} is aged {v}; {p}'s age is {v}",
        _age,
        "as of this spring; according to the party invitation",
        "{p} just turned {v}; {p} is {v} now",
    ),
    _attr(
        "partner",
        "{p} is married to {v}; {p}'s spouse is {v}; {p} and {v} are married",
        _made(lambda r: _syllables(r, 2)),
        f"{_SINCE}; for {{n}} years now",
        "{p} is now married to {v}; {p} married {v}",
    ),
    _attr(
        "child",
        "{p} has {v}; {p} is the parent of {v}",
        _child,
        "who is {n} years old; who just started school",
        single=False,
    ),
    _attr(
        "car",
        "{p} drives {v}; {p}'s car is {v}; {p} gets around in {v}",
        _made(lambda r: f"a {r.choice(CAR_COLOURS)} {r.choice(CAR_BRANDS)}"),
        "with a roof rack; bought second-hand; to work every day",
        "{p} now drives {v}; {p} traded the old car for {v}",
    ),
    _attr(
        "colour",
        "{p}'s favourite colour is {v}; {v} is {p}'s favourite colour; "
        "the colour {p} likes best is {v}",
        _pick(COLOURS),
        "since childhood; by a wide margin",
        "{p}'s favourite colour is now {v}",
    ),
    _attr(
        "team",
        "{p} supports {v}; {p} is a fan of {v}; {p} cheers for {v}",
        _made(lambda r: f"{_place(r)} {r.choice(TEAMS)}"),
        "since childhood; and never misses a home game",
        "{p} now supports {v}; {p} switched to supporting {v}",
    ),
    _attr(
        "study",
        "{p} studied {subject} at {school}; {p} has a degree in {subject} from "
        "{school}; {p} graduated in {subject} from {school}",
        _study,
        "in {year}; with honours; on a scholarship",
    ),
    _attr(
        "trip",
        "{p} is planning a trip to {place} in {month}; {p} will travel to {place} in "
        "{month}; {p} has a trip to {place} booked for {month}",
        _trip,
        "with friends; for two weeks; on a tight budget",
        "{p}'s trip to {place} moved to {month}; {p} now plans to visit {place} in {month}",
        single=False,
    ),
    _attr(
        "reading",
        "{p} is reading {v}; {p} is in the middle of {v}; {p} is currently reading {v}",
        _made(lambda r: f"The {r.choice(TITLE_ADJECTIVES)} {r.choice(TITLE_NOUNS)}"),
        "on the commute; before bed; for a book club",
        single=False,
    ),
    _attr(
        "project",
        "{p} is working on the {v} project; {p} is busy with the {v} project; "
        "{p} works on project {v}",
        _made(lambda r: _syllables(r, 3)),
        "with a small team; until the end of the year; as the lead",
        single=False,
    ),
    _attr(
        "wake",
        "{p} gets up at {v}; {p} wakes up at {v}; {p} is usually up by {v}",
        _made(lambda r: f"{r.randint(4, 9)}am"),
        "on weekdays; every morning; even on holidays",
        "{p} now gets up at {v}; {p} has started waking at {v}",
    ),
    _attr(
        "commute",
        "{p} commutes by {v}; {p} goes to work by {v}; {p} travels to work by {v}",
        _pick(COMMUTES),
        "every day; in all weathers",
        "{p} now commutes by {v}; {p} switched to commuting by {v}",
    ),
)
HABIT = Attribute(
    "habit",
    ("{p} {v}",),
    _habit,
    ("these days", "for health reasons", "according to a friend"),
    changed=("{p} {v}",),
    negation=True,
)
KINDS = (*ATTRIBUTES, HABIT, HABIT, HABIT)  # a person has a few habits


# -- the plant ---------------------------------------------------------------------------------


def normal(text: str) -> str:
    """What makes two texts one for the oracle: their words, case-folded."""
    return " ".join(re.findall(r"[^\W_]+", text.casefold()))


@dataclass(frozen=True)
class Fact:
    """One fact of the plant; its entries are the texts that say it."""

    id: int
    person: str  # who it is about: "Kelo", "Kelo's sister"
    attribute: Attribute
    value: Value
    text: str
    relative: bool = False


@dataclass(frozen=True)
class Planted:
    """One entry as written at the start."""

    id: str  # its m- id (a person's line: the id the parser gives it)
    text: str
    path: str
    fact: int
    role: str  # "fact", "contradiction", or one of DUPLICATE_KINDS
    hand: bool = False

    @property
    def line(self) -> str:
        return f"- {self.text}" if self.hand else f"- {self.text} <!-- {self.id} -->"


@dataclass
class Plant:
    facts: dict[int, Fact] = field(default_factory=dict)
    entries: list[Planted] = field(default_factory=list)
    contradictions: dict[frozenset[int], str] = field(default_factory=dict)  # facts -> kind
    by_text: dict[str, int] = field(default_factory=dict)  # normal form -> fact

    def claim(self, text: str, fact: int) -> bool:
        """Whether ``text`` may say ``fact`` (no other fact's text reads the same)."""
        return self.by_text.setdefault(normal(text), fact) == fact


def _say(wording: str, person: str, form: dict[str, str]) -> str:
    text = wording.format(p=person, **form)
    return text[0].upper() + text[1:]


def _exact_copy(rng: random.Random, text: str) -> str:
    """The same text, sometimes with a full stop, in lower case or with a double space."""
    variant = rng.random()
    if variant < 0.4:
        return text
    if variant < 0.6:
        return text + "."
    if variant < 0.8:
        return text.lower()
    words = text.split(" ")
    at = rng.randrange(1, len(words))
    return " ".join(words[:at]) + "  " + " ".join(words[at:])


class _Planter:
    """Builds a :class:`Plant` (see the module docstring)."""

    def __init__(self, rng: random.Random, days: list[dt.date]) -> None:
        self.rng, self.days, self.plant = rng, days, Plant()
        self.names: set[str] = set()
        self.ids: set[str] = set()
        self.home: dict[int, Planted] = {}  # fact -> its first entry

    def _id(self) -> str:
        while (found := f"m-{self.rng.getrandbits(32):08x}") in self.ids:
            pass
        self.ids.add(found)
        return found

    def _daily(self, after: str = "", avoid: str = "") -> str:
        days = [d for d in self.days if d.isoformat() > after] or self.days
        path = avoid
        while path == avoid:
            path = f"memory/{self.rng.choice(days).isoformat()}.md"
        return path

    def _add(self, fact: int, text: str, role: str, path: str, hand: bool = False) -> None:
        entry_id = hand_id(path, text) if hand else self._id()
        entry = Planted(entry_id, text, path, fact, role, hand)
        self.plant.entries.append(entry)
        self.home.setdefault(fact, entry)

    def _fact(
        self, person: str, attribute: Attribute, value: Value, wording: str, relative: bool = False
    ) -> Fact | None:
        text = _say(wording, person, self.rng.choice(value.forms))
        fact = Fact(len(self.plant.facts), person, attribute, value, text, relative)
        if not self.plant.claim(text, fact.id):
            return None
        self.plant.facts[fact.id] = fact
        return fact

    def _place(self, fact: Fact) -> None:
        if self.rng.random() < 0.04:
            self._add(fact.id, fact.text, "fact", CURATED, hand=self.rng.random() < 1 / 3)
        else:
            self._add(fact.id, fact.text, "fact", self._daily())

    def distinct(self, count: int) -> None:
        rng = self.rng
        while len(self.plant.facts) < count:
            while (person := _syllables(rng, rng.choice((2, 2, 3)))) in self.names:
                pass
            self.names.add(person)
            used: set[tuple[str, str]] = set()
            made: list[Fact] = []
            for _ in range(rng.choice((1, 2, 2, 3, 3, 4, 5, 6, 8))):
                kind = rng.choice(KINDS)
                value = kind.make(rng, None)
                key = (
                    kind.name,
                    value.parts[0] if kind.negation else "" if kind.single else value.key,
                )
                if key in used or len(self.plant.facts) >= count:
                    continue
                fact = self._fact(person, kind, value, rng.choice(kind.wordings))
                if fact is not None:
                    used.add(key)
                    made.append(fact)
                    self._place(fact)
            # a relative who shares one of the person's facts: a near miss, not a duplicate
            if made and rng.random() < 0.12 and len(self.plant.facts) < count:
                base = rng.choice(made)
                shareable = base.attribute.name not in ("habit", "partner", "child")
                if shareable and base.attribute.wordings[0].startswith("{p}"):
                    who = f"{person}'s {rng.choice(RELATIVES)}"
                    fact = self._fact(
                        who, base.attribute, base.value, base.attribute.wordings[0], relative=True
                    )
                    if fact is not None:
                        self._place(fact)

    def duplicates(self, counts: dict[str, int]) -> None:
        rng, facts = self.rng, list(self.plant.facts.values())
        done: set[tuple[int, str]] = set()
        for kind, count in counts.items():
            made = tries = 0
            while made < count and tries < 50 * count:
                tries += 1
                fact = rng.choice(facts)
                text = self._copy(kind, fact) if (fact.id, kind) not in done else None
                if text is None:
                    continue
                done.add((fact.id, kind))
                home = self.home[fact.id]
                if home.path == CURATED:  # a copy of a curated fact is planted beside it
                    # (a person's two equal lines would be one entry: not planted)
                    hand = rng.random() < 1 / 3 and not (home.hand and text == home.text)
                    self._add(fact.id, text, kind, CURATED, hand)
                else:
                    self._add(fact.id, text, kind, self._daily(avoid=home.path))
                made += 1

    def _copy(self, kind: str, fact: Fact) -> str | None:
        rng = self.rng
        if kind == "exact":
            return _exact_copy(rng, fact.text)
        if kind == "near-exact":
            detail = rng.choice(fact.attribute.details)
            text = f"{fact.text} {detail.format(year=rng.randint(2008, 2024), n=rng.randint(2, 9))}"
        else:
            ways = {
                _say(w, fact.person, f) for w in fact.attribute.wordings for f in fact.value.forms
            }
            ways = sorted(w for w in ways if normal(w) != normal(fact.text))
            if not ways:
                return None
            text = rng.choice(ways)
        return text if self.plant.claim(text, fact.id) else None

    def contradictions(self, counts: dict[str, int], curated_share: float) -> None:
        """Contradict facts (a share of them in ``MEMORY.md``) with a fact noted later."""
        rng = self.rng
        for kind, count in counts.items():
            pool = [
                f
                for f in self.plant.facts.values()
                if f.attribute.changed
                and not f.relative
                and f.attribute.negation == (kind == "negation")
            ]
            rng.shuffle(pool)
            curated = [f for f in pool if self.home[f.id].path == CURATED]
            pool = curated[: round(count * curated_share)] + pool
            made = 0
            for old in pool:
                if made == count:
                    break
                value = old.attribute.make(rng, old.value)
                if value.key == old.value.key or any(
                    old.id in p for p in self.plant.contradictions
                ):
                    continue
                wording = rng.choice(old.attribute.changed + old.attribute.wordings)
                new = self._fact(old.person, old.attribute, value, wording)
                if new is None:
                    continue
                self.plant.contradictions[frozenset((old.id, new.id))] = kind
                home = self.home[old.id].path
                after = home.removeprefix("memory/").removesuffix(".md") if home != CURATED else ""
                self._add(new.id, new.text, "contradiction", self._daily(after, avoid=home))
                made += 1


def build_plant(entries: int, seed: int, today: dt.date, days: int = 60) -> Plant:
    """The planted memory (see the module docstring): ``entries`` entries, ~13% duplicates,
    ~5% contradicting entries, the rest distinct facts; daily files of the ``days`` days
    before yesterday."""
    rng = random.Random(seed)
    planter = _Planter(rng, [today - dt.timedelta(days=d) for d in range(2, days + 2)])
    contradicting, duplicated = round(entries * 0.05), round(entries * 0.13)
    planter.distinct(entries - contradicting - duplicated)
    exact, near = round(duplicated * 0.4), round(duplicated * 0.3)
    planter.duplicates(
        {"exact": exact, "near-exact": near, "paraphrase": duplicated - exact - near}
    )
    negations = round(contradicting * 0.4)
    planter.contradictions({"negation": negations, "value change": contradicting - negations}, 0.15)
    rng.shuffle(planter.plant.entries)
    return planter.plant


def write_plant(plant: Plant, root: Path) -> None:
    """Write the entries into their files, as the flush and a person leave them."""
    files: dict[str, list[str]] = {CURATED: ["# Memory", ""]}
    for entry in plant.entries:
        files.setdefault(entry.path, []).append(entry.line)
    for relative, lines in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def oracle(plant: Plant, said: Counter[str]) -> Callable[[str, str], str | dict[str, str]]:
    """The scripted judge's verdict on two texts, from the plant (``said`` counts them)."""

    def verdict(a: str, b: str) -> str | dict[str, str]:
        fa, fb = plant.by_text.get(normal(a)), plant.by_text.get(normal(b))
        if fa is None or fb is None:
            said["different (a text not in the plant)"] += 1
            return "different"
        if fa == fb:
            said["same"] += 1
            return {"verdict": "same", "merged": max(a, b, key=len)}
        if frozenset((fa, fb)) in plant.contradictions:
            said["conflict"] += 1
            return "conflict"
        said["different"] += 1
        return "different"

    return verdict
