"""SessionIndex: past conversations as a searchable, readable memory source (real SQLite)."""

from __future__ import annotations

import datetime as dt
import json
import random
import sqlite3
import threading
from pathlib import Path

import pytest

from mindroom.errors import MemoryStoreError
from mindroom.memory.files import store
from mindroom.memory.scope import MemoryScope
from mindroom.memory.search.session_index import (
    MAX_NAME,
    MAX_READ_LINES,
    MAX_SPAN_LINES,
    SCHEMA_VERSION,
    SessionIndex,
    TranscriptMessage,
    decode_session_name,
    is_transcript_path,
    render_line,
    session_name,
    spans,
    transcript_line,
    transcript_path,
)

SESSION = "mind:!room:localhost:$event#2@alice_example.org~s1~c1"
T0 = dt.datetime(2024, 3, 14, 9, 30).timestamp()


def user(text: str, who: str | None = "@alice:example.org", at: float = T0) -> TranscriptMessage:
    return TranscriptMessage("user", text, who, at)


def bot(text: str, at: float = T0) -> TranscriptMessage:
    return TranscriptMessage("assistant", text, None, at)


CHAT = [
    user("Which tyres should I buy for the winter?"),
    bot("Go for the Nokian Hakkapeliitta, they grip well on ice."),
    TranscriptMessage("tool", "search_results: nokian tyres", None, T0),
    user("And how much do they cost?"),
    TranscriptMessage("system", "You are a helpful assistant", None, T0),
    bot("About 120 euros each."),
]


@pytest.fixture
def index(tmp_path: Path):
    idx = SessionIndex(tmp_path / "state" / "sessions.db")
    yield idx
    idx.close()


def spans_in(db_path: Path) -> list[tuple[str, int, int, str]]:
    """Every span as stored: (session, first line, last line, text)."""
    with sqlite3.connect(db_path) as db:
        rows = db.execute(
            "SELECT s.session_id, p.start_line, p.end_line, t.text FROM spans p"
            " JOIN span_text t ON t.rowid = p.id JOIN sessions s ON s.id = p.session"
        ).fetchall()
    return sorted(rows)


# -- pure helpers ------------------------------------------------------------------------------


def test_a_span_is_a_turn_of_user_lines_and_the_answers_after_them() -> None:
    assert spans([]) == []
    assert spans(["user", "assistant", "user", "assistant"]) == [(0, 1), (2, 3)]
    assert spans(["assistant", "user", "user", "assistant", "assistant"]) == [(0, 0), (1, 4)]
    assert spans(["user"] * 3) == [(0, 2)]
    long_run = ["user", *["assistant"] * (2 * MAX_SPAN_LINES)]
    found = spans(long_run)
    assert all(b - a + 1 <= MAX_SPAN_LINES for a, b in found)


def test_spans_cover_every_line_once_and_restart_cleanly_at_any_span() -> None:
    rng = random.Random(7)
    for _ in range(300):
        roles = [rng.choice(["user", "assistant"]) for _ in range(rng.randint(0, 30))]
        found = spans(roles)
        covered = [n for a, b in found for n in range(a, b + 1)]
        assert covered == list(range(len(roles)))
        for a, _ in found:  # what the index relies on to recompute only the last span
            assert [(x - a, y - a) for x, y in found if x >= a] == spans(roles[a:])


def test_transcript_lines_are_json_of_the_kept_messages_only() -> None:
    line = transcript_line(user("  Grüße aus München 🎉  ", at=0.0))
    assert line is not None
    assert "Grüße aus München 🎉" in line  # not \\u escapes
    assert json.loads(line) == {
        "role": "user",
        "user_id": "@alice:example.org",
        "at": "1970-01-01T00:00:00+00:00",
        "text": "Grüße aus München 🎉",
    }
    assert transcript_line(TranscriptMessage("tool", "result", None, 0.0)) is None
    assert transcript_line(TranscriptMessage("system", "prompt", None, 0.0)) is None
    assert transcript_line(bot("   \n ")) is None
    assert render_line(line) == "@alice:example.org: Grüße aus München 🎉"
    assert render_line(transcript_line(user("hi there", who="bob"))) == "@bob: hi there"
    assert render_line(transcript_line(user("hi there", who=None))) == "user: hi there"
    assert render_line(transcript_line(bot("hello"))) == "assistant: hello"


def test_session_names_are_readable_safe_and_round_trip() -> None:
    name = session_name(SESSION)
    assert name == "mind%3A%21room%3Alocalhost%3A%24event%232%40alice_example.org%7Es1%7Ec1"
    assert decode_session_name(name) == SESSION
    assert transcript_path(SESSION) == f"sessions/{name}.jsonl"
    assert is_transcript_path(transcript_path(SESSION))
    assert not is_transcript_path("memory/2024-03-14.md")
    assert session_name("..") == "%2E."
    assert session_name("%41") == "%2541"  # an escape-like id is escaped, not read as "A"
    with pytest.raises(ValueError, match="empty"):
        session_name("")


def test_distinct_session_ids_never_share_a_path() -> None:
    rng = random.Random(42)
    alphabet = "aA0-_.~%:!$#@/\\ \n\t+=?&é日🎉" + "\ud800"  # a lone surrogate too
    ids = {"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(5000)}
    ids |= {f"mind:!r:localhost:$e{n}@u~s{n}~c1" * rng.randint(1, 8) for n in range(500)}
    paths: dict[str, str] = {}
    for session_id in ids:
        name = session_name(session_id)
        assert len(name) <= MAX_NAME
        assert not name.startswith(".")
        assert set(name) <= set(
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.%~"
        )
        decoded = decode_session_name(name)
        assert decoded in (session_id, None)  # None: a long name, shortened with a hash
        assert (decoded is None) == ("~" in name)
        assert paths.setdefault(transcript_path(session_id), session_id) == session_id
    assert any(decode_session_name(session_name(i)) is None for i in ids)  # both kinds seen


# -- the index ---------------------------------------------------------------------------------


def test_appending_the_same_range_twice_adds_it_once(index: SessionIndex) -> None:
    assert index.indexed(SESSION) == 0
    assert index.append(SESSION, CHAT, start=0) == 4
    assert index.append(SESSION, CHAT, start=0) == 0
    assert index.append(SESSION, CHAT[3:], start=3) == 0
    assert index.indexed(SESSION) == len(CHAT)  # tool and system messages move the cursor
    assert index.sessions() == [(SESSION, len(CHAT))]
    assert index.count() == 2


def test_appending_later_messages_adds_only_the_new_ones(index: SessionIndex) -> None:
    assert index.append(SESSION, CHAT[:1], start=0) == 1
    assert index.append(SESSION, CHAT[:4], start=0) == 2  # overlaps what is indexed
    assert index.append(SESSION, CHAT[4:], start=4) == 1
    assert index.indexed(SESSION) == len(CHAT)
    text = index.read(transcript_path(SESSION))
    assert text.count("Nokian Hakkapeliitta") == 1
    assert "lines 1-4 of 4" in text


def test_a_start_past_the_cursor_is_refused(index: SessionIndex) -> None:
    index.append(SESSION, CHAT[:2], start=0)
    with pytest.raises(ValueError, match="up to message 2"):
        index.append(SESSION, CHAT[3:], start=3)
    with pytest.raises(ValueError, match="not from -1"):
        index.append("other", CHAT, start=-1)
    assert index.indexed(SESSION) == 2


def test_the_cursor_survives_reopening_the_database(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    first = SessionIndex(db)
    first.append(SESSION, CHAT[:3], start=0)
    first.close()
    again = SessionIndex(db)
    try:
        assert again.indexed(SESSION) == 3
        assert again.append(SESSION, CHAT, start=0) == 2
        assert [h.entry.start_line for h in again.search("cost euros", 5)] == [3]
    finally:
        again.close()
    first.search("tyres", 1)  # a closed index opens again on use
    first.close()


def test_concurrent_syncs_of_one_session_add_each_message_once(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    indexes = [SessionIndex(db), SessionIndex(db)]  # two connections, as two processes
    chat = CHAT * 20

    def sync(index: SessionIndex) -> None:
        for end in range(1, len(chat) + 1, 3):
            done = index.indexed(SESSION)
            index.append(SESSION, chat[done:end], start=done)
        done = index.indexed(SESSION)
        index.append(SESSION, chat[done:], start=done)

    threads = [threading.Thread(target=sync, args=(indexes[n % 2],)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert indexes[0].indexed(SESSION) == len(chat)
        assert "lines 1-80 of 80" in indexes[1].read(transcript_path(SESSION), 1, 100)
    finally:
        for index in indexes:
            index.close()
    whole = SessionIndex(tmp_path / "whole.db")
    whole.append(SESSION, chat, start=0)
    whole.close()
    assert spans_in(db) == spans_in(tmp_path / "whole.db")


def test_syncing_in_pieces_gives_the_spans_of_one_append(tmp_path: Path) -> None:
    rng = random.Random(3)
    chat = [rng.choice([user, bot])(f"message {n} about topic{n % 7}") for n in range(80)] + CHAT
    whole, pieces = SessionIndex(tmp_path / "a.db"), SessionIndex(tmp_path / "b.db")
    whole.append(SESSION, chat, start=0)
    done = 0
    while done < len(chat):
        start = rng.randint(max(0, done - 3), done)  # overlapping ranges, as a retry sends
        end = rng.randint(done, len(chat))
        pieces.append(SESSION, chat[start:end], start=start)
        done = max(done, end)
    whole.close()
    pieces.close()
    assert spans_in(tmp_path / "a.db") == spans_in(tmp_path / "b.db")


def test_search_ranks_the_matching_transcript_first_and_read_shows_its_lines(
    index: SessionIndex,
) -> None:
    index.append(SESSION, CHAT, start=0)
    for n in range(20):
        other = [user(f"what is on the menu {n}"), bot("pasta and a salad, with some cost")]
        index.append(f"other-{n}", other, start=0)
    hits = index.search("winter tyres for ice?", 5)
    assert hits
    top = hits[0]
    assert top.entry.path == transcript_path(SESSION)
    assert (top.entry.start_line, top.entry.end_line) == (1, 2)
    assert top.entry.id.startswith("s-")
    assert len(top.entry.id) == 10
    assert top.entry.text == (
        "@alice:example.org: Which tyres should I buy for the winter?\n"
        "assistant: Go for the Nokian Hakkapeliitta, they grip well on ice."
    )
    assert all(0 <= h.score < 1 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    first, last = top.entry.start_line, top.entry.end_line
    shown = index.read(top.entry.path, first, last - first + 1).splitlines()
    assert shown[0] == f"{top.entry.path} (lines 1-2 of 4):"
    rendered = [render_line(line[7:]) for line in shown[1:-1]]  # "{n:>5}  " before each
    assert shown[-1] == "(2 more lines after this)"
    assert "\n".join(rendered) == top.entry.text
    assert index.search("winter tyres", 5)[0].entry.id == top.entry.id  # stable


def test_read_numbers_lines_as_a_memory_file_does(index: SessionIndex, tmp_path: Path) -> None:
    index.append(SESSION, CHAT * 3, start=0)
    # the same lines in a real memory file, read by the file memory
    root = tmp_path / "root"
    (root / "sessions").mkdir(parents=True)
    lines = [line for m in CHAT * 3 if (line := transcript_line(m))]
    (root / "sessions" / "copy.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    memory = store.FileMemory(MemoryScope("agent_test", root, tmp_path / "mstate"))
    try:
        path = transcript_path(SESSION)
        for start, count in [(1, 100), (3, 4), (12, 5), (20, 2), (1, 1)]:
            expected = memory.read_file_sync("sessions/copy.md", start, count)
            assert index.read(path, start, count) == expected.replace("sessions/copy.md", path, 1)
    finally:
        memory.close()
    assert MAX_READ_LINES == store.MAX_READ_LINES


def test_reading_an_unknown_path_raises(index: SessionIndex) -> None:
    index.append(SESSION, CHAT, start=0)
    for path in ["sessions/nobody.jsonl", "MEMORY.md", "sessions/.jsonl", ""]:
        with pytest.raises(MemoryStoreError, match="no session transcript"):
            index.read(path)


def test_tool_and_system_messages_and_empty_texts_are_not_indexed(index: SessionIndex) -> None:
    messages = [
        TranscriptMessage("tool", "zebra_lookup returned giraffe", None, T0),
        TranscriptMessage("system", "You are Zebra, the helpful bot", None, T0),
        user("   "),
        bot(""),
    ]
    assert index.append(SESSION, messages, start=0) == 0
    assert index.indexed(SESSION) == 4
    assert index.search("zebra giraffe", 5) == []
    assert index.count() == 0
    assert index.read(transcript_path(SESSION)).startswith(f"{transcript_path(SESSION)} (lines")


def test_a_query_of_punctuation_and_stop_words_finds_nothing(index: SessionIndex) -> None:
    index.append(SESSION, CHAT, start=0)
    for query in ["", "   ", '"*^():-+ OR AND NEAR', "what is the", "?!", "and or not"]:
        assert index.search(query, 5) == []
    assert index.search('tyres" OR (', 5)  # FTS syntax in a query is just text


def test_unicode_text_is_searchable(index: SessionIndex) -> None:
    index.append("u", [user("Grüße aus München 🎉"), bot("Danke, schöne Grüße zurück!")], start=0)
    index.append("v", [user("Unrelated chat about bread")], start=0)
    for query in ["münchen", "Grüße", "schöne"]:
        hits = index.search(query, 3)
        assert hits
        assert hits[0].entry.path == transcript_path("u")
    assert "🎉" in index.read(transcript_path("u"))


def test_a_date_finds_the_conversation_of_that_day(index: SessionIndex) -> None:
    day = dt.datetime(2023, 5, 8, 12, 0).timestamp()
    index.append("may", [user("we planned the garden", at=day)], start=0)
    index.append("june", [user("we planned the party", at=day + 40 * 86400)], start=0)
    hits = index.search("what did we plan on 8 May 2023", 2)
    assert hits[0].entry.path == transcript_path("may")


def test_forget_drops_a_session_entirely(index: SessionIndex) -> None:
    index.append(SESSION, CHAT, start=0)
    index.append("keep", [user("winter tyres again")], start=0)
    assert index.forget(SESSION)
    assert not index.forget(SESSION)
    assert index.indexed(SESSION) == 0
    assert index.sessions() == [("keep", 1)]
    assert [h.entry.path for h in index.search("winter tyres", 5)] == [transcript_path("keep")]
    with pytest.raises(MemoryStoreError):
        index.read(transcript_path(SESSION))
    assert index.append(SESSION, CHAT, start=0) == 4  # indexed afresh


def test_an_index_of_another_schema_version_is_rebuilt_empty(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    index = SessionIndex(db)
    index.append(SESSION, CHAT, start=0)
    index.close()
    with sqlite3.connect(db) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    index = SessionIndex(db)
    try:
        assert index.sessions() == []
        assert index.append(SESSION, CHAT, start=0) == 4
    finally:
        index.close()


def test_a_thousand_sessions_find_the_right_one(index: SessionIndex) -> None:
    topics = ["gardening", "cooking", "taxes", "running", "music", "travel", "chess", "bikes"]
    for n in range(1000):
        topic = topics[n % len(topics)]
        messages = [
            (user if k % 2 == 0 else bot)(f"note {k} on {topic} in session {n}") for k in range(10)
        ]
        if n == 613:
            messages[4] = user("my passport number is hidden in the blue folder")
        index.append(f"session-{n}", messages, start=0)
    assert len(index.sessions()) == 1000
    hits = index.search("where is my passport?", 3)
    assert hits[0].entry.path == transcript_path("session-613")
    assert "blue folder" in hits[0].entry.text
