"""A scripted answer to consolidation's pair-judge prompt, for tests and the bench.

The judge (:mod:`mindroom.memory.jobs.consolidate.judge`) sends a system text starting with
:data:`JUDGE_MARKER` and a user text of numbered pairs::

    Pair 1 (A dated 2026-03-01, B dated 2026-06-01)
    A: Alice lives in Berlin
    B: Alice moved to Lisbon

(the parenthesis only when a date is known) and expects
``{"pairs": [{"pair": 1, "verdict": "conflict", "reason": "..."}, ...]}``.

Given what the "model" should say about each pair of texts, :func:`answer_judge` writes that
answer; :func:`judge_handler` wraps it for
:class:`tests.support.scripted_model.ScriptedModel`, so the judge's real HTTP path runs::

    server.set_handler(judge_handler({("Alice likes tea", "alice prefers tea"): "same"}))

A verdict is ``"different"``, ``"conflict"`` (reason "scripted conflict"), ``"same"`` (merged:
both texts joined by "; "), or a dict with the answer's fields (``{"verdict": "same", "merged":
"..."}``). Pairs are looked up in either order, with whitespace collapsed; a pair not in the
mapping gets ``default``. ``verdicts`` may also be a function ``(text_a, text_b) -> verdict``.
Standard library only, like the scripted model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

try:
    from tests.support.scripted_model import Handler, ReplyLike, last_user_text, system_text
except ImportError:  # tests/ is on sys.path instead of the project root
    from scripted_model import (  # type: ignore[no-redef]
        Handler,
        ReplyLike,
        last_user_text,
        system_text,
    )

__all__ = [
    "JUDGE_MARKER",
    "VerdictLike",
    "answer_judge",
    "is_judge_request",
    "judge_handler",
    "judge_pairs",
]

JUDGE_MARKER = "You check pairs of memory entries for one assistant."

VerdictLike = str | Mapping[str, Any]
Verdicts = Mapping[tuple[str, str], VerdictLike] | Callable[[str, str], VerdictLike]

_PAIR = re.compile(r"^Pair (\d+)\b")


def _collapse(text: str) -> str:
    return " ".join(text.split())


def judge_pairs(user: str) -> list[tuple[int, str, str]]:
    """The numbered pairs of a judge prompt's user text: ``(number, text A, text B)``."""
    pairs: list[tuple[int, str, str]] = []
    number: int | None = None
    a: str | None = None
    for line in user.splitlines():
        head = _PAIR.match(line)
        if head:
            number, a = int(head.group(1)), None
        elif number is not None and line.startswith("A: "):
            a = line[3:]
        elif number is not None and a is not None and line.startswith("B: "):
            pairs.append((number, a, line[3:]))
            number, a = None, None
    return pairs


def is_judge_request(body: dict[str, Any]) -> bool:
    """Whether a chat request is the consolidation judge's."""
    return system_text(body).startswith(JUDGE_MARKER)


def _lookup(verdicts: Verdicts, a: str, b: str, default: VerdictLike) -> VerdictLike:
    if callable(verdicts):
        return verdicts(a, b)
    table = {(_collapse(x), _collapse(y)): v for (x, y), v in verdicts.items()}
    found = table.get((a, b))
    if found is None:
        found = table.get((b, a))
    return default if found is None else found


def _item(number: int, a: str, b: str, verdict: VerdictLike) -> dict[str, Any]:
    if not isinstance(verdict, str):
        return {"pair": number, **verdict}
    item: dict[str, Any] = {"pair": number, "verdict": verdict}
    if verdict == "same":
        item["merged"] = f"{a}; {b}"
    elif verdict == "conflict":
        item["reason"] = "scripted conflict"
    return item


def answer_judge(
    system: str, user: str, verdicts: Verdicts, default: VerdictLike = "different"
) -> str:
    """The answer to one judge prompt: a verdict for every pair it numbers (see the module)."""
    if not system.startswith(JUDGE_MARKER):
        raise ValueError("not the consolidation judge's prompt")
    items = [_item(n, a, b, _lookup(verdicts, a, b, default)) for n, a, b in judge_pairs(user)]
    return json.dumps({"pairs": items})


def judge_handler(
    verdicts: Verdicts, default: VerdictLike = "different", other: Handler | None = None
) -> Handler:
    """A :class:`ScriptedModel` handler answering judge prompts by :func:`answer_judge`; any
    other request goes to ``other`` (default: the echo reply)."""

    def handle(body: dict[str, Any]) -> ReplyLike:
        if is_judge_request(body):
            return answer_judge(system_text(body), last_user_text(body), verdicts, default)
        return other(body) if other is not None else "echo: " + last_user_text(body)

    return handle
