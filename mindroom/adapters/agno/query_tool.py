"""The ``memory_query`` tool: one call with categories, filters, top_k, threshold,
``return: bullets|full`` and a token budget, answered by
:mod:`mindroom.memory.search.structured_query`.

Its arguments are a JSON schema of our own rather than a Python signature: ``return`` is a
Python keyword, and the request's shape (a nested ``filters`` object) is the contract the spec
writes down. Errors come back as text starting with ``error:``, like the other memory tools.
"""

from __future__ import annotations

from typing import Any

from agno.tools.function import Function

from mindroom.memory.bounded import bounded
from mindroom.memory.policy.view import AgentView
from mindroom.memory.search.structured_query import Asker, parse_request, run_query
from mindroom.memory.tools import guard


def _of(kind: str, description: str = "", **more: Any) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": kind, **more}
    if description:
        schema["description"] = description
    return schema


_DAY = "YYYY-MM-DD"
_FILTERS = _of(
    "object",
    "Optional conditions on the entries.",
    properties={
        "user_id": _of("string", "Only this person's (must be the one you answer)."),
        "agent_id": _of("string", "Only this agent's memory (must be yours)."),
        "run_id": _of("string", "Only entries written in this conversation (session id)."),
        "actor_id": _of("string", "Written by: tool, flush, cli, curation, consolidation."),
        "role": _of(
            "string", "user: written by people; assistant: by you.", enum=["user", "assistant"]
        ),
        "category": _of("string"),
        "pinned": _of("boolean"),
        "importance_min": _of("integer", minimum=1, maximum=5),
        "importance_max": _of("integer", minimum=1, maximum=5),
        "updated_after": _of("string", _DAY),
        "updated_before": _of("string", _DAY),
    },
    additionalProperties=False,
)

SCHEMA: dict[str, Any] = _of(
    "object",
    properties={
        "query": _of("string", "What to look for (empty: the newest matching entries)."),
        "categories": _of(
            "array",
            'Categories to search, e.g. ["tasks"]; procedural steps only when asked for.',
            items={"type": "string"},
        ),
        "filters": _FILTERS,
        "top_k": _of("integer", "How many results (default 5).", minimum=1, maximum=50),
        "threshold": _of("number", "Drop results less similar to the query (e.g. 0.65)."),
        "return": _of(
            "string", "bullets (default): short lines; full: every field.", enum=["bullets", "full"]
        ),
        "budget_tokens": _of(
            "integer", "Answer size limit (default 512).", minimum=16, maximum=8192
        ),
        "agent": _of("string", "Your own name (optional)."),
    },
    required=[],
    additionalProperties=False,
)

DESCRIPTION = (
    "Query your memory by meaning, category and fields in one call. Returns JSON: a list of "
    '{"id", "category", "text"} (return "bullets") or every field (return "full"). Your '
    "memory for this turn is already in your context: call this only when it does not answer "
    'and you are unsure (then once, with return "bullets" and top_k 3), or to fetch a '
    'category on purpose, such as "procedural" steps.'
)


def memory_query_function(view: AgentView, asker: Asker) -> Function:
    """The ``memory_query`` tool over ``view``, for ``asker``."""

    async def memory_query(**arguments: Any) -> str:
        async def act() -> str:
            request = parse_request(arguments)
            return await bounded(run_query, view, request, asker)

        return await guard(act)

    return Function(
        name="memory_query",
        description=DESCRIPTION,
        parameters=SCHEMA,
        entrypoint=memory_query,
        skip_entrypoint_processing=True,
    )
