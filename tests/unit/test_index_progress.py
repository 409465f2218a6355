"""The CLI's progress bar for building a scope's search indexes: in place on a terminal,
a few plain lines otherwise."""

from __future__ import annotations

import io

from mindroom.cli.index_progress import ProgressBar


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_pipe_gets_a_plain_line_at_the_start_each_quarter_and_the_end() -> None:
    stream = io.StringIO()
    bar = ProgressBar("agent_x", stream)
    for done in range(0, 681, 10):
        bar(done, 680)

    lines = stream.getvalue().splitlines()
    assert lines[0] == "indexing 680 entries for agent_x: [                    ] 0/680"
    assert lines[-1] == "indexing 680 entries for agent_x: [####################] 680/680"
    assert len(lines) == 5  # 0, then each quarter reached
    assert "\r" not in stream.getvalue()


def test_a_terminal_gets_one_line_updated_in_place() -> None:
    stream = Terminal()
    bar = ProgressBar("agent_x", stream)
    for done in (0, 340, 680):
        bar(done, 680)

    text = stream.getvalue()
    assert text.count("\r") == 3
    assert text.endswith("[####################] 680/680\n")
    assert "\rindexing 680 entries for agent_x: [##########          ] 340/680\r" in text
    assert text.count("\n") == 1


def test_one_entry_is_one_entry() -> None:
    stream = io.StringIO()
    ProgressBar("agent_x", stream)(0, 1)
    assert stream.getvalue().startswith("indexing 1 entry for agent_x:")
