"""Context-overflow errors: the model refused a prompt because it is too long. Pure.

Providers say it in their own words (OpenAI's ``context_length_exceeded``, "maximum context
length", Anthropic's "prompt is too long", Gemini's "exceeds the maximum number of tokens",
local servers' "context window"); :func:`is_context_overflow` recognises them in an error's
text, so the answer path can compact and retry instead of showing the error.
"""

from __future__ import annotations

import re

_OVERFLOW = re.compile(
    r"context[_ ]length[_ ]exceeded|maximum context length|context window|"
    r"prompt is too long|too many tokens|exceeds? the (?:maximum|max)[\w ]* tokens|"
    r"input is too long|reduce the length of the messages|request too large for model|"
    r"string too long",
    re.IGNORECASE,
)


def is_context_overflow(error: object) -> bool:
    """True when ``error`` (an exception or its text) says the prompt exceeded the context."""
    return bool(_OVERFLOW.search(str(error)))
