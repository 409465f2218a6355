"""Unit tests for building sent content: splitting long replies and ``m.replace`` edits."""

from __future__ import annotations

import concurrent.futures
import random

import markdown
import pytest

from mindroom.adapters.matrix.send import (
    _MD_EXTENSIONS,
    IN_PROGRESS_MARKER,
    MAX_BODY_CHARS,
    edit_content,
    markdown_to_html,
    sanitize_html,
    split_message,
)

# -- split_message: examples ----------------------------------------------------------------------


@pytest.mark.parametrize("text", ["hello", "a b c", "x" * 20, "para one\n\npara two"])
def test_text_within_the_limit_is_one_unchanged_part(text: str) -> None:
    assert split_message(text, 20) == [text]


def test_default_limit_is_max_body_chars() -> None:
    text = "word " * (MAX_BODY_CHARS // 5 + 100)
    parts = split_message(text)
    assert len(parts) == 2
    assert all(len(part) <= MAX_BODY_CHARS for part in parts)
    assert split_message("x" * MAX_BODY_CHARS) == ["x" * MAX_BODY_CHARS]


def test_split_prefers_a_paragraph_boundary_over_later_line_ends_and_spaces() -> None:
    text = "aaa\n\nbbb\nccc ddd eee"
    assert split_message(text, 12) == ["aaa", "bbb", "ccc ddd eee"]


def test_split_takes_the_last_paragraph_boundary_that_fits() -> None:
    text = "one\n\ntwo\n\nthree four five six"
    assert split_message(text, 12)[0] == "one\n\ntwo"


def test_split_prefers_a_line_end_over_a_later_space() -> None:
    text = "first line\nsecond line here"
    assert split_message(text, 20) == ["first line", "second line here"]


def test_split_falls_back_to_the_last_space() -> None:
    text = "alpha beta gamma delta epsilon"
    parts = split_message(text, 17)
    assert parts == ["alpha beta gamma", "delta epsilon"]


def test_split_never_cuts_inside_a_word_when_a_space_fits() -> None:
    text = "tiny " + "y" * 18
    assert split_message(text, 20) == ["tiny", "y" * 18]


def test_single_overlong_word_is_cut_hard_at_the_limit() -> None:
    word = "".join(chr(ord("a") + i % 26) for i in range(50))
    assert split_message(word, 20) == [word[:20], word[20:40], word[40:]]


def test_overlong_word_after_a_short_one_starts_its_own_part() -> None:
    word = "z" * 30
    assert split_message(f"hi {word} bye", 20) == ["hi", "z" * 20, "z" * 10 + " bye"]


def test_whitespace_at_a_cut_is_dropped_from_both_parts() -> None:
    parts = split_message("first part   \n\n\n   second part", 16)
    assert parts == ["first part", "second part"]


# -- split_message: properties over random texts --------------------------------------------------

_ALPHABET = "abcdefghijklmnopqrstuvwxyzäöü0123456789.,;:!?-_()[]*`#"


def _word(rng: random.Random, limit: int) -> str:
    long_word = rng.random() < 0.05  # longer than any part
    length = rng.randint(limit + 1, 3 * limit) if long_word else rng.randint(1, 12)
    return "".join(rng.choice(_ALPHABET) for _ in range(length))


def _text(rng: random.Random, limit: int, *, long_words: bool) -> str:
    paragraphs = []
    for _ in range(rng.randint(1, 6)):
        lines = []
        for _ in range(rng.randint(1, 4)):
            words = []
            for _ in range(rng.randint(1, 15)):
                word = _word(rng, limit)
                while not long_words and len(word) > limit:
                    word = _word(rng, limit)
                words.append(word)
            lines.append(" ".join(words))
        paragraphs.append("\n".join(lines))
    return rng.choice(["\n\n", "\n\n\n"]).join(paragraphs)


def _cases(seed: int, count: int, *, long_words: bool) -> list[tuple[str, int]]:
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        limit = rng.choice([20, 21, 25, 33, 40, 64, 100, 250])
        cases.append((_text(rng, limit, long_words=long_words), limit))
    return cases


MIXED = _cases(1234, 300, long_words=True)
SHORT_WORDS = _cases(5678, 300, long_words=False)


def _offsets(text: str, parts: list[str]) -> list[int]:
    """Where each part starts in ``text``; every part must be a slice of it, in order."""
    offsets, position = [], 0
    for part in parts:
        found = text.find(part, position)
        assert found >= 0, f"part {part!r} is not in the text after {position}"
        assert text[position:found].strip() == "", "text between parts was dropped"
        offsets.append(found)
        position = found + len(part)
    assert text[position:].strip() == "", "text after the last part was dropped"
    return offsets


def test_random_texts_give_parts_within_the_limit() -> None:
    for text, limit in MIXED + SHORT_WORDS:
        parts = split_message(text, limit)
        assert all(len(part) <= limit for part in parts), (limit, text)


def test_random_texts_give_no_empty_or_blank_parts() -> None:
    for text, limit in MIXED + SHORT_WORDS:
        parts = split_message(text, limit)
        assert parts
        assert all(part.strip() for part in parts), (limit, text)


def test_random_texts_keep_every_character_in_order() -> None:
    for text, limit in MIXED:
        parts = split_message(text, limit)
        assert "".join("".join(part.split()) for part in parts) == "".join(text.split())
        _offsets(text, parts)


def test_random_texts_with_words_that_fit_keep_every_word_whole() -> None:
    for text, limit in SHORT_WORDS:
        parts = split_message(text, limit)
        words = [word for part in parts for word in part.split()]
        assert words == text.split(), (limit, text)


def test_random_texts_are_cut_at_the_best_boundary_that_fits() -> None:
    for text, limit in MIXED + SHORT_WORDS:
        parts = split_message(text, limit)
        offsets = _offsets(text, parts)
        for part, start, next_start in zip(parts, offsets, offsets[1:], strict=False):
            window = text[start : start + limit + 1]
            gap = text[start + len(part) : next_start]
            for separator in ("\n\n", "\n", " "):
                best = window.rfind(separator)
                if best > 0:
                    assert separator in gap, (separator, part, limit, text)
                    assert start + len(part) <= start + best < next_start, (part, limit, text)
                    break
            else:
                assert gap == "", (part, limit, text)
                assert len(part) == limit, (part, limit, text)


def test_random_texts_within_the_limit_are_one_unchanged_part() -> None:
    rng = random.Random(99)
    for _ in range(50):
        limit = rng.randint(20, 80)
        text = _text(rng, limit, long_words=True)[:limit].strip()
        assert split_message(text, limit) == [text]


# -- edit_content ---------------------------------------------------------------------------------

TEXT = "**Done**: see\n\n- one\n- two"


def test_edit_replaces_the_original_event() -> None:
    content = edit_content("$original", TEXT)
    assert content["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$original"}


def test_edit_new_content_has_the_full_text_and_html() -> None:
    new = edit_content("$original", TEXT)["m.new_content"]
    assert new["body"] == TEXT
    assert new["msgtype"] == "m.text"
    assert new["format"] == "org.matrix.custom.html"
    assert new["formatted_body"] == markdown_to_html(TEXT)
    assert "<strong>Done</strong>" in new["formatted_body"]


def test_edit_new_content_has_no_relation_of_its_own() -> None:
    new = edit_content("$original", TEXT)["m.new_content"]
    assert "m.relates_to" not in new


def test_edit_fallback_body_is_prefixed_with_a_star() -> None:
    content = edit_content("$original", TEXT)
    assert content["body"] == f"* {TEXT}"
    assert content["formatted_body"].startswith("* ")
    assert content["formatted_body"] == f"* {markdown_to_html(TEXT)}"


def test_edit_keeps_the_msgtype_inside_and_outside() -> None:
    content = edit_content("$n", "status", msgtype="m.notice")
    assert content["msgtype"] == "m.notice"
    assert content["m.new_content"]["msgtype"] == "m.notice"


def test_edit_mentions_nobody() -> None:
    content = edit_content("$original", "@coder hi")
    assert content["m.mentions"] == {}
    assert content["m.new_content"]["m.mentions"] == {}


def test_edit_carries_an_in_progress_marker_verbatim() -> None:
    content = edit_content("$original", "thinking" + IN_PROGRESS_MARKER)
    assert content["m.new_content"]["body"].endswith(IN_PROGRESS_MARKER)


def test_random_corpus_exercises_every_kind_of_cut() -> None:
    # Guards the property tests above against a generator that stopped producing hard cases.
    kinds = set()
    for text, limit in MIXED:
        parts = split_message(text, limit)
        offsets = _offsets(text, parts)
        for part, start, next_start in zip(parts, offsets, offsets[1:], strict=False):
            gap = text[start + len(part) : next_start]
            kinds.add(next((sep for sep in ("\n\n", "\n", " ") if sep in gap), "hard"))
    assert kinds == {"\n\n", "\n", " ", "hard"}


# -- markdown_to_html: sanitised to the Matrix HTML subset ----------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "hi <script>alert('pwned')</script> there",
        "<SCRIPT src=https://evil.example/x.js></SCRIPT>",
        "<div><script>document.cookie</script></div>",
    ],
)
def test_script_elements_and_their_content_are_removed(text: str) -> None:
    html = markdown_to_html(text)
    assert "<script" not in html.lower()
    assert "alert" not in html
    assert "document.cookie" not in html


@pytest.mark.parametrize(
    "text",
    [
        '<img src="mxc://localhost/abc" onerror="alert(1)">',
        '<b onclick="alert(1)">bold</b>',
        '<a href="https://example.org" onmouseover="alert(1)">x</a>',
        '<p style="background:url(javascript:alert(1))">shown</p>',
    ],
)
def test_event_handler_and_style_attributes_are_removed(text: str) -> None:
    html = markdown_to_html(text)
    for attribute in ("onerror", "onclick", "onmouseover", "style", "alert"):
        assert attribute not in html


@pytest.mark.parametrize(
    "text",
    [
        "[click me](javascript:alert(1))",
        '<a href="javascript:alert(1)">click me</a>',
        '<a href="JaVaScRiPt:alert(1)">click me</a>',
        '<a href="data:text/html;base64,PHNjcmlwdD4=">click me</a>',
        '<a href="vbscript:msgbox(1)">click me</a>',
    ],
)
def test_links_with_dangerous_schemes_lose_their_target(text: str) -> None:
    html = markdown_to_html(text)
    assert "click me" in html  # the text stays
    for scheme in ("javascript", "data:", "vbscript"):
        assert scheme not in html.lower()


@pytest.mark.parametrize(
    "text",
    ["<iframe src='https://evil.example'></iframe>x", "<object>x</object>", "<form>x</form>"],
)
def test_tags_outside_the_matrix_subset_are_removed(text: str) -> None:
    html = markdown_to_html(text)
    for tag in ("iframe", "object", "form"):
        assert f"<{tag}" not in html


def test_images_must_come_from_the_homeserver() -> None:
    assert 'src="mxc://localhost/abc"' in markdown_to_html("![cat](mxc://localhost/abc)")
    tracked = markdown_to_html("![cat](https://tracker.example/pixel.png)")
    assert "tracker.example" not in tracked
    assert 'alt="cat"' in tracked


def test_code_blocks_keep_their_language_class_and_content() -> None:
    html = markdown_to_html("```python\nif a < b and c > d:\n    print('<b>')\n```")
    assert '<pre><code class="language-python">' in html
    assert "if a &lt; b and c &gt; d:" in html
    assert "&lt;b&gt;" in html  # markup inside code is shown, not run


def test_other_code_classes_are_dropped() -> None:
    html = markdown_to_html('<code class="evil language-x">x</code>')
    assert "evil" not in html


def test_tables_lists_and_emphasis_survive() -> None:
    text = (
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n3. three\n4. four\n\n**bold** _it_ `code`\n\n> quoted"
    )
    html = markdown_to_html(text)
    for fragment in (
        "<table>",
        "<thead>",
        "<th>a</th>",
        "<tbody>",
        "<td>2</td>",
        '<ol start="3">',
        "<li>three</li>",
        "<strong>bold</strong>",
        "<em>it</em>",
        "<code>code</code>",
        "<blockquote>",
    ):
        assert fragment in html, (fragment, html)


@pytest.mark.parametrize(
    ("text", "href"),
    [
        ("[docs](https://example.org/a?b=1)", "https://example.org/a?b=1"),
        ("[plain](http://example.org)", "http://example.org"),
        ("[mail](mailto:alice@example.org)", "mailto:alice@example.org"),
        ("[files](ftp://example.org/f)", "ftp://example.org/f"),
    ],
)
def test_links_with_allowed_schemes_survive(text: str, href: str) -> None:
    html = markdown_to_html(text)
    assert f'href="{href}"' in html
    assert "rel=" not in html  # not in the Matrix subset


def test_matrix_colour_and_spoiler_attributes_survive() -> None:
    html = markdown_to_html(
        '<font color="#ff0000" data-mx-color="#00ff00">red</font> '
        '<span data-mx-spoiler="plot" data-mx-bg-color="#000000" class="x">twist</span>'
    )
    assert '<font color="#ff0000" data-mx-color="#00ff00">red</font>' in html
    assert 'data-mx-spoiler="plot"' in html
    assert 'data-mx-bg-color="#000000"' in html
    assert "class=" not in html


def test_message_and_edit_content_carry_sanitised_html() -> None:
    text = "see <img src=x onerror=alert(1)>"
    assert "onerror" not in edit_content("$e", text)["formatted_body"]
    assert "onerror" not in edit_content("$e", text)["m.new_content"]["formatted_body"]


def test_a_message_renders_alike_after_any_other_on_the_reused_renderer() -> None:
    first = "[docs]: https://example.org\n\nSee [the docs][docs].\n\n```\ncode\n```"
    second = "And [the docs][docs] again,\n\n- one\n- two"
    fresh_second = markdown.markdown(second, extensions=_MD_EXTENSIONS, output_format="html")

    assert 'href="https://example.org"' in markdown_to_html(first)
    rendered = markdown_to_html(second)

    assert "example.org" not in rendered  # the first message's link reference is gone
    assert rendered == sanitize_html(fresh_second).strip()
    assert "<li>one</li>" in rendered


def test_each_thread_renders_with_its_own_renderer() -> None:
    text = "**bold** and `code`"
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        rendered = set(pool.map(markdown_to_html, [text] * 200))
    assert rendered == {markdown_to_html(text)}
    assert "<strong>bold</strong>" in markdown_to_html(text)
