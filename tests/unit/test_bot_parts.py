"""The composition root before and after it runs: a part that exists only while mindroom runs
is refused, never None, and stopping what never started closes what was made."""

from __future__ import annotations

from pathlib import Path

import pytest

from mindroom.app.bot import Bot, BotOptions, NotStartedError
from mindroom.config import parse_config
from tests.support.harness import config_text


def configured(tmp_path: Path) -> Bot:
    text = config_text("http://127.0.0.1:9/v1", {"general": {"rooms": ["lobby"]}})
    return Bot(parse_config(text, "config.yaml"), BotOptions(tmp_path, "http://127.0.0.1:9"))


@pytest.mark.asyncio
async def test_the_running_parts_are_refused_before_start_instead_of_being_none(
    tmp_path: Path,
) -> None:
    bot = configured(tmp_path)
    assert bot.agents == {}  # the control: the configured parts are there at once
    assert bot.memories is not None
    assert not bot.running
    for name in ("ledger", "answers", "intake", "started", "cluster", "appservice"):
        with pytest.raises(NotStartedError):
            getattr(bot, name)
    await bot.stop()  # what `mindroom run` does when its start fails before the ledger opens
    with pytest.raises(NotStartedError):
        bot.ledger  # noqa: B018


def test_healthz_says_starting_before_start_without_asking_what_start_decides(
    tmp_path: Path,
) -> None:
    from mindroom.dashboard.ops import health

    bot = configured(tmp_path)
    ok, body = health(bot)
    assert not ok
    assert body["problems"] == {"mindroom": "starting: no account is running yet"}
