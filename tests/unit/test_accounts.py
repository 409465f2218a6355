"""The credential store: private, atomic, keyed by homeserver and account."""

from __future__ import annotations

from pathlib import Path

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
