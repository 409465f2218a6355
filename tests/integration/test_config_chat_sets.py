"""The chat's ``!config set`` and the CLI's ``mindroom config set`` share one lock: run side by
side, every write lands."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from mindroom.app.reload import set_in_file
from mindroom.config.store import ConfigDocument
from tests.integration.test_config_concurrency import NAMES, cli_set, many_agents


@pytest.mark.timeout(600)
def test_chat_sets_and_cli_sets_take_turns_and_all_land(tmp_path: Path) -> None:
    """``!config set`` (``set_in_file``, in bot threads) and CLI processes share one lock."""
    config = tmp_path / "config.yaml"
    config.write_text(many_agents())
    chat_names, cli_names = NAMES[:10], NAMES[20:30]
    codes: dict[str, int] = {}
    written: dict[str, bool] = {}

    def cli_worker() -> None:
        for name in cli_names:
            codes[name] = cli_set(config, f"agents.{name}.role", f"Role of {name}.").returncode

    def chat_worker() -> None:
        for name in chat_names:
            written[name] = set_in_file(config, f"agents.{name}.role", f"Role of {name}.")

    threads = [threading.Thread(target=cli_worker), threading.Thread(target=chat_worker)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert codes == dict.fromkeys(cli_names, 0)
    assert written == dict.fromkeys(chat_names, True)
    landed = ConfigDocument(config)
    both = chat_names + cli_names
    roles = {name: landed.get(f"agents.{name}").get("role") for name in both}
    assert roles == {name: f"Role of {name}." for name in both}  # 20 of 20
