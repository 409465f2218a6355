"""The dashboard under test: a running bot (real Synapse) with its dashboard on a free port,
a signed-in HTTP session, and the hidden fields of a page's form."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import AsyncIterator

import aiohttp
import pytest_asyncio
import yaml

from mindroom.dashboard.server import Dashboard
from tests.support.harness import BotHarness, config_text
from tests.support.network import free_port
from tests.support.scripted_model import ScriptedModel

SECRET = "sk-test-0123456789abcdefghijklmnop"


def commented_config(model: ScriptedModel) -> str:
    """A config in block YAML with comments that a save must keep, and a model API key."""
    agents = {"general": {"rooms": [], "role": "Helps."}, "mind": {"private": {"per": "user"}}}
    doc = json.loads(config_text(model.base_url, agents))
    doc["models"]["default"]["api_key"] = SECRET
    return "# my mindroom: hand-written, keep these comments\n" + yaml.safe_dump(
        doc, sort_keys=False
    )


async def start_dashboard(bot: BotHarness) -> Dashboard:
    """A dashboard on a free port over the harness's running bot."""
    assert bot.bot is not None
    data_dir = bot.storage / "mindroom_data"
    dash = Dashboard(bot.bot, bot.storage / "config.yaml", data_dir, free_port())
    assert await dash.start()
    return dash


@pytest_asyncio.fixture
async def dashboard(bot: BotHarness, model: ScriptedModel) -> AsyncIterator[Dashboard]:
    await bot.start(commented_config(model))
    dash = await start_dashboard(bot)
    yield dash
    await dash.stop()


@pytest_asyncio.fixture
async def browser(dashboard: Dashboard) -> AsyncIterator[aiohttp.ClientSession]:
    """A signed-in session, as a browser would be."""
    async with signed_in(dashboard) as session:
        yield session


def form_of(page: str) -> dict[str, str]:
    """The hidden fields of the first form on a page (CSRF and the file's digest)."""
    return dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', page))


@contextlib.asynccontextmanager
async def signed_in(dashboard: Dashboard) -> AsyncIterator[aiohttp.ClientSession]:
    """A session signed in to ``dashboard`` (the token once, then its cookie)."""
    jar = aiohttp.CookieJar(unsafe=True)  # aiohttp's own default refuses cookies of IPs
    base = f"http://127.0.0.1:{dashboard.port}"
    async with aiohttp.ClientSession(base, cookie_jar=jar) as session:
        answer = await session.get(f"/?token={dashboard.token}", allow_redirects=False)
        assert answer.status == 303
        assert answer.headers["Location"] == "/"  # the token leaves the address bar
        yield session


async def open_link(session: aiohttp.ClientSession, link: str) -> aiohttp.ClientResponse:
    """Open a person's link as they would: its page, then its button (the /me page after)."""
    landing = await session.get(link)
    assert landing.status == 200, await landing.text()
    fields = dict(
        re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)">', await landing.text())
    )
    base = link.split("/me/login", 1)[0]
    return await session.post(f"{base}/me/login", data=fields)
