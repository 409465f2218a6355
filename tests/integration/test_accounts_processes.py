"""Several processes on one storage save their credentials at once (real forked processes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mindroom.adapters.matrix.accounts import Credentials, CredentialStore


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
