"""The pace of a streamed answer: when its message is sent and how often it is edited, driven
by a fake monotonic clock (no sleeping), and where the pace comes from in the config."""

from __future__ import annotations

import pytest

from mindroom.adapters.matrix.reply import EditPacer, StreamPacing
from mindroom.config.load import parse_config
from mindroom.errors import ConfigError


class FakeClock:
    """Monotonic seconds that move only when the test says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def sends_for(stream: list[tuple[float, str]], pacing: StreamPacing) -> list[tuple[float, str]]:
    """What a writer driven by :class:`EditPacer` sends for ``stream`` (chunks at offsets in
    seconds from the first): ``(offset, "post: text")`` or ``(offset, "edit: text")``, each
    in-progress send as the pacer allows, then the final text at once (as
    :meth:`ReplyWriter.finish` does: a post when nothing was sent, else the last edit)."""
    clock = FakeClock()
    start = clock.now
    pacer = EditPacer(pacing, clock)
    sends: list[tuple[float, str]] = []
    text = ""
    for offset, chunk in stream:
        clock.now = start + offset
        text += chunk
        pacer.start()
        if pacer.due():
            sends.append((offset, f"{'edit' if sends else 'post'}: {text}…"))
            pacer.sent()
    sends.append((stream[-1][0], f"{'edit' if sends else 'post'}: {text}"))
    return sends


def every(seconds: float, words: int) -> list[tuple[float, str]]:
    return [(round(i * seconds, 3), f"w{i} ") for i in range(words)]


def test_an_answer_done_within_the_first_second_is_posted_once_and_never_edited() -> None:
    sends = sends_for(every(0.1, 10), StreamPacing())  # the last chunk at 0.9 s

    assert sends == [(0.9, "post: w0 w1 w2 w3 w4 w5 w6 w7 w8 w9 ")]


def test_a_slow_answer_is_posted_after_a_second_then_edited_at_most_every_interval() -> None:
    sends = sends_for(every(0.4, 12), StreamPacing(first_send_s=1.0, edit_interval_s=1.5))

    words = "".join(f"w{i} " for i in range(12))
    expected = [
        (1.2, f"post: {words[:12]}…"),  # 0.8 s is not a second yet: w0..w3 at 1.2 s
        (2.8, f"edit: {words[:24]}…"),  # 1.2 + 1.5 = 2.7: the next chunk, w7 at 2.8 s
        (4.4, f"edit: {words}…"),  # 2.8 + 1.5 = 4.3: the next chunk, the last
        (4.4, f"edit: {words}"),  # the final text, at once
    ]
    assert sends == expected


def test_the_first_second_counts_from_the_first_text_not_from_the_clock_start() -> None:
    clock = FakeClock()
    pacer = EditPacer(StreamPacing(first_send_s=1.0, edit_interval_s=1.5), clock)
    clock.now += 50  # a model that thinks for a long time before its first token
    pacer.start()
    clock.now += 0.99
    assert not pacer.due()
    clock.now += 0.01
    assert pacer.due()


def test_edits_are_spaced_from_the_last_send_not_from_the_last_check() -> None:
    clock = FakeClock()
    pacer = EditPacer(StreamPacing(first_send_s=0.0, edit_interval_s=1.5), clock)
    assert pacer.due()  # nothing to wait for: sent at the first text
    pacer.sent()
    due = []
    for _ in range(6):
        clock.now += 0.5
        due.append(pacer.due())
    assert due == [False, False, True, True, True, True]  # nothing sent since: still due
    pacer.sent()
    clock.now += 1.0
    assert not pacer.due()


@pytest.mark.parametrize("interval", [0.25, 3.0])
def test_the_edit_count_is_bounded_by_the_duration_over_the_interval(interval: float) -> None:
    stream = every(0.05, 400)  # 20 s of chunks, far more often than any interval
    sends = sends_for(stream, StreamPacing(first_send_s=1.0, edit_interval_s=interval))

    edits = [s for s in sends if s[1].startswith("edit")]
    in_progress = [at for at, text in sends if text.endswith("…")]
    assert sends[0][1].startswith("post")
    assert all(b - a >= interval - 1e-9 for a, b in zip(in_progress, in_progress[1:], strict=False))
    assert len(edits) <= (stream[-1][0] - sends[0][0]) / interval + 1
    assert len(edits) >= (stream[-1][0] - sends[0][0]) / interval - 1  # and it does edit


BASE = """\
models:
  default:
    id: some-model
defaults:
  stream_edit_interval_seconds: 2.5
agents:
  general:
    rooms: [lobby]
  quick:
    rooms: [lobby]
    stream_first_send_seconds: 0.2
    stream_edit_interval_seconds: 0.5
"""


def test_the_pace_comes_from_the_defaults_unless_an_agent_sets_its_own() -> None:
    config = parse_config(BASE, "config.yaml", env={})

    assert config.agent_stream_pacing("general") == (1.0, 2.5)  # the first from the schema
    assert config.agent_stream_pacing("quick") == (0.2, 0.5)
    assert config.agent_stream_pacing("a-team") == (1.0, 2.5)  # a team: the defaults


def test_a_negative_pace_is_refused_with_its_key() -> None:
    with pytest.raises(ConfigError, match="stream_edit_interval_seconds"):
        parse_config(BASE.replace("2.5", "-1"), "config.yaml", env={})
