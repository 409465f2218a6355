"""The dashboard in a real browser: headless Debian Chromium driven by Playwright
against a running bot on a real Synapse. A memory setting changed in the page lands in
config.yaml (comments kept) and the bot reloads it; an agent added in the page joins its room;
the status page fills itself; a wrong token gets 401. Each page's screenshot is saved under
``test-artifacts/dashboard/`` and checked to be more than a blank page.

Nothing downloads a browser: Chromium is Debian's (``.ci/run`` installs it). Without it the
tests are skipped on a developer's machine and fail in CI.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from PIL import Image

from mindroom.adapters.embeddings.local import BUNDLED_ID, bundled_model_path
from mindroom.adapters.embeddings.probe import check_embedder
from mindroom.dashboard.person import person_link
from mindroom.dashboard.server import Dashboard
from mindroom.memory.files.store import FileMemory
from mindroom.memory.private import requester_key
from tests.support.harness import BotHarness, Human, joined, unique, write_entries
from tests.support.scripted_model import ScriptedModel, last_user_text
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "dashboard"
# Without the background-networking flags Chromium keeps calling Google's hosts, which this
# sandbox refuses; a fresh profile per run.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("Debian's chromium is not installed; .ci/run installs it")
        pytest.skip("needs Debian's chromium (apt-get install chromium)")
    return found


@pytest_asyncio.fixture
async def page(dashboard: Dashboard) -> AsyncIterator[object]:
    from playwright.async_api import async_playwright

    executable = chromium()
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(viewport={"width": 1200, "height": 900})
            yield await context.new_page()
        finally:
            await browser.close()


async def shot(page: object, name: str) -> Path:
    """Save a screenshot of the page and check it shows something (not one flat colour)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)  # type: ignore[attr-defined]
    with Image.open(path) as image:
        grey = image.convert("L")
        low, high = grey.getextrema()
        colours = grey.getcolors(maxcolors=1 << 16) or []
    assert high - low > 100, f"{name}: a blank screenshot"
    assert len(colours) > 20, f"{name}: hardly anything drawn"
    return path


async def test_a_memory_setting_and_a_new_agent_saved_in_the_browser_reach_the_bot(
    bot: BotHarness, dashboard: Dashboard, page: object
) -> None:
    p: object = page
    await p.goto(dashboard.url)  # type: ignore[attr-defined]
    assert p.url == f"http://127.0.0.1:{dashboard.port}/"  # type: ignore[attr-defined]
    # the status tables are filled by the page's script from /api/status, without a reload
    await p.wait_for_selector("#accounts tr >> text=general")  # type: ignore[attr-defined]
    await shot(p, "status")

    await p.goto(f"http://127.0.0.1:{dashboard.port}/memory/settings")  # type: ignore[attr-defined]
    await shot(p, "memory-settings")
    await p.fill("#f-file\\.max_daily_lines", "11")  # type: ignore[attr-defined]
    await p.click("button[type=submit]")  # type: ignore[attr-defined]
    await p.wait_for_selector("text=Saved to config.yaml")  # type: ignore[attr-defined]
    assert bot.bot is not None
    await wait_until(
        lambda: bot.bot is not None and bot.bot.config.memory.file.max_daily_lines == 11
    )
    text = dashboard.config_path.read_text()
    assert text.startswith("# my mindroom: hand-written, keep these comments\n")
    assert "max_daily_lines: 11" in text

    await p.goto(f"http://127.0.0.1:{dashboard.port}/agents")  # type: ignore[attr-defined]
    await shot(p, "agents")
    await p.fill("#f-name", "deckhand")  # type: ignore[attr-defined]
    await p.fill("#f-role", "Keeps the deck.")  # type: ignore[attr-defined]
    # a room of its own: the session's homeserver keeps earlier tests' rooms, and a room all
    # of whose accounts left (test_router_rest's router leaves them) cannot be joined again
    harbour = unique("harbour")
    await p.fill("#f-rooms", harbour)  # type: ignore[attr-defined]
    await p.click("text=Add agent")  # type: ignore[attr-defined]
    await p.wait_for_selector("h1 >> text=Agent deckhand")  # type: ignore[attr-defined]
    await shot(p, "agent")
    await wait_until(
        lambda: (
            bot.bot is not None
            and "deckhand" in bot.bot.agents
            and bot.bot.room_ids.get(harbour) in bot.bot.agents["deckhand"].joined_rooms()
        ),
        timeout=60,
    )


async def test_a_wrong_token_gets_401_in_the_browser(dashboard: Dashboard, page: object) -> None:
    p: object = page
    wrong = await p.goto(f"http://127.0.0.1:{dashboard.port}/?token=wrong")  # type: ignore[attr-defined]
    assert wrong is not None
    assert wrong.status == 401
    assert "needs its token" in await p.content()  # type: ignore[attr-defined]
    right = await p.goto(dashboard.url)  # type: ignore[attr-defined]
    assert right is not None
    assert right.status == 200  # the control: the right token opens it


async def test_a_memory_entry_edited_in_the_browser_changes_its_file(
    bot: BotHarness, dashboard: Dashboard, page: object
) -> None:
    p: object = page
    memory_file = write_entries(
        bot.storage / "agents" / "general" / "workspace",
        "MEMORY.md",
        ["The ferry leaves at nine", "Bob prefers tea"],
    )
    await p.goto(dashboard.url)  # type: ignore[attr-defined]
    await p.click("header >> text=Memory")  # type: ignore[attr-defined]
    await shot(p, "memory")
    await p.click("text=general")  # type: ignore[attr-defined]
    await p.fill("#q", "ferry")  # type: ignore[attr-defined]
    await p.click("text=Search")  # type: ignore[attr-defined]
    await p.wait_for_selector("h2 >> text=1 found")  # type: ignore[attr-defined]
    await shot(p, "memory-scope")
    await p.click("td a")  # type: ignore[attr-defined]
    await p.fill("#text", "The ferry leaves at half past nine")  # type: ignore[attr-defined]
    await p.click("text=Save")  # type: ignore[attr-defined]
    await p.wait_for_selector("td >> text=dashboard")  # type: ignore[attr-defined]
    await shot(p, "memory-entry")

    text = memory_file.read_text()
    assert "The ferry leaves at half past nine" in text
    assert "Bob prefers tea" in text


async def test_a_persons_link_opens_their_memory_in_the_browser(
    bot: BotHarness, dashboard: Dashboard, page: object
) -> None:
    p: object = page
    assert bot.bot is not None
    memory = bot.bot.memories.for_agent("mind", requester="@alice:localhost")
    assert isinstance(memory, FileMemory)
    memory.add_sync("Alice grows tomatoes on the balcony", actor="test")
    link = person_link(dashboard.data_dir, dashboard.host.config.dashboard, "@alice:localhost")
    assert link is not None

    await p.goto(link)  # type: ignore[attr-defined]
    await p.click("text=Open my memory")  # type: ignore[attr-defined]
    await p.wait_for_selector("text=Signed in as")  # type: ignore[attr-defined]
    await shot(p, "me")
    field = p.locator("input[name=text]")  # type: ignore[attr-defined]
    assert await field.input_value() == "Alice grows tomatoes on the balcony"


async def cells(page: object, selector: str) -> list[list[str]]:
    """The text of each row's cells of the table rows ``selector`` finds."""
    return await page.eval_on_selector_all(  # type: ignore[attr-defined,no-any-return]
        selector, "rows => rows.map(r => Array.from(r.cells).map(c => c.textContent.trim()))"
    )


async def test_the_pages_name_dms_who_answered_and_whose_memory_and_say_none_yet(
    bot: BotHarness, human: Human, model: ScriptedModel, dashboard: Dashboard, page: object
) -> None:
    p: object = page
    assert bot.bot is not None
    model.set_handler(lambda request: f"echo: {last_user_text(request)}")
    dms = {}
    for agent in ("general", "mind"):  # a shared agent and a private companion, each in a DM
        user = bot.bot.agents[agent].user_id
        created = await human.client.room_create(invite=[user], is_direct=True)
        await human.wait_for(joined(user, created.room_id))
        dms[agent] = created.room_id
    for text in ("hello", "and again"):  # the earlier answer of a DM is the one that went blank
        told = await human.send(dms["general"], text)
        await human.wait_for_reply(dms["general"], told)
    told = await human.send(dms["mind"], "I grow tomatoes")
    await human.wait_for_reply(dms["mind"], told)
    memory = bot.bot.memories.for_agent("mind", requester=human.user_id)
    assert isinstance(memory, FileMemory)
    memory.add_sync("Grows tomatoes", actor="test")  # what the companion would have noted
    await wait_until(
        lambda: (
            len(rows := ledger_answers(dashboard)) == 3
            and all(status == "done" for _, status in rows)
        ),
        timeout=30,
    )

    await p.goto(dashboard.url)  # type: ignore[attr-defined]
    await p.wait_for_selector("#answers tr >> text=DM with")  # type: ignore[attr-defined]
    await shot(p, "status-dms")
    answers = await cells(p, "#answers tr")
    assert len(answers) == 3, answers
    dm_name = f"DM with {human.user_id.split(':')[0][1:]} ({human.user_id})"
    for _, room, sender, _, status, _ in answers:
        assert (room, sender, status) == (dm_name, human.user_id, "done")  # no room ID shown
    # every answer says who gave it, the earlier one of a DM too
    assert sorted(row[3] for row in answers) == ["general", "general", "mind"]
    listed = await cells(p, "#rooms tr")
    # (the session's agent accounts are in other people's DMs too, from earlier tests)
    assert {row[1] for row in listed if row[0] == dm_name} == set(dms.values())
    accounts = await cells(p, "#accounts tr")
    assert "none yet" not in {row[0] for row in accounts}  # the control: a table with rows

    # a private memory is titled with its person's Matrix ID, not the folder's hash
    await p.goto(f"http://127.0.0.1:{dashboard.port}/memory")  # type: ignore[attr-defined]
    await shot(p, "memory-index")
    [private] = await cells(p, "table:nth-of-type(2) tbody tr")
    assert private == ["mind", human.user_id]
    runs = await cells(p, "table:nth-of-type(3) tbody tr")
    assert runs == [["none yet"]]  # no maintenance run yet
    shared = await cells(p, "table:nth-of-type(1) tbody tr")
    assert ["general", "agent", "agent_general"] in shared  # the control: rows, no "none yet"
    await p.click('td a:text-is("mind")')  # type: ignore[attr-defined]
    heading = await p.text_content("h1")  # type: ignore[attr-defined]
    assert heading == f"Memory: mind with {human.user_id}"
    shown = await p.inner_text("body")  # type: ignore[attr-defined]
    assert requester_key(human.user_id) not in shown  # (its URL carries the folder key)
    assert human.user_id in shown  # the banner names the person too
    assert "Grows tomatoes" not in await p.content()  # type: ignore[attr-defined]
    await shot(p, "memory-private-gated")
    await p.click("text=I have a reason")  # type: ignore[attr-defined]
    assert await p.text_content("h1") == heading  # type: ignore[attr-defined]
    await shot(p, "memory-private")
    assert "Grows tomatoes" in await p.content()  # type: ignore[attr-defined]
    conflicts = await cells(p, "table:nth-of-type(3) tbody tr")
    assert conflicts == [["none yet"]]

    # the memory settings say which embedder is in effect as mindroom doctor does
    await p.goto(f"http://127.0.0.1:{dashboard.port}/memory/settings")  # type: ignore[attr-defined]
    await shot(p, "memory-settings-embedder")
    config = bot.bot.config
    doctor = check_embedder(config.memory_embedder, ["memory.embedder"], bot.storage)
    note = await p.text_content("#note")  # type: ignore[attr-defined]
    assert note == f"Memory search in effect: {doctor.detail}."
    assert note == "Memory search in effect: keyword-only (memory.embedder: none)."
    unset = check_embedder(None, ["memory.embedder"], bot.storage)  # what the default is here
    default = await p.text_content(  # type: ignore[attr-defined]
        "#f-embedder\\.provider option[value='']"
    )
    if bundled_model_path() is None:
        assert default == "(default: keyword-only)"
        assert unset.detail.startswith("keyword-only")
    else:
        assert default == f"(default: the bundled local model {BUNDLED_ID})"
        assert unset.detail.startswith(f"keywords and vectors: {BUNDLED_ID}")


def ledger_answers(dashboard: Dashboard) -> list[tuple[str, str]]:
    """(answered_by, status) of every handled row, as the ledger has them now."""
    rows = sqlite3.connect(dashboard.data_dir / "ledger.db").execute(
        "SELECT answered_by, status FROM handled"
    )
    return [(str(answered_by), str(status)) for answered_by, status in rows]
