"""Round-trip edits of config.yaml keep every byte they do not touch.

Each test compares whole files as bytes: the expected result is the original with exactly the
edited lines changed, so a dropped comment, a changed line ending, a lost BOM or document marker,
a re-indented block or a re-wrapped value anywhere in the file fails the test.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mindroom.config.store import ConfigDocument, parse_value

MODELS = "models:\n  default:\n    provider: openai\n    id: m\n"


def edit(path: Path, original: bytes, *edits: tuple[str, str | None]) -> bytes:
    """Write ``original``, apply ``(key, value)`` sets (value None: unset), save, read back."""
    path.write_bytes(original)
    doc = ConfigDocument(path)
    for key, value in edits:
        if value is None:
            doc.unset(key)
        else:
            doc.set(key, parse_value(value))
    assert doc.save() is True
    return path.read_bytes()


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "config.yaml"


def test_unset_of_a_sections_only_key_keeps_the_comment_block_that_follows(path: Path) -> None:
    before = MODELS + "defaults:\n  streaming: false\n\n# Agents below: keep this.\nagents: {}\n"
    after = MODELS + "defaults: {}\n\n# Agents below: keep this.\nagents: {}\n"
    assert edit(path, before.encode(), ("defaults.streaming", None)) == after.encode()


def test_unset_of_a_whole_section_keeps_the_comment_block_that_follows(path: Path) -> None:
    before = MODELS + "defaults:\n  streaming: false\n\n# Agents below: keep this.\nagents: {}\n"
    after = MODELS + "\n# Agents below: keep this.\nagents: {}\n"
    assert edit(path, before.encode(), ("defaults", None)) == after.encode()


def test_unset_of_an_agent_keeps_the_next_agents_comment(path: Path) -> None:
    agents = (
        "agents:\n"
        "  general:\n"
        "    rooms: [lobby]\n"
        "    instructions:\n"
        "      - a   # first\n"
        "      - b\n"
        "\n"
        "  # Coder: the second one.\n"
        "  coder:\n"
        "    rooms: [lobby]\n"
    )
    before = MODELS + agents
    after = MODELS + "agents:\n\n  # Coder: the second one.\n  coder:\n    rooms: [lobby]\n"
    assert edit(path, before.encode(), ("agents.general", None)) == after.encode()


def test_unset_of_a_last_nested_key_keeps_the_outer_comment_after_it(path: Path) -> None:
    before = (
        MODELS + "defaults:\n  history_runs: 3\n  streaming: false\n  # about agents\nagents: {}\n"
    )
    after = MODELS + "defaults:\n  history_runs: 3\n  # about agents\nagents: {}\n"
    assert edit(path, before.encode(), ("defaults.streaming", None)) == after.encode()


def test_crlf_line_endings_are_kept_and_used_for_new_lines(path: Path) -> None:
    before = MODELS + "defaults:\n  history_runs: 3   # keep\n\n# end\n"
    after = MODELS + "defaults:\n  history_runs: 5   # keep\n  streaming: false\n\n# end\n"
    crlf = edit(
        path,
        before.replace("\n", "\r\n").encode(),
        ("defaults.history_runs", "5"),
        ("defaults.streaming", "false"),
    )
    assert crlf == after.replace("\n", "\r\n").encode()


def test_a_byte_order_mark_is_kept(path: Path) -> None:
    before = MODELS + "defaults:\n  history_runs: 3\n"
    after = MODELS + "defaults:\n  history_runs: 4\n"
    bom = b"\xef\xbb\xbf"
    assert edit(path, bom + before.encode(), ("defaults.history_runs", "4")) == bom + after.encode()


def test_a_document_start_marker_is_kept(path: Path) -> None:
    before = "---\n# head\n" + MODELS + "defaults:\n  history_runs: 3\n"
    after = "---\n# head\n" + MODELS + "defaults:\n  history_runs: 4\n"
    assert edit(path, before.encode(), ("defaults.history_runs", "4")) == after.encode()


def test_a_four_space_file_stays_four_space_and_new_blocks_follow_it(path: Path) -> None:
    before = (
        "models:\n"
        "    default:\n"
        "        provider: openai\n"
        "        id: m\n"
        "agents:\n"
        "    general:\n"
        "        instructions:\n"
        "            - One.\n"
        "            - Two.\n"
        "        rooms: [lobby]\n"
    )
    after = (
        before + "        role: Helps.\n" + "memory:\n    auto_flush:\n        idle_seconds: 60\n"
    )
    result = edit(
        path,
        before.encode(),
        ("agents.general.role", "Helps."),
        ("memory.auto_flush.idle_seconds", "60"),
    )
    assert result == after.encode()


def test_long_values_are_never_rewrapped(path: Path) -> None:
    long = " ".join(["word"] * 1500)  # 7,499 characters on one line
    before = MODELS + f"agents:\n  general:\n    role: {long}\n    rooms: [lobby]\n"
    longer = long + " more"
    after = MODELS + f"agents:\n  general:\n    role: {long}\n    rooms: [lobby]\n"
    after += f"  coder:\n    role: {longer}\n    rooms: [lobby]\n"
    path.write_text(before)
    doc = ConfigDocument(path)
    doc.set("agents.coder", {"role": longer, "rooms": ["lobby"]})
    assert doc.save() is True
    assert path.read_bytes() == after.encode()


def test_a_json_style_file_is_edited_in_flow_style_in_place(path: Path) -> None:
    before = (
        '{\n  "models": {"default": {"provider": "openai", "id": "m"}},\n'
        '  "agents": {\n    "general": {\n      "rooms": [\n        "x"\n      ]\n    }\n  }\n}\n'
    )
    after = (
        '{\n  "models": {"default": {"provider": "openai", "id": "m"}},\n'
        '  "agents": {\n    "general": {\n      "rooms": [\n        "x"\n'
        "      ], role: Tells jokes.\n    }\n  }, memory: {auto_flush: {idle_seconds: 60}}\n}\n"
    )
    result = edit(
        path,
        before.encode(),
        ("agents.general.role", "Tells jokes."),
        ("memory", "{auto_flush: {idle_seconds: 60}}"),
    )
    assert result == after.encode()


def test_a_quoted_value_stays_quoted_and_setting_the_same_value_changes_nothing(
    path: Path,
) -> None:
    before = MODELS.replace("id: m", 'id: "${MINDROOM_MODEL:-m}"   # quoted on purpose')
    before += "defaults:\n  history_runs: 3\n"
    path.write_text(before)
    doc = ConfigDocument(path)
    doc.set("models.default.id", "${MINDROOM_MODEL:-m}")
    doc.set("defaults.history_runs", 3)
    assert doc.save() is False
    assert path.read_text() == before
    after = before.replace("${MINDROOM_MODEL:-m}", "${MINDROOM_MODEL:-other}")
    assert edit(path, before.encode(), ("models.default.id", "${MINDROOM_MODEL:-other}")) == (
        after.encode()
    )
