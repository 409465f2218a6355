"""How a person is named to the model, in a turn and in the transcripts memory is made from.

In a room with several people a message reaches the model as ``Alice (@alice:example.org):
text`` (see :mod:`mindroom.pipeline.answer`), and that is the text the session keeps. A transcript
names each person's line by their Matrix ID; a line that already starts by naming that ID is
left as it is, so it never reads ``@alice:example.org: Alice (@alice:example.org): text``.
"""

from __future__ import annotations


def who(display_name: str | None, user_id: str) -> str:
    """How the model is told who speaks: ``Alice (@alice:example.org)``, or the bare ID."""
    return f"{display_name} ({user_id})" if display_name and display_name != user_id else user_id


def named_line(text: str, user_id: str | None) -> str:
    """``text`` as a transcript line of ``user_id`` (None: unknown, the text as it is)."""
    if not user_id:
        return text
    first = text.split("\n", 1)[0]
    if first.startswith(f"{user_id}: ") or f"({user_id}): " in first:
        return text
    return f"{user_id}: {text}"
