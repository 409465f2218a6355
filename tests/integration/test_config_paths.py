"""Every configured path stays where its key says it lives: ``memory.file.path``
inside the storage root, ``agents.<name>.private.template_dir`` inside the config file's
folder. A path that leaves it (``..``, absolute, ``~``, or a symlink pointing out) is refused
with the key's name and the file's: when the config is loaded, and in the dashboard's forms,
which validate through the same loader."""

from __future__ import annotations

import re
from pathlib import Path

import aiohttp
import pytest

from mindroom.config.load import load_config
from mindroom.dashboard.server import Dashboard
from mindroom.errors import ConfigError
from mindroom.memory.registry import MemoryRegistry
from tests.support.dashboard import form_of
from tests.support.harness import BotHarness, config_text
from tests.support.scripted_model import ScriptedModel

MODELS = "models: {default: {provider: openai, id: m, base_url: 'http://127.0.0.1:9/v1'}}\n"


def _config(tmp_path: Path, memory_path: str | None, template_dir: str | None) -> Path:
    text = MODELS
    if memory_path is not None:
        text += f"memory:\n  file:\n    path: {memory_path!r}\n"
    private = f"{{per: user, template_dir: {template_dir!r}}}" if template_dir else "{per: user}"
    text += f"agents:\n  mind:\n    private: {private}\n"
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "value", ["../../../tmp", "/tmp", "~/elsewhere", "mirrors/../../out", "..", ""]
)
def test_a_memory_file_path_outside_the_storage_root_is_refused_naming_key_and_file(
    tmp_path: Path, value: str
) -> None:
    path = _config(tmp_path, value, None)

    with pytest.raises(ConfigError) as refused:
        load_config(path)

    message = str(refused.value)
    assert f"{path}: memory.file.path (line " in message
    assert "storage root" in message


@pytest.mark.parametrize("value", ["../outside", "/etc", "~/templates", "./t/../../x"])
def test_a_template_dir_outside_the_config_folder_is_refused_naming_key_and_file(
    tmp_path: Path, value: str
) -> None:
    path = _config(tmp_path, None, value)

    with pytest.raises(ConfigError) as refused:
        load_config(path)

    message = str(refused.value)
    assert f"{path}: agents.mind.private.template_dir (line " in message
    assert "config file's folder" in message


def test_paths_inside_their_folders_load(tmp_path: Path) -> None:
    config = load_config(_config(tmp_path, "team_mirrors", "./mind_template"))
    nested = load_config(_config(tmp_path, "data/mirrors", "templates/mind"))

    assert config.memory.file.path == "team_mirrors"
    assert config.agents["mind"].private is not None
    assert config.agents["mind"].private.template_dir == "./mind_template"
    assert nested.memory.file.path == "data/mirrors"


def test_a_symlink_that_leads_out_of_the_storage_root_is_refused_where_the_path_is_used(
    tmp_path: Path,
) -> None:
    storage, outside = tmp_path / "storage", tmp_path / "outside"
    storage.mkdir()
    outside.mkdir()
    (storage / "escape").symlink_to(outside)
    (storage / "inner").mkdir()
    (storage / "inward").symlink_to(storage / "inner")
    escaping = load_config(_config(storage, "escape", None))
    inward = load_config(_config(storage, "inward", None))

    with pytest.raises(ConfigError) as refused:
        MemoryRegistry(escaping, storage).roots_parent()
    kept = MemoryRegistry(inward, storage).roots_parent()  # the control: a link that stays in

    assert "memory.file.path" in str(refused.value)
    assert "outside the storage root" in str(refused.value)
    assert kept.resolve() == (storage / "inner").resolve()


def test_a_template_symlink_that_leads_out_of_the_config_folder_is_refused_on_use(
    tmp_path: Path,
) -> None:
    storage, outside = tmp_path / "storage", tmp_path / "outside"
    storage.mkdir()
    outside.mkdir()
    (outside / "MEMORY.md").write_text("- copied from outside\n")
    (storage / "tmpl").symlink_to(outside)
    (storage / "own").mkdir()
    (storage / "own" / "MEMORY.md").write_text("- from the template\n")
    escaping = load_config(_config(storage, None, "tmpl"))
    own = load_config(_config(storage, None, "own"))

    with pytest.raises(ConfigError) as refused:
        MemoryRegistry(escaping, storage, storage).for_agent("mind", "@alice:localhost")
    registry = MemoryRegistry(own, storage, storage)
    memory = registry.for_agent("mind", "@bob:localhost")  # the control: copied from inside
    assert memory is not None
    texts = [e.text for e in memory.list_sync(10)]
    registry.close()

    assert "agents.mind.private.template_dir" in str(refused.value)
    assert texts == ["from the template"]


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_the_dashboard_refuses_paths_that_leave_their_folder_and_shows_why(
    dashboard: Dashboard, browser: aiohttp.ClientSession
) -> None:
    config = dashboard.config_path
    before = config.read_bytes()
    settings = form_of(await (await browser.get("/memory/settings")).text())
    mind = form_of(await (await browser.get("/agents/mind")).text())

    out = await browser.post("/memory/settings", data={**settings, "file.path": "../../../tmp"})
    absolute = await browser.post("/memory/settings", data={**settings, "file.path": "/tmp"})
    template = await browser.post("/agents/mind", data={**mind, "private.template_dir": "../x"})
    unchanged = config.read_bytes()
    fresh = form_of(await (await browser.get("/memory/settings")).text())
    inside = await browser.post("/memory/settings", data={**fresh, "file.path": "mirrors"})

    for answer, key in (
        (out, "file.path"),
        (absolute, "file.path"),
        (template, "private.template_dir"),
    ):
        page = await answer.text()
        assert answer.status == 422, key
        field = re.search(
            rf'<div class="field invalid"><label for="f-{re.escape(key)}">.*?</div>', page, re.S
        )
        assert field is not None, key
        assert "outside" in field.group(0) or "leaves" in field.group(0), field.group(0)
    assert unchanged == before
    assert inside.status in (200, 303)  # the control: a path inside the root is saved
    assert "path: mirrors" in config.read_text()


@pytest.mark.synapse
@pytest.mark.asyncio
async def test_a_reload_to_a_path_that_leads_out_through_a_symlink_is_refused(
    bot: BotHarness, model: ScriptedModel, tmp_path: Path
) -> None:
    await bot.start(config_text(model.base_url, {"general": {"rooms": []}}))
    assert bot.bot is not None
    assert bot.bot.reloader is not None
    outside = tmp_path / "outside"
    outside.mkdir()
    (bot.storage / "escape").symlink_to(outside)
    (bot.storage / "inner").mkdir()
    memory = {"file": {"path": "escape"}, "embedder": "none", "auto_flush": {"enabled": False}}

    bot.write_config(config_text(model.base_url, {"general": {"rooms": []}}, memory=memory))
    refused = await bot.bot.reloader.reload()
    error = bot.bot.reloader.error
    kept = bot.bot.config.memory.file.path
    memory["file"] = {"path": "inner"}
    bot.write_config(config_text(model.base_url, {"general": {"rooms": []}}, memory=memory))
    applied = await bot.bot.reloader.reload()  # the control: a folder inside the root

    assert refused is None
    assert error is not None
    assert "memory.file.path" in error
    assert "symlink" in error
    assert kept is None
    assert applied is not None
    assert bot.bot.config.memory.file.path == "inner"
