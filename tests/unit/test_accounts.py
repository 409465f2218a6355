"""The credential store: private, atomic, keyed by homeserver and account."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mindroom.adapters.matrix.accounts import Credentials, CredentialStore
from mindroom.errors import MatrixError


def test_saved_credentials_are_private_and_read_back(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path / "data" / "credentials.json")
    store.put(
        "http://hs", "mindroom_general", Credentials("@mindroom_general:hs", "pw", "tok", "DEV")
    )
    store.put("http://other", "mindroom_general", Credentials("@mindroom_general:o", "pw2"))

    assert store.path.stat().st_mode & 0o777 == 0o600
    assert store.get("http://hs", "mindroom_general") == Credentials(
        "@mindroom_general:hs", "pw", "tok", "DEV"
    )
    assert store.get("http://other", "mindroom_general").password == "pw2"
    assert store.get("http://hs", "mindroom_coder") is None
    names = sorted(p.name for p in store.path.parent.iterdir())
    assert names == ["credentials.json", "credentials.lock"]  # no temp left


def test_credentials_readable_by_others_are_made_private(tmp_path: Path) -> None:
    store = CredentialStore(tmp_path / "credentials.json")
    store.put("http://hs", "a", Credentials("@a:hs", "pw"))
    store.path.chmod(0o644)

    assert store.get("http://hs", "a") is not None
    assert store.path.stat().st_mode & 0o777 == 0o600


def test_corrupt_credentials_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "credentials.json"
    path.write_text("{not json")
    path.chmod(0o600)
    with pytest.raises(MatrixError, match="unreadable credentials file"):
        CredentialStore(path).get("http://hs", "a")


def test_processes_saving_credentials_at_once_lose_none(tmp_path: Path) -> None:
    """Several processes on one storage register their accounts at once: every password is
    kept (a lost one would lock its account out for good)."""
    import multiprocessing

    path = tmp_path / "credentials.json"
    names = [f"mindroom_agent{i}" for i in range(12)]
    context = multiprocessing.get_context("fork")
    start = context.Barrier(len(names))
    workers = [context.Process(target=_save, args=(path, name, start)) for name in names]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(30)
        assert worker.exitcode == 0
    store = CredentialStore(path)
    assert sorted(local for _, local in store.accounts()) == sorted(names)
    assert all(store.get("http://hs", n).password == f"pw-{n}" for n in names)


def _save(path: Path, name: str, start: Any) -> None:
    store = CredentialStore(path)
    start.wait(10)  # all at once, as processes started together do
    for i in range(20):  # read-modify-write, again and again
        store.put("http://hs", name, Credentials(f"@{name}:hs", f"pw-{name}", f"t{i}"))
