"""The latency benches, run small, end with their figure lines: an encrypted DM against a plain
one, the CLI's commands, replies with and without the session index, a reply against the
homeserver's round trip."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.benches import REPO, run_bench


def test_session_index_bench_times_replies_with_and_without_the_source(tmp_path: Path) -> None:
    """The bench runs real turns and a real index on a small scale and ends with its line."""
    args = ["--sessions", "2", "--turns", "8", "--indexed", "30", "--queries", "10"]
    lines = run_bench("session_index.py", *args, cwd=tmp_path)
    text = "\n".join(lines)
    assert "reply: 8 turns in 2 conversations, threshold 4 messages" in text
    syncs = re.search(r"one delta sync: median [\d.]+ ms \((\d+) syncs\)", text)
    assert syncs is not None
    assert int(syncs.group(1)) > 0  # the source was on: the index was written
    found = re.search(r"10 queries \((\d+) found a conversation\)", text)
    assert found is not None
    assert int(found.group(1)) > 0
    assert re.fullmatch(r"reply_overhead_ms=-?\d+\.\d\d search_p50_ms=\d+\.\d\d", lines[-1])


@pytest.mark.slow
def test_reply_latency_bench_measures_replies_against_the_round_trip(tmp_path: Path) -> None:
    """Its own Synapse and bot, a few replies: the round trip, the null bot's replies (the
    homeserver's part, plain and shaped as mindroom's), the agent's reply, the bot's CPU per
    reply and the ratios (the figures need the default size)."""
    lines = run_bench("reply_latency.py", "--messages", "3", cwd=tmp_path)
    text = "\n".join(lines)
    assert re.search(r"raw round trip +median +[\d.]+ ms +p95 +[\d.]+ ms +\(n=3\)", text)
    assert re.search(r"raw round trip again +median +[\d.]+ ms +p95 +[\d.]+ ms +\(n=3\)", text)
    assert re.search(r"null bot reply +median +[\d.]+ ms +p95 +[\d.]+ ms +\(n=3\)", text)
    assert re.search(r"null bot / round trip +\d+\.\d\dx", text)
    assert re.search(r"null bot, as mindroom +median +[\d.]+ ms +p95 +[\d.]+ ms +\(n=3\)", text)
    assert re.search(r"as mindroom answers +\d+\.\d\dx", text)
    assert re.search(r"mindroom adds +-?[\d.]+ ms", text)
    assert re.search(r"agent reply +median +[\d.]+ ms +p95 +[\d.]+ ms +\(n=3\)", text)
    cpu = re.search(r"bot CPU per reply +([\d.]+) ms", text)
    assert cpu is not None
    assert float(cpu.group(1)) > 0  # the bot did work for its replies, and it was counted
    assert re.fullmatch(
        r"reply / round trip +\d+\.\d\dx +\(floor about 2x; target at most 2\.2x\)", lines[-1]
    )


@pytest.mark.slow
def test_e2ee_latency_bench_compares_an_encrypted_dm_with_a_plain_one(tmp_path: Path) -> None:
    """The bench runs its own Synapse and bot, checks every answer's encryption, and ends
    with its line (a small run: the figures need the default size)."""
    lines = run_bench("e2ee_latency.py", "--messages", "2", cwd=tmp_path)
    text = "\n".join(lines)
    assert re.search(r"unencrypted DM +median +[\d.]+ ms .*\(n=2\)", text)
    assert re.search(r"encrypted DM +median +[\d.]+ ms .*\(n=2\)", text)
    assert re.fullmatch(r"added_median_ms=-?\d+\.\d", lines[-1])


@pytest.mark.timeout(300)  # eight fresh mindroom processes: slow on a busy machine
def test_cli_latency_bench_times_each_command_of_the_given_tree_and_ends_with_its_line(
    tmp_path: Path,
) -> None:
    """One repetition of each command; the bench itself checks each one's exit code and
    message (a config error, a refused second run), so its figures measure those paths."""
    lines = run_bench(
        "cli_latency.py", "--repeat", "1", "--tree", str(REPO), cwd=tmp_path, timeout=280
    )
    text = "\n".join(lines)
    assert f"mindroom from {REPO}" in text
    for case in ("mindroom --help", "config error", "second run refused", "mindroom doctor"):
        assert re.search(rf"{case} +cpu median +\d+ ms .*\(n=1\)", text), case
    assert re.fullmatch(
        r"cli_help_ms=\d+ config_error_ms=\d+ second_run_ms=\d+ doctor_ms=\d+", lines[-1]
    ), lines[-1]
