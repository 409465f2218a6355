"""The web dashboard over HTTP, against a running bot on a real Synapse: the token,
the cookie and CSRF rules, saves to config.yaml that keep its comments and hot-reload the bot,
a file changed on disk since the page loaded, validation errors beside their field, adding
and removing an agent, and no secret on any page. (The browser tests are in
``test_dashboard_browser.py``.)"""

from __future__ import annotations

import re
import signal
import socket
from pathlib import Path

import aiohttp
import pytest

from mindroom.cli.main import main
from mindroom.dashboard.access import COOKIE, TOKEN_FILE
from mindroom.dashboard.person import PORT_FILE
from mindroom.dashboard.server import Dashboard
from tests.support.dashboard import SECRET, form_of, signed_in, start_dashboard
from tests.support.harness import BotHarness, BotProcess, Human, config_text, unique
from tests.support.network import free_port
from tests.support.scripted_model import Reply, ScriptedModel
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse]


@pytest.mark.asyncio
async def test_no_token_or_a_wrong_one_gets_401_and_the_right_one_a_cookie(
    dashboard: Dashboard,
) -> None:
    base = f"http://127.0.0.1:{dashboard.port}"
    async with aiohttp.ClientSession() as anonymous:
        for path in ("/", "/agents", "/api/status", "/memory/settings", "/?token=wrong"):
            answer = await anonymous.get(base + path, allow_redirects=False)
            assert answer.status == 401, path
            assert "mindroom dashboard url" in await answer.text()
        rebound = await anonymous.get(base + "/", headers={"Host": "evil.example:80"})
        assert rebound.status == 421  # DNS rebinding: only the loopback host is served
        scripted = await anonymous.get(
            base + "/api/status", headers={"Authorization": f"Bearer {dashboard.token}"}
        )
        assert scripted.status == 200  # the control: the same request with the token works

        signed_in = await anonymous.get(f"{base}/?token={dashboard.token}", allow_redirects=False)
    cookie = signed_in.cookies[COOKIE]
    assert cookie.value != dashboard.token  # derived from it, never the token itself
    assert cookie["httponly"]
    assert cookie["samesite"] == "Strict"
    assert signed_in.headers["X-Frame-Options"] == "DENY"
    token_file = dashboard.data_dir / TOKEN_FILE
    assert token_file.read_text().strip() == dashboard.token
    assert token_file.stat().st_mode & 0o077 == 0


@pytest.mark.asyncio
async def test_status_shows_accounts_rooms_and_answers(
    dashboard: Dashboard, browser: aiohttp.ClientSession
) -> None:
    status = await (await browser.get("/api/status")).json()
    page = await (await browser.get("/")).text()

    names = {a["name"] for a in status["accounts"]}
    assert {"router", "general"} <= names
    assert all(a["synced_ago_s"] is not None for a in status["accounts"])
    assert 'src="/static/live.js"' in page
    script = await browser.get("/static/live.js")
    assert script.status == 200
    assert "/api/status" in await script.text()


@pytest.mark.asyncio
async def test_a_form_without_its_csrf_field_or_from_another_site_is_refused(
    dashboard: Dashboard, browser: aiohttp.ClientSession
) -> None:
    config = dashboard.config_path
    before = config.read_bytes()
    fields = form_of(await (await browser.get("/agents/general")).text())

    missing = await browser.post("/agents/general", data={"base": fields["base"], "role": "x"})
    foreign = await browser.post(
        "/agents/general",
        data={**fields, "role": "x"},
        headers={"Origin": "http://evil.example"},
    )
    assert missing.status == 403
    assert foreign.status == 403
    assert config.read_bytes() == before
    saved = await browser.post("/agents/general", data={**fields, "role": "Now a pirate."})
    assert saved.status == 200  # the control: the same form, rightly sent, saves
    assert "Now a pirate." in config.read_text()


@pytest.mark.asyncio
async def test_an_edit_keeps_the_files_comments_and_the_bot_reloads_it(
    bot: BotHarness, dashboard: Dashboard, browser: aiohttp.ClientSession
) -> None:
    config = dashboard.config_path
    before = config.read_text()
    fields = form_of(await (await browser.get("/agents/general")).text())

    answer = await browser.post(
        "/agents/general", data={**fields, "role": "Knows boats.", "thread_mode": "room"}
    )
    page = await answer.text()
    assert bot.bot is not None
    await wait_until(
        lambda: bot.bot is not None and bot.bot.config.agents["general"].role == "Knows boats."
    )

    after = config.read_text()
    assert "Saved to config.yaml" in page
    assert after.startswith("# my mindroom: hand-written, keep these comments\n")
    assert bot.bot.config.agents["general"].thread_mode == "room"
    changed = [line for line in after.splitlines() if line not in before.splitlines()]
    assert len(changed) == 2  # the role line rewritten, thread_mode added: nothing else


@pytest.mark.asyncio
async def test_a_file_changed_since_the_page_loaded_is_reported_never_overwritten(
    dashboard: Dashboard, browser: aiohttp.ClientSession
) -> None:
    config = dashboard.config_path
    fields = form_of(await (await browser.get("/memory/settings")).text())
    edited = config.read_text() + "# saved in an editor meanwhile\n"
    config.write_text(edited)

    answer = await browser.post("/memory/settings", data={**fields, "file.max_daily_lines": "7"})

    assert answer.status == 409
    assert "changed on disk since this page was loaded" in await answer.text()
    assert config.read_text() == edited  # the editor's save is whole, nothing was written
    fresh = form_of(await (await browser.get("/memory/settings")).text())
    again = await browser.post("/memory/settings", data={**fresh, "file.max_daily_lines": "7"})
    assert again.status == 200  # the control: reloaded, the same change saves
    assert "# saved in an editor meanwhile" in config.read_text()
    assert "max_daily_lines: 7" in config.read_text()


@pytest.mark.asyncio
async def test_an_invalid_value_is_shown_beside_its_field_and_nothing_is_written(
    dashboard: Dashboard, browser: aiohttp.ClientSession
) -> None:
    config = dashboard.config_path
    before = config.read_bytes()
    fields = form_of(await (await browser.get("/memory/settings")).text())

    negative = await browser.post(
        "/memory/settings", data={**fields, "auto_flush.idle_seconds": "-5"}
    )
    not_a_number = await browser.post(
        "/memory/settings", data={**fields, "file.max_entrypoint_lines": "lots"}
    )
    bad_model = await browser.post(
        "/agents/general",
        data={
            **form_of(await (await browser.get("/agents/general")).text()),
            "model": "nonexistent",
        },
    )

    for answer, key in (
        (negative, "auto_flush.idle_seconds"),
        (not_a_number, "file.max_entrypoint_lines"),
        (bad_model, "model"),
    ):
        page = await answer.text()
        assert answer.status == 422
        field = re.search(
            rf'<div class="field invalid"><label for="f-{re.escape(key)}">.*?</div>', page, re.S
        )
        assert field is not None, key
        assert 'class="error"' in field.group(0)
    assert config.read_bytes() == before


@pytest.mark.asyncio
async def test_adding_and_removing_an_agent_goes_to_the_file_and_the_bot(
    bot: BotHarness, dashboard: Dashboard, browser: aiohttp.ClientSession
) -> None:
    fields = form_of(await (await browser.get("/agents")).text())
    # a room of its own: the session's homeserver keeps earlier tests' rooms, some left empty
    harbour = unique("harbour")
    added = await browser.post(
        "/agents", data={**fields, "name": "sailor", "role": "Sails.", "rooms": harbour}
    )
    assert added.status == 200
    assert "Agent sailor" in await added.text()
    assert bot.bot is not None
    await wait_until(lambda: bot.bot is not None and "sailor" in bot.bot.agents, timeout=60)
    await wait_until(
        lambda: (
            bot.bot is not None
            and harbour in bot.bot.room_ids
            and bot.bot.room_ids[harbour] in bot.bot.agents["sailor"].joined_rooms()
        ),
        timeout=60,
    )

    bad_name = await browser.post(
        "/agents", data={**form_of(await (await browser.get("/agents")).text()), "name": "Bad!"}
    )
    assert bad_name.status == 422
    assert "not a safe identifier" in await bad_name.text()

    page = await (await browser.get("/agents/sailor")).text()
    delete_form = page[page.index('action="/agents/sailor/delete"') :]
    removed = await browser.post("/agents/sailor/delete", data=form_of(delete_form))
    assert removed.status == 200
    await wait_until(lambda: bot.bot is not None and "sailor" not in bot.bot.agents, timeout=60)
    assert "sailor" not in dashboard.config_path.read_text()


@pytest.mark.asyncio
async def test_no_page_shows_a_secret(
    dashboard: Dashboard, browser: aiohttp.ClientSession, model: ScriptedModel
) -> None:
    config = dashboard.config_path
    embedder = (
        "  embedder:\n    provider: openai\n    config:\n"
        f"      model: scripted-embedding\n      base_url: {model.base_url}\n"
        f"      api_key: {SECRET}\n"
    )
    config.write_text(config.read_text().replace("  embedder: none\n", embedder))
    assert SECRET in config.read_text()  # the control: the secret is in the file, twice

    for path in ("/", "/agents", "/agents/general", "/memory/settings", "/api/status"):
        assert SECRET not in await (await browser.get(path)).text(), path
    page = await (await browser.get("/memory/settings")).text()
    shown = re.search(r'name="embedder.config.api_key" id="[^"]+" value="([^"]*)"', page)
    assert shown is not None
    assert shown.group(1) == "[redacted]"
    # the page saved again, the redacted value untouched: the secret stays as it was
    again = await browser.post(
        "/memory/settings",
        data={
            **form_of(page),
            "embedder.config.api_key": shown.group(1),
            "file.max_daily_lines": "9",
        },
    )
    assert again.status == 200
    assert f"api_key: {SECRET}" in config.read_text()
    assert "max_daily_lines: 9" in config.read_text()


def test_dashboard_url_prints_the_address_with_the_saved_token(
    tmp_path: Path, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(config_text(model.base_url, {"general": {"rooms": []}}))

    assert main(["dashboard", "url", "--config", str(config)]) == 0
    first = capsys.readouterr().out.strip()
    assert main(["dashboard", "url", "--config", str(config), "--port", "9999"]) == 0
    second = capsys.readouterr().out.strip()

    token = (tmp_path / "mindroom_data" / TOKEN_FILE).read_text().strip()
    assert first == f"http://127.0.0.1:8765/?token={token}"
    assert second == f"http://127.0.0.1:9999/?token={token}"  # one token, made once


@pytest.mark.asyncio
async def test_mindroom_run_serves_the_dashboard_and_prints_its_url(
    bot_process: BotProcess, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    bot_process.storage.mkdir(parents=True, exist_ok=True)
    config = bot_process.storage / "config.yaml"
    config.write_text(config_text(model.base_url, {"general": {"rooms": []}}))
    port = free_port()
    bot_process.run_options = ("--dashboard-port", str(port))
    bot_process.start()
    await bot_process.wait_running()
    # no --port: the running dashboard's, which --dashboard-port moved off the config's
    assert main(["dashboard", "url", "--config", str(config)]) == 0
    url = capsys.readouterr().out.strip()
    assert f":{port}/" in url
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as session:
        opened = await session.get(url)
        page = await opened.text()
    await bot_process.stop()

    log = (bot_process.storage / "bot.log").read_text()
    assert f"Dashboard: {url}" in log
    banner = next(line for line in log.splitlines() if "mindroom is running" in line)
    assert f"Dashboard: {url}." in banner  # the free port is the one asked for
    assert "is taken" not in log
    assert opened.status == 200
    assert "Accounts" in page
    with socket.socket() as sock:  # stopped with the bot
        assert sock.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.asyncio
async def test_a_taken_dashboard_port_moves_it_to_the_next_free_one_and_dashboard_url_finds_it(
    bot_process: BotProcess, model: ScriptedModel, capsys: pytest.CaptureFixture[str]
) -> None:
    bot_process.storage.mkdir(parents=True, exist_ok=True)
    config = bot_process.storage / "config.yaml"
    config.write_text(config_text(model.base_url, {"general": {"rooms": []}}))
    with socket.socket() as taken:  # another program listens on the port asked for
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        bot_process.run_options = ("--dashboard-port", str(port))
        bot_process.start()
        await bot_process.wait_running()
        log = (bot_process.storage / "bot.log").read_text()
        moved = re.search(rf"port {port} is taken; the dashboard is on (\d+)", log)
        assert moved is not None, log[-2000:]
        served = int(moved.group(1))
        assert port < served <= port + 20
        banner = next(line for line in log.splitlines() if "mindroom is running" in line)
        assert f"http://127.0.0.1:{served}/?token=" in banner

        assert main(["dashboard", "url", "--config", str(config)]) == 0
        url = capsys.readouterr().out.strip()
        assert url.startswith(f"http://127.0.0.1:{served}/?token=")
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as session:
            opened = await session.get(url)
            assert opened.status == 200
            assert "Accounts" in await opened.text()

        # killed: its record of the port stays behind, but names a dead process
        await bot_process.stop(signal.SIGKILL)
        assert (bot_process.storage / "mindroom_data" / PORT_FILE).exists()
        assert main(["dashboard", "url", "--config", str(config)]) == 0
        after = capsys.readouterr()
        assert f":{served}/" not in after.out  # no dead URL
        assert after.out.startswith("http://127.0.0.1:8765/?token=")  # the config's
        assert "no dashboard runs on this storage now" in after.err


@pytest.mark.asyncio
async def test_a_shorthand_value_is_shown_and_becomes_a_mapping_only_when_edited(
    bot: BotHarness, dashboard: Dashboard, browser: aiohttp.ClientSession, model: ScriptedModel
) -> None:
    config = dashboard.config_path
    page = await (await browser.get("/memory/settings")).text()
    assert re.search(r'<option value="none" selected>none</option>', page)  # embedder: none
    same = await browser.post(
        "/memory/settings", data={**form_of(page), "embedder.provider": "none"}
    )
    assert same.status == 200
    assert "  embedder: none\n" in config.read_text()  # unchanged: the shorthand stays

    fields = form_of(await (await browser.get("/memory/settings")).text())
    changed = await browser.post(
        "/memory/settings",
        data={
            **fields,
            "embedder.provider": "openai",
            "embedder.config.model": "scripted-embedding",
            "embedder.config.base_url": model.base_url,
        },
    )
    assert changed.status == 200, await changed.text()
    assert bot.bot is not None
    await wait_until(
        lambda: (
            bot.bot is not None
            and (embedder := bot.bot.config.memory_embedder) is not None
            and embedder.provider == "openai"
        )
    )
    assert "embedder: none" not in config.read_text()


@pytest.mark.asyncio
async def test_the_status_shows_the_last_answers_and_a_model_error(
    bot: BotHarness, model: ScriptedModel, human: Human
) -> None:
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": ["lobby"], "streaming": False}}),
        "lobby",
        human,
    )
    dash = await start_dashboard(bot)
    try:
        async with signed_in(dash) as browser:
            model.push(Reply(text="fine"))
            ok = await human.send(room_id, "@general how are you?")
            await human.wait_for_reply(room_id, ok, timeout=40)
            model.push(Reply(status=401, error_message="invalid api key"))
            failing = await human.send(room_id, "@general and now?")
            await human.wait_for_reply(room_id, failing, timeout=40)
            await bot.settle(human, room_id)
            status = await (await browser.get("/api/status")).json()
    finally:
        await dash.stop()

    answered = [a for a in status["answers"] if a["responders"] == ["general"]]
    assert len(answered) >= 2
    assert all(a["latency_ms"] is not None and a["latency_ms"] >= 0 for a in answered)
    assert {a["sender"] for a in answered} == {human.user_id}
    assert {a["room"] for a in answered} == {"lobby"}
    problems = [p["message"] for p in status["problems"]]
    assert any("failed for agent general" in m and "invalid api key" in m for m in problems)
