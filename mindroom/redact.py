"""Hide secrets in what the bot posts: config values, command answers, model and tool errors.

Everything posted into a room is read by every member, so anything that may carry a secret
goes through here first: :func:`redact_config_value` for a config value whose key is known
(``!config get``), :func:`redact_text` for free text (an error message quoting a config line,
a model error echoing a key, a tool error). Two signals mark a secret:

* the name of its key (``api_key``, ``token``, ``password``, ``secret``, ``access_key``,
  ``private_key``, ``credentials``, ...), in a mapping or in text (``api_key: x``,
  ``"token": "x"``, ``PASSWORD=x``, ``?access_token=x``);
* the shape of the value: well-known formats (OpenAI ``sk-...``, GitHub, Slack, AWS, Google,
  Hugging Face, GitLab, Matrix ``syt_...`` tokens, JWTs, PEM private keys, ``Bearer x``,
  passwords in URLs).

A ``${VAR}`` reference is shown: it names where the secret lives, not the secret. This is a
safety net for what we post, not a guarantee: text without either signal passes unchanged.

People's words in the log: a database error's details quote the row or the key that failed
(PostgreSQL's ``DETAIL: Failing row contains (...)``, ``Key (words)=(...) already exists``)
and, by default, the statement's values. The log is not a store forget-me reaches, so they
never get there: mindroom's engines hide the values (``hide_parameters``), its database errors
leave the details out (:func:`without_database_detail`), and :class:`DatabaseDetailFilter`
takes them out of every log line and traceback, a library's included.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[redacted]"

# A key is secret when one of its words (snake_case, kebab-case or camelCase) is one of these,
# or two adjacent words are one of the pairs: ``tokens`` (a count) and ``secretary`` are not.
_SECRET_WORDS = frozenset(
    {"secret", "password", "passwd", "passphrase", "credential", "credentials", "token", "apikey"}
)
_SECRET_PAIRS = frozenset(
    {("api", "key"), ("access", "key"), ("private", "key"), ("signing", "key")}
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_ENV_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_ENV_REFERENCE_CUT = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*")  # as _ASSIGNMENT cuts it, at "}"

_KNOWN_FORMATS = re.compile(
    "|".join(
        (
            r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_-]{16,}",  # OpenAI, Anthropic, and look-alikes
            r"\bgh[pousr]_[A-Za-z0-9]{20,}",  # GitHub
            r"\bgithub_pat_[A-Za-z0-9_]{20,}",
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}",  # Slack
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",  # AWS access key id
            r"\bAIza[0-9A-Za-z_-]{30,}",  # Google
            r"\bhf_[A-Za-z0-9]{20,}",  # Hugging Face
            r"\bglpat-[A-Za-z0-9_-]{20,}",  # GitLab
            r"\bsy[tr]_[A-Za-z0-9_]{20,}",  # Synapse access and refresh tokens
            r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",  # a JWT
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
        )
    ),
    re.DOTALL,
)
_BEARER = re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{4,}", re.IGNORECASE)
_URL_PASSWORD = re.compile(
    r"((?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+(@)", re.IGNORECASE
)
# ``key: value``, ``"key": "value"``, ``KEY=value``, ``?key=value``: the value is checked
# against the key in _assignment. The separator never crosses a line. A key starts only at the
# start of a word: trying every position inside a long word would take quadratic time.
_ASSIGNMENT = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<key>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>['\"]?[ \t]*[:=][ \t]*['\"]?)"
    r"(?P<value>[^\s'\",;&?}\]]+)"
)


def is_env_reference(text: str) -> bool:
    """Whether ``text`` is one whole ``${VAR}`` reference (it names a secret's place only)."""
    return _ENV_REFERENCE.fullmatch(text.strip()) is not None


def is_secret_key(key: str) -> bool:
    """True when the last part of the dotted ``key`` names a secret (``models.x.api_key``)."""
    last = _CAMEL.sub("_", key.rsplit(".", 1)[-1]).lower()
    words = [word for word in re.split(r"[_\-\s]+", last) if word]
    return any(word in _SECRET_WORDS for word in words) or any(
        pair in _SECRET_PAIRS for pair in zip(words, words[1:], strict=False)
    )


def _secret_shown(value: str) -> str:
    return value if _ENV_REFERENCE.fullmatch(value.strip()) else REDACTED


def _hide_all(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _hide_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_hide_all(v) for v in value]
    if value is None or value == "":
        return value
    return _secret_shown(value) if isinstance(value, str) else REDACTED


def redact_config_value(key: str, value: Any) -> Any:
    """``value`` (found at dotted ``key``) with every secret in it replaced by ``[redacted]``.

    Mappings and lists come back as plain dicts and lists; the input is not changed.
    """
    if is_secret_key(key):
        return _hide_all(value)
    if isinstance(value, Mapping):
        return {k: redact_config_value(str(k), v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_config_value("", v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def _assignment(match: re.Match[str]) -> str:
    if not is_secret_key(match["key"]) or _ENV_REFERENCE_CUT.fullmatch(match["value"]):
        return match[0]
    if match["value"] in ("Bearer", "Basic"):  # "Authorization: Bearer x": _BEARER handles x
        return match[0]
    return f"{match['key']}{match['sep']}{REDACTED}"


def redact_text(text: str) -> str:
    """``text`` with secrets (by key name or by well-known format) replaced by ``[redacted]``."""
    text = _KNOWN_FORMATS.sub(REDACTED, text)
    text = _BEARER.sub(lambda m: f"{m[1]} {REDACTED}", text)
    text = _URL_PASSWORD.sub(lambda m: f"{m[1]}{REDACTED}{m[2]}", text)
    return _ASSIGNMENT.sub(_assignment, text)


_DATABASE_DETAIL = re.compile(r"^[ \t]*DETAIL:.*(?:\n|$)", re.MULTILINE)
_STATEMENT_VALUES = re.compile(r"^[ \t]*\[parameters: .*(?:\n|$)", re.MULTILINE)


def without_database_detail(text: str) -> str:
    """``text`` (a database error's message, a traceback) without the lines that quote a
    row's or a statement's values."""
    return _STATEMENT_VALUES.sub("", _DATABASE_DETAIL.sub("", text))


class DatabaseDetailFilter(logging.Filter):
    """Takes a database error's details out of a log record's message and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = without_database_detail(record.exc_text)
        message = record.getMessage()
        scrubbed = without_database_detail(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        return True
