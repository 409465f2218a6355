"""The dashboard's memory browser over HTTP, against a running bot on a real
Synapse: scopes, the product's search, an edit that keeps a person's editor save to the same
file, delete and restore with their history, a private scope behind its notice, and the flush
state of the sessions that write into a scope."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from urllib.parse import quote

import aiohttp
import pytest

from mindroom.dashboard.server import Dashboard
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.audience import AudienceBook, Told
from mindroom.memory.private import requester_key
from mindroom.memory.scope import agent_scope
from tests.support.dashboard import form_of, signed_in, start_dashboard
from tests.support.harness import BotHarness, Human, config_text, write_entries
from tests.support.scripted_model import ScriptedModel

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

SCOPE = "/memory/s/agent_general"


def workspace(bot: BotHarness) -> Path:
    return bot.storage / "agents" / "general" / "workspace"


def entry_links(page: str) -> dict[str, str]:
    """Entry text -> its page's path, from a scope page's table."""
    return {
        text: href
        for href, text in re.findall(
            r'<td><a href="([^"]+/e/[^"]+)">[^<]+</a></td><td>([^<]*)<', page
        )
    }


async def test_search_finds_an_entry_and_an_edit_keeps_an_editors_save_to_the_same_file(
    bot: BotHarness, dashboard: Dashboard, browser: aiohttp.ClientSession
) -> None:
    memory_file = write_entries(
        workspace(bot), "MEMORY.md", ["Alice keeps bees on the roof", "The boat is called Petrel"]
    )
    index = await (await browser.get("/memory")).text()
    assert 'href="/memory/s/agent_general"' in index

    found = await (await browser.get(f"{SCOPE}?q=bees")).text()
    links = entry_links(found)
    assert list(links) == ["Alice keeps bees on the roof"]  # the boat does not match "bees"
    entry_page = await (await browser.get(links["Alice keeps bees on the roof"])).text()

    # a person saves the same file in an editor after the page loaded, before the edit is sent
    memory_file.write_text(memory_file.read_text() + "- Added in the editor meanwhile\n")
    saved = await browser.post(
        links["Alice keeps bees on the roof"],
        data={**form_of(entry_page), "text": "Alice keeps two hives of bees on the roof"},
    )
    text = memory_file.read_text()

    assert saved.status == 200
    assert "Alice keeps two hives of bees on the roof" in text
    assert "Added in the editor meanwhile" in text  # the editor's save is kept
    assert "The boat is called Petrel" in text
    assert "keeps bees on the roof" not in text
    page = await saved.text()
    assert "dashboard" in page  # the history names who changed it
    assert "Alice keeps bees on the roof" in page  # and what it was


async def test_delete_and_restore_through_the_page(
    bot: BotHarness, dashboard: Dashboard, browser: aiohttp.ClientSession
) -> None:
    memory_file = write_entries(workspace(bot), "MEMORY.md", ["The wifi password is in the drawer"])
    links = entry_links(await (await browser.get(SCOPE)).text())
    [href] = links.values()
    page = await (await browser.get(href)).text()
    delete_form = page[page.index('/delete"') - 200 :]

    deleted = await browser.post(f"{href}/delete", data=form_of(delete_form))
    assert deleted.status == 200
    assert "wifi password" not in memory_file.read_text()
    listed = await (await browser.get(f"{SCOPE}/deleted")).text()
    assert "The wifi password is in the drawer" in listed
    gone_page = await deleted.text()
    assert "Restore it" in gone_page

    restored = await browser.post(f"{href}/restore", data=form_of(gone_page))
    assert restored.status == 200
    assert "The wifi password is in the drawer" in memory_file.read_text()
    assert (
        "The wifi password is in the drawer"
        not in await (await browser.get(f"{SCOPE}/deleted")).text()
    )


async def test_an_emptied_entry_is_refused_with_a_reason_and_the_file_is_untouched(
    bot: BotHarness, dashboard: Dashboard, browser: aiohttp.ClientSession
) -> None:
    memory_file = write_entries(workspace(bot), "MEMORY.md", ["Keep me"])
    [href] = entry_links(await (await browser.get(SCOPE)).text()).values()
    page = await (await browser.get(href)).text()

    refused = await browser.post(href, data={**form_of(page), "text": "   "})

    assert refused.status == 422
    assert "needs some text" in await refused.text()
    assert memory_file.read_text() == "- Keep me\n"


async def test_each_entry_says_where_it_was_learned_and_its_audience_is_set_on_its_page(
    bot: BotHarness, dashboard: Dashboard, browser: aiohttp.ClientSession
) -> None:
    memory_file = write_entries(workspace(bot), "MEMORY.md", ["Alice and Bob plan a trip"])
    book = AudienceBook(agent_scope(bot.storage, "general").state_dir)
    readers = frozenset({"@alice:localhost", "@bob:localhost"})
    key = book.record(Told(False, readers, "private", "!plans:localhost", "Trip plans"))
    listed = await (await browser.get(SCOPE)).text()
    assert "added by hand or from the command line" in listed  # no audience: the default
    [href] = entry_links(listed).values()
    page = await (await browser.get(href)).text()
    assert "added by hand or from the command line" in page
    assert f'<option value="{key}">' in page  # the recorded room is offered
    audience_form = page[page.index('/audience"') - 200 :]

    # an unknown room: refused with the rooms it could name, the file untouched
    refused = await browser.post(
        f"{href}/audience", data={**form_of(audience_form), "audience": "room:00000000"}
    )
    assert refused.status == 422
    said = await refused.text()
    assert "no room &#39;room:00000000&#39; is recorded" in said
    assert key in said
    assert memory_file.read_text() == "- Alice and Bob plan a trip\n"

    chosen = await browser.post(
        f"{href}/audience", data={**form_of(audience_form), "audience": key}
    )
    assert chosen.status == 200
    assert f"audience={key}" in memory_file.read_text()
    shown = "learned in a closed room (Trip plans; readers then: @alice:localhost, @bob:localhost)"
    assert shown in await chosen.text()
    assert shown in await (await browser.get(SCOPE)).text()

    page = await chosen.text()
    again = await browser.post(
        f"{str(chosen.url.path)}/audience", data={**form_of(page), "audience": "default"}
    )
    assert again.status == 200
    assert "audience=" not in memory_file.read_text()
    assert "Alice and Bob plan a trip" in memory_file.read_text()


async def test_a_private_scope_is_listed_apart_and_shown_only_when_the_admin_says_so(
    bot: BotHarness, model: ScriptedModel
) -> None:
    await bot.start(
        config_text(
            model.base_url, {"general": {"rooms": []}, "mind": {"private": {"per": "user"}}}
        )
    )
    assert bot.bot is not None
    memory = bot.bot.memories.for_agent("mind", requester="@alice:localhost")
    assert isinstance(memory, FileMemory)
    memory.add_sync("Alice is afraid of spiders", actor="test")
    dash = await start_dashboard(bot)
    try:
        async with signed_in(dash) as browser:
            index = await (await browser.get("/memory")).text()
            private_part = index[index.index("Private memories") :]
            [href] = re.findall(r'href="(/memory/s/[^"]+)"', private_part)
            gated = await (await browser.get(href)).text()
            shown = await (await browser.get(f"{href}?private=shown")).text()
    finally:
        await dash.stop()

    assert requester_key("@alice:localhost") in private_part
    assert "Alice is afraid of spiders" not in index
    assert "Private memory" in gated
    assert "Alice is afraid of spiders" not in gated  # not before the admin says why
    assert "Alice is afraid of spiders" in shown  # the control: then it is there
    assert quote(memory.scope.scope_id, safe="") in href


def sessions(page: str) -> str:
    """The flush-state table of a scope page."""
    return page[page.index("Sessions flushed into it") : page.index("Open conflicts")]


async def test_the_flush_state_of_a_conversation_shows_on_its_scope(
    bot: BotHarness, model: ScriptedModel, human: Human
) -> None:
    model.set_handler(lambda request: "noted")
    later = {"enabled": True, "idle_seconds": 3600, "max_dirty_age_seconds": 3600}
    memory = {"auto_flush": later, "embedder": "none", "maintenance": {"enabled": False}}
    config = config_text(model.base_url, {"general": {"rooms": ["lobby"]}}, memory=memory)
    room_id = await bot.start_in_room(config, "lobby", human)
    assert bot.bot is not None
    dash = await start_dashboard(bot)
    try:
        async with signed_in(dash) as browser:
            before = await (await browser.get(SCOPE)).text()
            asked = await human.send(room_id, "@general remember that the harbour opens at six")
            await human.wait_for_reply(room_id, asked, timeout=40)
            # the mark is written just after the answer is posted: wait for it
            async with asyncio.timeout(30):
                page = SCOPE  # polled: the ledger is another connection's state, no event
                while "dirty" not in sessions(after := await (await browser.get(page)).text()):  # noqa: ASYNC110
                    await asyncio.sleep(0.1)
    finally:
        await dash.stop()

    assert "<code>" not in sessions(before)  # no session yet
    assert "dirty" in sessions(after)  # the conversation waits for its flush
    assert "general" in sessions(after)
