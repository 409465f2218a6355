"""Two writers, one config file: edits under a lock land, a change seen late is refused.

``mindroom config set|unset|add-agent`` load, edit and save inside one lock (a ``flock`` on
``.config.yaml.lock`` beside the file), so concurrent commands on different keys all land. A
writer that does not take the lock (a person's editor) and changes the file between our read and
our write is never overwritten: the save fails and names the file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from mindroom.cli.main import main
from mindroom.config import store
from mindroom.config.store import ConfigDocument, config_lock, lock_path, parse_value
from mindroom.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
NAMES = [f"{group}{i}" for group in "ab" for i in range(20)]


def many_agents() -> str:
    lines = ["models:", "  default:", "    provider: openai", "    id: m", "agents:"]
    for name in NAMES:
        lines += [f"  {name}:", "    rooms: [lobby]"]
    return "\n".join(lines) + "\n"


def cli_set(config: Path, key: str, value: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "mindroom", "config", "set", key, value]
    return subprocess.run(
        [*command, "--config", str(config)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.timeout(600)  # 40 interpreter start-ups on a shared 2-core machine
def test_concurrent_cli_sets_on_different_keys_all_land(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(many_agents())
    results: dict[str, subprocess.CompletedProcess[str]] = {}

    def worker(group: str) -> None:
        for name in NAMES:
            if name.startswith(group):
                results[name] = cli_set(config, f"agents.{name}.role", f"Role of {name}.")

    threads = [threading.Thread(target=worker, args=(group,)) for group in "ab"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert {name: (r.returncode, r.stderr) for name, r in results.items()} == {
        name: (0, "") for name in NAMES
    }
    assert all("updated" in r.stdout for r in results.values())
    landed = ConfigDocument(config)
    roles = {name: landed.get(f"agents.{name}").get("role") for name in NAMES}
    assert roles == {name: f"Role of {name}." for name in NAMES}  # 40 of 40


def test_a_file_changed_between_load_and_save_is_refused_and_kept(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(many_agents())
    doc = ConfigDocument(config)
    doc.set("agents.a0.role", parse_value("Ours."))
    theirs = many_agents().replace("  a1:\n", "  a1:\n    role: Theirs.\n")
    with config.open("w") as handle:  # an in-place editor: truncate and write
        handle.write(theirs)
    with pytest.raises(ConfigError, match="changed since it was read; run the command again"):
        doc.save()
    assert config.read_text() == theirs
    # positive control: a fresh read of the same file saves, so the refusal was the race
    control = ConfigDocument(config)
    control.set("agents.a0.role", parse_value("Ours."))
    assert control.save() is True
    assert "role: Theirs." in config.read_text()
    assert "role: Ours." in config.read_text()


def test_cli_set_racing_an_editor_fails_with_a_message_and_keeps_the_editors_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(many_agents())
    theirs = many_agents().replace("  b1:\n", "  b1:\n    role: Edited by hand.\n")
    real_set = store.ConfigDocument.set

    def set_while_an_editor_saves(self: ConfigDocument, key: str, value: object) -> None:
        real_set(self, key, value)
        tmp = config.with_name("editor.swp")  # a rename-style editor: it takes no lock
        tmp.write_text(theirs)
        tmp.replace(config)

    monkeypatch.setattr(store.ConfigDocument, "set", set_while_an_editor_saves)
    code = main(["config", "set", "agents.a0.role", "Ours.", "--config", str(config)])
    captured = capsys.readouterr()
    assert code != 0
    assert str(config) in captured.err
    assert "changed since it was read; run the command again" in captured.err
    assert "updated" not in captured.out
    assert config.read_text() == theirs


HOLD_LOCK = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def test_a_lock_held_by_another_process_bounds_the_wait_with_a_clear_error(
    tmp_path: Path,
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(many_agents())
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(lock_path(config))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        with (
            pytest.raises(ConfigError, match="nothing was written, try again"),
            config_lock(config, timeout=0.2),
        ):
            pass
    finally:
        holder.communicate("", timeout=30)  # the holder exits: the kernel drops its lock
    with config_lock(config, timeout=5):  # positive control: free again, taken at once
        assert lock_path(config).name == ".config.yaml.lock"
