"""Forget-me and the scopes' ``audiences.json``: the rooms a person was a reader of are in
their export, and after ``memory forget --user`` their Matrix ID is in no scope's book (the
other readers stay: the positive control)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mindroom.cli.main import main
from mindroom.memory.policy.audience import BOOK_NAME, AudienceBook, Told
from mindroom.memory.scope import agent_scope
from tests.support.memory_cli import copy_config

ALICE, BOB, CAROL = "@alice:localhost", "@bob:localhost", "@carol:localhost"


def _room(room_id: str, *readers: str) -> Told:
    return Told(open=False, readers=frozenset(readers), kind="private", room_id=room_id)


def test_forget_takes_the_person_out_of_every_recorded_room_and_export_shows_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = copy_config(tmp_path)
    book = AudienceBook(agent_scope(tmp_path, "general").state_dir)
    theirs = book.record(_room("!plans:localhost", ALICE, BOB))
    others = book.record(_room("!games:localhost", BOB, CAROL))
    assert ALICE in book.path.read_text(encoding="utf-8")  # the control: it names her now

    code = main(["memory", "export", "--user", ALICE, "--format", "json", "--config", str(config)])
    out, _ = capsys.readouterr()
    assert code == 0
    [scope] = json.loads(out)["stores"]["shared_memory"]["data"]
    assert scope["scope"] == "agent_general"
    assert list(scope["audiences"]) == [theirs]  # her room, not the one she never read
    assert scope["audiences"][theirs]["readers"] == [ALICE, BOB]

    code = main(["memory", "forget", "--user", ALICE, "--yes", "--config", str(config)])
    out, _ = capsys.readouterr()
    assert code == 0, out
    books = list(tmp_path.rglob(BOOK_NAME))
    assert books == [book.path]
    for found in books:
        assert ALICE not in found.read_text(encoding="utf-8")
    rooms = book.rooms()
    assert rooms[theirs].readers == {BOB}  # the others stay
    assert rooms[others].readers == {BOB, CAROL}
