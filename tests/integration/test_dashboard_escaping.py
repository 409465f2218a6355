"""Memory text and names reach every dashboard page as text, never as markup: the pages are
autoescaped templates. Each page that shows memory text or a name is opened with a memory
entry, an agent's role and display name, and a person's Matrix ID that carry a script and an
attribute-breaking image tag; the page must show them (escaped), and run none of them."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from urllib.parse import quote

import aiohttp
import pytest

from mindroom.dashboard.person import person_link
from mindroom.dashboard.scopes import PRIVATE, list_scopes
from mindroom.dashboard.server import Dashboard
from mindroom.memory.files.fields import EntryFields
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.audience import AudienceBook, Told
from tests.support.dashboard import signed_in, start_dashboard
from tests.support.harness import BotHarness, config_text
from tests.support.scripted_model import ScriptedModel

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

SCRIPT = "<script>alert(1)</script>"
IMAGE = '"><img src=x onerror=alert(2)>'
EVIL = f"tea {SCRIPT} and {IMAGE} biscuits"
PERSON = f"@eve{IMAGE}:localhost"  # a name in a link: signed as it is


class _Markup(HTMLParser):
    """The elements, attributes and script text of a page, as a browser parses them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: set[str] = set()
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes.update(name for name, _ in attrs)
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


def assert_shown_escaped(page: str, where: str, text: str) -> None:
    """``text`` is on the page as text (the control), and none of its markup is."""
    assert text in html.unescape(page), f"{where}: the text is not shown at all"
    parsed = _Markup()
    parsed.feed(page)
    assert "img" not in parsed.tags, where
    assert "onerror" not in parsed.attributes, where
    assert not any("alert" in script for script in parsed.scripts), where
    assert "<script>alert" not in page, where


async def test_memory_text_and_names_are_escaped_on_every_page(
    bot: BotHarness, model: ScriptedModel
) -> None:
    agents = {
        "general": {"rooms": [], "role": EVIL, "display_name": EVIL},
        "mind": {"private": {"per": "user"}},
    }
    await bot.start(config_text(model.base_url, agents))
    assert bot.bot is not None
    shared = bot.bot.memories.for_agent("general")
    assert isinstance(shared, FileMemory)
    kept = shared.add_sync(EVIL, actor="test")
    edited = shared.add_sync("tea and biscuits", actor="test")
    shared.update_sync(edited.id, f"{EVIL} again", actor="test")  # the history shows both
    gone = shared.add_sync(f"{EVIL} gone", actor="test")
    shared.delete_sync(gone.id, actor="test")
    room = Told(False, frozenset({PERSON, "@bob:localhost"}), "private", "!r:localhost", EVIL)
    key = AudienceBook(shared.scope.state_dir).record(room)  # a room's name, where learned
    learned = shared.add_sync("learned in a room", actor="test", fields=EntryFields(audience=key))
    private = bot.bot.memories.for_agent("mind", requester=PERSON)
    assert isinstance(private, FileMemory)
    private.add_sync(f"{EVIL} private", actor="test")
    dash = await start_dashboard(bot)
    try:
        pages = await _admin_pages(dash, kept.id, edited.id, learned.id)
        for where, (page, text) in pages.items():
            assert_shown_escaped(page, where, text)
        person = await _person_pages(dash)  # its forms need its name intact in their fields
        for where, (page, text) in person.items():
            assert_shown_escaped(page, where, text)
        pages |= person
    finally:
        await dash.stop()

    assert len(pages) == 14  # the control: every page was opened


async def _admin_pages(
    dash: Dashboard, kept: str, edited: str, learned: str
) -> dict[str, tuple[str, str]]:
    scopes = list_scopes(dash.host.config, dash.data_dir.parent)
    shared = quote(next(s.id for s in scopes if s.agent == "general"), safe="")
    private = quote(next(s.id for s in scopes if s.kind == PRIVATE), safe="")
    found: dict[str, tuple[str, str]] = {}
    async with signed_in(dash) as admin:
        for where, url, text in (
            ("agents", "/agents", EVIL),  # the role
            ("agent form", "/agents/general", EVIL),  # display name and role, in input values
            ("scope", f"/memory/s/{shared}", EVIL),
            ("search", f"/memory/s/{shared}?q=biscuits", EVIL),
            ("entry", f"/memory/s/{shared}/e/{quote(kept, safe='')}", EVIL),  # a textarea
            ("edited entry's history", f"/memory/s/{shared}/e/{quote(edited, safe='')}", EVIL),
            ("deleted", f"/memory/s/{shared}/deleted", f"{EVIL} gone"),
            # where it was learned: the room's name and a reader's ID, shown and offered
            ("where learned", f"/memory/s/{shared}/e/{quote(learned, safe='')}", EVIL),
            ("private scope", f"/memory/s/{private}?private=shown", f"{EVIL} private"),
        ):
            answer = await admin.get(url)
            assert answer.status == 200, (where, await answer.text())
            found[where] = (await answer.text(), text)
    return found


async def _person_pages(dash: Dashboard) -> dict[str, tuple[str, str]]:
    link = person_link(dash.data_dir, dash.host.config.dashboard, PERSON)
    assert link is not None
    base = f"http://127.0.0.1:{dash.port}"
    found: dict[str, tuple[str, str]] = {}
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as person:
        landing = await (await person.get(link)).text()
        found["/me/login"] = (landing, PERSON)
        # its button posts the link's fields as the page holds them (a browser unescapes them)
        fields = re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', landing)
        signed = {name: html.unescape(value) for name, value in fields}
        home = await (await person.post(f"{base}/me/login", data=signed)).text()
        found["/me (entries)"] = (home, f"{EVIL} private")  # an input's value
        found["/me (name)"] = (home, PERSON)
        csrf = re.search(r'name="csrf" value="([^"]+)"', home)
        assert csrf is not None
        asked = await person.post(f"{base}/me/forget", data={"csrf": csrf.group(1)})
        found["/me/forget"] = (await asked.text(), PERSON)
        erased = await person.post(
            f"{base}/me/forget/confirm", data={"csrf": csrf.group(1), "confirm": "yes"}
        )
        found["/me/forget/confirm"] = (await erased.text(), PERSON)
    return found
