"""What a turn is asked and what it gives back: plain values the runtime and its callers share.

Split from :mod:`mindroom.adapters.agno.runner` (which re-exports :class:`TurnRequest` and
:class:`TurnResult`), with the two small pure helpers a turn's context and tool writes need.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from mindroom.memory.policy.consent import Person
from mindroom.memory.policy.gate import RoomAudience


@dataclass(frozen=True)
class TurnRequest:
    """What an agent is asked to answer, and in which conversation."""

    agent: str
    session_id: str
    user_id: str  # the person the turn is for (a private agent's memory is theirs)
    text: str
    carried: str = ""  # what a compacted earlier part of the conversation said
    private_recall: bool = True  # False: private memory neither recalled nor readable by tools
    trigger: str = ""  # the event answered: a resumed turn repeats no tool write of it
    speaker: str = ""  # who wrote the message: "Alice (@alice:example.org)"
    # what recall searches for: the message as written, where ``text`` names its speaker in a
    # group (a name is not what was asked: it pulled the speaker's entries into every turn)
    query: str = ""
    images: tuple[bytes, ...] = ()  # images sent with the message (to a vision model)
    # the room's people, with display names: whom a fact the tools write is about (consent)
    people: tuple[Person, ...] = ()
    # who can read the room the answer is shown in: what memory may show there, and the
    # audience of what the tools write (None: no room, e.g. the CLI)
    room: RoomAudience | None = None

    @property
    def recall_query(self) -> str:
        return self.query or self.text


SPEAKER_NOTE = (
    "You are answering {speaker}. Several people may talk to you: when you remember something "
    "about a person, say who it is about, with their name and Matrix ID, e.g. "
    '"{speaker} prefers tea".'
)


def with_speaker(context: str, speaker: str) -> str:
    """The turn's context with who is speaking (nothing when unknown)."""
    if not speaker:
        return context
    return f"{context}\n\n{SPEAKER_NOTE.format(speaker=speaker)}".strip()


def turn_key(request: TurnRequest, actor: str) -> str:
    """Names a turn for idempotent tool writes: a resumed turn gets the same key.

    The answer path passes the trigger event (``request.trigger``); without one (the CLI,
    tests) the session and the message text stand in for it."""
    if request.trigger:
        return f"{request.trigger}|{actor}"
    digest = hashlib.sha256(request.text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{request.session_id}|{actor}|{digest}"


@dataclass(frozen=True)
class TurnUsage:
    """What the model reported for one turn (zeros when it reported nothing)."""

    input_tokens: int = 0
    output_tokens: int = 0
    model: str = ""

    @classmethod
    def of(cls, metrics: object, model: str) -> TurnUsage:
        """From an Agno run's ``metrics`` (None or missing fields: zeros)."""
        return cls(
            int(getattr(metrics, "input_tokens", 0) or 0),
            int(getattr(metrics, "output_tokens", 0) or 0),
            model,
        )


@dataclass(frozen=True)
class TurnResult:
    """The outcome of a turn: the answer text, or the reason there is none."""

    text: str
    error: str | None = None  # set when the model failed; ``text`` then holds any partial answer
    usage: TurnUsage = TurnUsage()
    overflow: bool = False  # the model refused the prompt as longer than its context
    corrupt: bool = False  # the session's stored history could not be read or repaired

    @property
    def ok(self) -> bool:
        """True when the model answered."""
        return self.error is None
