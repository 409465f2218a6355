"""The dashboard's HTML: Jinja2 templates (``templates/``), rendered with autoescaping on.

Every value a page shows (memory text, names, config values, error messages) reaches the HTML
through a template variable, so it is escaped there; no handler builds markup from strings.
Handlers pass plain values; a template composes a page from ``base.html`` and the macros in
``macros.html``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from mindroom.dashboard.access import CSRF_FIELD
from mindroom.dashboard.forms import BASE_FIELD

TEMPLATES = Environment(
    loader=PackageLoader("mindroom.dashboard", "templates"),
    # on for .html and, by default, for any other name: nothing renders unescaped by accident
    autoescape=select_autoescape(enabled_extensions=("html",), default=True),
    undefined=StrictUndefined,  # a misspelt variable fails loudly, never renders as ""
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
TEMPLATES.globals["CSRF_FIELD"] = CSRF_FIELD
TEMPLATES.globals["BASE_FIELD"] = BASE_FIELD  # the digest of the config a form was rendered from


def render(template: str, status: int = 200, **context: Any) -> web.Response:
    """The page ``template`` with ``context``, as an HTML response."""
    text = TEMPLATES.get_template(template).render(**context)
    return web.Response(text=text, content_type="text/html", status=status)
