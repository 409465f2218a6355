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
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from PIL import Image

from mindroom.dashboard.person import person_link
from mindroom.dashboard.server import Dashboard
from mindroom.memory.files.store import FileMemory
from tests.support.harness import BotHarness, write_entries
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
    await p.fill("#f-rooms", "harbour")  # type: ignore[attr-defined]
    await p.click("text=Add agent")  # type: ignore[attr-defined]
    await p.wait_for_selector("h1 >> text=Agent deckhand")  # type: ignore[attr-defined]
    await shot(p, "agent")
    await wait_until(
        lambda: (
            bot.bot is not None
            and "deckhand" in bot.bot.agents
            and bot.bot.room_ids.get("harbour") in bot.bot.agents["deckhand"].joined_rooms()
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
