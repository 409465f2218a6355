"""``/healthz`` and ``/metrics``, and JSON logs: against a bot on a real Synapse,
and ``mindroom run`` as a process."""

from __future__ import annotations

import asyncio
import json
import logging
import re

import aiohttp
import pytest

from mindroom.cli.main import JsonLogFormatter
from mindroom.dashboard.metrics import Metrics
from mindroom.dashboard.ops import OpsServer
from tests.support.harness import BotHarness, BotProcess, Human, config_text
from tests.support.network import free_port
from tests.support.scripted_model import Reply, ScriptedModel


def samples(text: str) -> dict[str, float]:
    """``name{labels}`` -> value of every sample line (comments checked for form)."""
    found = {}
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.fullmatch(r"# (HELP|TYPE) mindroom_\w+ .+", line), line
            continue
        name, value = line.rsplit(" ", 1)
        found[name] = float(value)
    return found


def test_the_exposition_counts_replies_into_cumulative_buckets() -> None:
    metrics = Metrics()
    metrics.reply("done", 0.2)
    metrics.reply("done", 3.0)
    metrics.reply("failed", 200.0)
    metrics.model_error('we"ird')

    found = samples(metrics.render())

    assert found['mindroom_replies_total{outcome="done"}'] == 2
    assert found['mindroom_replies_total{outcome="failed"}'] == 1
    assert found['mindroom_reply_seconds_bucket{le="0.25"}'] == 1
    assert found['mindroom_reply_seconds_bucket{le="5.0"}'] == 2
    assert found['mindroom_reply_seconds_bucket{le="120.0"}'] == 2  # 200 s is above them all
    assert found['mindroom_reply_seconds_bucket{le="+Inf"}'] == 3
    assert found["mindroom_reply_seconds_count"] == 3
    assert found["mindroom_reply_seconds_sum"] == pytest.approx(203.2)
    assert found['mindroom_model_errors_total{model="we\\"ird"}'] == 1  # a quote is escaped
    # the client library's *_created series are not exposed (they never were)
    assert [name for name in found if "_created" in name] == []


def test_json_logs_are_one_object_per_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "mindroom.x",
            logging.ERROR,
            __file__,
            1,
            "failed: %s",
            ("a",),
            exc_info=__import__("sys").exc_info(),
        )
    line = json.loads(JsonLogFormatter().format(record))
    assert line["level"] == "ERROR"
    assert line["logger"] == "mindroom.x"
    assert line["message"] == "failed: a"
    assert "ValueError: boom" in line["exception"]
    assert line["time"].endswith("+00:00")


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_healthz_says_starting_then_ok_and_metrics_count_replies_and_model_errors(
    bot: BotHarness, model: ScriptedModel, human: Human
) -> None:
    later = {"enabled": True, "idle_seconds": 3600, "max_dirty_age_seconds": 3600}
    memory = {"auto_flush": later, "embedder": "none", "maintenance": {"enabled": False}}
    text = config_text(
        model.base_url, {"general": {"rooms": ["lobby"], "streaming": False}}, memory=memory
    )
    bot.write_config(text)
    from mindroom.app.bot import Bot, BotOptions
    from mindroom.config import parse_config

    # the same Bot the harness starts, served before its start, as `mindroom run` does
    bot.credentials.install(bot.storage)
    bot.bot = Bot(
        parse_config(text, "config.yaml"),
        BotOptions(
            bot.storage,
            bot.homeserver.url,
            bot.homeserver.shared_secret,
            config_path=bot.storage / "config.yaml",
        ),
    )
    ops = OpsServer(bot.bot, bot.storage / "mindroom_data", "127.0.0.1", free_port())
    assert await ops.start()
    base = f"http://127.0.0.1:{ops.port}"
    try:
        async with aiohttp.ClientSession(base) as session:
            starting = await session.get("/healthz")
            starting_body = await starting.json()
            await bot.bot.start()
            bot.credentials.collect(bot.storage)
            room_id = await human.join(f"#lobby:{bot.homeserver.server_name}")
            before = samples(await (await session.get("/metrics")).text())
            model.push(Reply(text="fine"))
            ok = await human.send(room_id, "@general how are you?")
            await human.wait_for_reply(room_id, ok, timeout=40)
            # the turn is marked for its flush just after the answer: polled, a ledger's state
            async with asyncio.timeout(30):
                while not samples(await (await session.get("/metrics")).text()).get(  # noqa: ASYNC110
                    "mindroom_flush_queue_depth"
                ):
                    await asyncio.sleep(0.1)
            model.push(Reply(status=401, error_message="invalid api key"))
            failing = await human.send(room_id, "@general and now?")
            await human.wait_for_reply(room_id, failing, timeout=40)
            await bot.settle(human, room_id)
            healthy = await session.get("/healthz")
            healthy_body = await healthy.json()
            after = samples(await (await session.get("/metrics")).text())
    finally:
        await ops.stop()

    assert starting.status == 503
    assert "starting" in json.dumps(starting_body)
    assert healthy.status == 200
    assert healthy_body["status"] == "ok"
    assert set(healthy_body["accounts"]) >= {"router", "general"}

    def grew(name: str) -> float:
        return after.get(name, 0) - before.get(name, 0)

    assert grew('mindroom_replies_total{outcome="done"}') >= 2  # both handled, one with a notice
    assert grew("mindroom_reply_seconds_count") >= 2
    assert grew('mindroom_model_errors_total{model="default"}') == 1
    assert before["mindroom_flush_queue_depth"] == 0  # the control: nothing waited before
    assert after['mindroom_account_sync_age_seconds{account="general"}'] >= 0


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_mindroom_run_serves_healthz_and_writes_json_logs(
    bot_process: BotProcess, model: ScriptedModel
) -> None:
    bot_process.storage.mkdir(parents=True, exist_ok=True)
    (bot_process.storage / "config.yaml").write_text(
        config_text(model.base_url, {"general": {"rooms": []}})
    )
    port = free_port()
    bot_process.run_options = ("--no-dashboard", "--ops-port", str(port), "--log-format", "json")
    bot_process.start()
    await bot_process.wait_running()
    async with aiohttp.ClientSession() as session:
        async with asyncio.timeout(30):
            url = f"http://127.0.0.1:{port}/healthz"  # polled: another process's state
            while (answer := await session.get(url)).status != 200:  # noqa: ASYNC110
                await asyncio.sleep(0.2)
        metrics = await (await session.get(f"http://127.0.0.1:{port}/metrics")).text()
    await bot_process.stop()

    assert (await answer.json())["status"] == "ok"
    assert "# TYPE mindroom_reply_seconds histogram" in metrics
    log_lines = [
        line
        for line in (bot_process.storage / "bot.log").read_text().splitlines()
        if line.startswith("{")
    ]
    assert log_lines  # the control: the log has lines at all
    parsed = [json.loads(line) for line in log_lines]
    assert any(p["logger"].startswith("mindroom") for p in parsed)
    assert all({"time", "level", "logger", "message"} <= set(p) for p in parsed)
