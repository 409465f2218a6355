"""Unit tests for parsing Matrix event JSON and building the content mindroom sends."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from mindroom.adapters.matrix.events import (
    AgentIdentity,
    IncomingMessage,
    mentioned_agents,
    message_source,
    parse_message,
)
from mindroom.adapters.matrix.send import markdown_to_html, message_content, notice_content
from mindroom.pipeline.routing import route_message

ROOM = "!lobby:localhost"
GENERAL = AgentIdentity("general", "@mindroom_general:localhost", "General")
CODER = AgentIdentity("coder", "@mindroom_coder:localhost", "Coder")
MIND = AgentIdentity("mind", "@mindroom_mind:localhost", "Mind")
AGENTS = [GENERAL, CODER, MIND]


def event(content: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """An ``m.room.message`` event as it arrives in ``event.source`` from a sync."""
    source = {
        "type": "m.room.message",
        "event_id": "$event1:localhost",
        "sender": "@alice:localhost",
        "origin_server_ts": 1_700_000_000_000,
        "room_id": ROOM,
        "unsigned": {"age": 12},
        "content": content,
    }
    source.update(fields)
    return source


def text(body: str, **extra: Any) -> dict[str, Any]:
    return event({"msgtype": "m.text", "body": body, **extra})


def say(body: str, mentions: frozenset[str] = frozenset()) -> IncomingMessage:
    return IncomingMessage("$e", ROOM, "@alice:localhost", body, mention_ids=mentions)


# -- parse_message --------------------------------------------------------------------------------


def test_plain_message_is_parsed_into_its_fields() -> None:
    message = parse_message(ROOM, text("hello there"))
    assert message == IncomingMessage(
        event_id="$event1:localhost",
        room_id=ROOM,
        sender="@alice:localhost",
        body="hello there",
        msgtype="m.text",
        timestamp_ms=1_700_000_000_000,
    )
    assert not message.is_notice
    assert not message.is_edit


def test_room_id_comes_from_the_argument_not_the_event() -> None:
    message = parse_message("!other:localhost", text("hi"))
    assert message is not None
    assert message.room_id == "!other:localhost"


def test_thread_reply_has_thread_root_and_reply_to() -> None:
    source = text(
        "in the thread",
        **{
            "m.relates_to": {
                "rel_type": "m.thread",
                "event_id": "$root:localhost",
                "is_falling_back": True,
                "m.in_reply_to": {"event_id": "$latest:localhost"},
            }
        },
    )
    message = parse_message(ROOM, source)
    assert message is not None
    assert message.thread_root == "$root:localhost"
    assert message.reply_to == "$latest:localhost"
    assert not message.is_edit


def test_plain_reply_outside_a_thread_has_reply_to_but_no_thread_root() -> None:
    source = text("> quoted\n\nanswer", **{"m.relates_to": {"m.in_reply_to": {"event_id": "$q"}}})
    message = parse_message(ROOM, source)
    assert message is not None
    assert message.reply_to == "$q"
    assert message.thread_root is None


def test_edit_is_marked_and_has_no_thread_root() -> None:
    source = text(
        "* fixed typo",
        **{
            "m.new_content": {"msgtype": "m.text", "body": "fixed typo"},
            "m.relates_to": {"rel_type": "m.replace", "event_id": "$original:localhost"},
        },
    )
    message = parse_message(ROOM, source)
    assert message is not None
    assert message.is_edit
    assert message.thread_root is None
    assert message.body == "* fixed typo"


def test_other_relation_types_do_not_count_as_thread_or_edit() -> None:
    source = text("x", **{"m.relates_to": {"rel_type": "m.reference", "event_id": "$other"}})
    message = parse_message(ROOM, source)
    assert message is not None
    assert message.thread_root is None
    assert not message.is_edit


def test_notice_is_parsed_and_marked_as_notice() -> None:
    message = parse_message(ROOM, event({"msgtype": "m.notice", "body": "status: ok"}))
    assert message is not None
    assert message.msgtype == "m.notice"
    assert message.is_notice


def test_emote_is_a_message_but_not_a_notice() -> None:
    message = parse_message(ROOM, event({"msgtype": "m.emote", "body": "waves"}))
    assert message is not None
    assert message.msgtype == "m.emote"
    assert not message.is_notice


@pytest.mark.parametrize(
    "source",
    [
        {
            "type": "m.room.member",
            "event_id": "$m",
            "sender": "@a:localhost",
            "state_key": "@a:localhost",
            "content": {"membership": "join"},
        },
        {
            "type": "m.reaction",
            "event_id": "$r",
            "sender": "@a:localhost",
            "content": {
                "m.relates_to": {"rel_type": "m.annotation", "event_id": "$x", "key": "👍"}
            },
        },
        {
            "type": "m.room.encrypted",
            "event_id": "$c",
            "sender": "@a:localhost",
            "content": {"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "..."},
        },
        {"event_id": "$no_type", "content": {"msgtype": "m.text", "body": "hi"}},
    ],
    ids=["member", "reaction", "encrypted", "no-type"],
)
def test_non_message_event_is_not_parsed(source: dict[str, Any]) -> None:
    assert parse_message(ROOM, source) is None


@pytest.mark.parametrize(
    "content",
    [
        {"msgtype": "m.text"},
        {"msgtype": "m.text", "body": None},
        {"msgtype": "m.text", "body": 5},
        {},
    ],
    ids=["missing", "null", "number", "empty-content"],
)
def test_message_without_a_string_body_is_not_parsed(content: dict[str, Any]) -> None:
    assert parse_message(ROOM, event(content)) is None


def test_redacted_message_without_content_is_not_parsed() -> None:
    source = event({})
    del source["content"]
    assert parse_message(ROOM, source) is None


def test_m_mentions_user_ids_become_mention_ids() -> None:
    source = text(
        "hey both",
        **{"m.mentions": {"user_ids": ["@mindroom_general:localhost", "@bob:localhost"]}},
    )
    message = parse_message(ROOM, source)
    assert message is not None
    assert message.mention_ids == {"@mindroom_general:localhost", "@bob:localhost"}


def test_pills_in_formatted_body_become_mention_ids() -> None:
    source = text(
        "Coder: can you look?",
        format="org.matrix.custom.html",
        formatted_body='<a href="https://matrix.to/#/@mindroom_coder:localhost">Coder</a>: '
        "can you look?",
    )
    message = parse_message(ROOM, source)
    assert message is not None
    assert message.mention_ids == {"@mindroom_coder:localhost"}
    assert message.formatted_body is not None
    assert "matrix.to" in message.formatted_body


def test_pills_and_m_mentions_are_combined() -> None:
    source = text(
        "Coder and General",
        format="org.matrix.custom.html",
        formatted_body='<a href="https://matrix.to/#/@mindroom_coder:localhost">Coder</a> and '
        "<a href='https://matrix.to/#/@mindroom_general:localhost'>General</a>",
        **{"m.mentions": {"user_ids": ["@mindroom_coder:localhost"]}},
    )
    message = parse_message(ROOM, source)
    assert message is not None
    assert message.mention_ids == {"@mindroom_coder:localhost", "@mindroom_general:localhost"}


def test_room_and_event_permalinks_are_not_mentions() -> None:
    source = text(
        "see",
        format="org.matrix.custom.html",
        formatted_body='<a href="https://matrix.to/#/#lobby:localhost">lobby</a> '
        '<a href="https://matrix.to/#/!room:localhost/$event">this</a>',
    )
    message = parse_message(ROOM, source)
    assert message is not None
    assert message.mention_ids == frozenset()


def test_formatted_body_without_format_is_ignored() -> None:
    source = text(
        "hi", formatted_body='<a href="https://matrix.to/#/@mindroom_coder:localhost">Coder</a>'
    )
    message = parse_message(ROOM, source)
    assert message is not None
    assert message.formatted_body is None
    assert message.mention_ids == frozenset()


def test_non_string_mention_ids_are_dropped() -> None:
    source = text("hi", **{"m.mentions": {"user_ids": ["@ok:localhost", 7, None]}})
    message = parse_message(ROOM, source)
    assert message is not None
    assert message.mention_ids == {"@ok:localhost"}


def test_missing_timestamp_is_zero() -> None:
    source = text("hi")
    del source["origin_server_ts"]
    message = parse_message(ROOM, source)
    assert message is not None
    assert message.timestamp_ms == 0


def test_parse_message_does_not_modify_the_event() -> None:
    source = text("hi", **{"m.relates_to": {"rel_type": "m.thread", "event_id": "$root"}})
    before = copy.deepcopy(source)
    parse_message(ROOM, source)
    assert source == before


@pytest.mark.parametrize(
    "extra",
    [
        {"m.relates_to": "not an object"},
        {"m.relates_to": {"m.in_reply_to": "$not-an-object"}},
        {"m.mentions": ["@mindroom_general:localhost"]},
    ],
    ids=["relates_to-string", "in_reply_to-string", "mentions-list"],
)
def test_malformed_relation_or_mentions_do_not_crash_the_parser(extra: dict[str, Any]) -> None:
    message = parse_message(ROOM, text("hi", **extra))
    assert message is None or message.body == "hi"


# -- mentioned_agents -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        "@general what is 2+2?",
        "@mindroom_general what is 2+2?",
        "@mindroom_general:localhost what is 2+2?",
        "@GENERAL shouting",
        "@Mindroom_General:LocalHost mixed case",
        "hey @general, what now?",
        "@general: what now?",
        "@general:what now?",
        "ask (@general) maybe",
        "thanks @general.",
        "**@general** bold",
        "@general",
    ],
)
def test_typed_mention_of_agent_is_found(body: str) -> None:
    assert mentioned_agents(say(body), AGENTS) == ["general"]


@pytest.mark.parametrize(
    "body",
    [
        "@generalist please",
        "email@general please",
        "mail me at bob@mindroom_general:localhost",
        "@general_purpose bot",
        "@general-purpose bot",
        "@@general",
        "general, no at sign",
        "@gen",
        "@mindroom_generalx",
    ],
)
def test_text_that_only_contains_the_name_is_not_a_mention(body: str) -> None:
    assert mentioned_agents(say(body), AGENTS) == []


def test_several_mentioned_agents_come_in_config_order() -> None:
    message = say("@mind and @general, and also @coder")
    assert mentioned_agents(message, AGENTS) == ["general", "coder", "mind"]
    assert mentioned_agents(message, [MIND, CODER, GENERAL]) == ["mind", "coder", "general"]


def test_agent_mentioned_twice_is_listed_once() -> None:
    assert mentioned_agents(say("@coder @coder @mindroom_coder"), AGENTS) == ["coder"]


def test_m_mentions_counts_without_any_body_text() -> None:
    message = say("can you look at this?", frozenset({"@mindroom_coder:localhost"}))
    assert mentioned_agents(message, AGENTS) == ["coder"]


def test_m_mentions_and_typed_mentions_combine_in_config_order() -> None:
    message = say("@mind too", frozenset({"@mindroom_coder:localhost"}))
    assert mentioned_agents(message, AGENTS) == ["coder", "mind"]


def test_m_mentions_of_a_human_mentions_no_agent() -> None:
    assert mentioned_agents(say("hi bob", frozenset({"@bob:localhost"})), AGENTS) == []


def test_pill_in_a_parsed_event_mentions_the_agent() -> None:
    source = text(
        "Coder: please review",
        format="org.matrix.custom.html",
        formatted_body='<a href="https://matrix.to/#/@mindroom_coder:localhost">Coder</a>: '
        "please review",
    )
    message = parse_message(ROOM, source)
    assert message is not None
    assert mentioned_agents(message, AGENTS) == ["coder"]


def test_no_agents_means_no_mentions() -> None:
    assert mentioned_agents(say("@general"), []) == []


def test_agent_name_with_regex_characters_is_matched_literally() -> None:
    odd = AgentIdentity("a.b", "@mindroom_a.b:localhost")
    assert mentioned_agents(say("@a.b hi"), [odd]) == ["a.b"]
    assert mentioned_agents(say("@axb hi"), [odd]) == []


# -- markdown_to_html -----------------------------------------------------------------------------


def test_plain_text_renders_as_a_paragraph() -> None:
    assert markdown_to_html("hello") == "<p>hello</p>"


def test_bullet_list_renders_as_ul() -> None:
    html = markdown_to_html("Things:\n\n- one\n- two")
    assert "<ul>" in html
    assert "<li>one</li>" in html
    assert "<li>two</li>" in html


def test_numbered_list_renders_as_ol() -> None:
    html = markdown_to_html("1. first\n2. second")
    assert html.startswith("<ol>")
    assert "<li>second</li>" in html


def test_fenced_code_block_renders_as_pre_code_with_escaping() -> None:
    html = markdown_to_html("```python\nif a < b:\n    print('x')\n```")
    assert html.startswith("<pre><code")
    assert 'class="language-python"' in html
    assert "a &lt; b" in html
    assert "    print(" in html


def test_table_renders_as_html_table() -> None:
    html = markdown_to_html("| name | n |\n|------|---|\n| a    | 1 |\n| b    | 2 |")
    assert html.startswith("<table>")
    assert "<th>name</th>" in html
    assert "<td>b</td>" in html
    assert html.count("<tr>") == 3


def test_link_renders_as_anchor() -> None:
    html = markdown_to_html("see [the docs](https://example.org/docs)")
    assert '<a href="https://example.org/docs">the docs</a>' in html


def test_single_newline_becomes_a_line_break() -> None:
    assert markdown_to_html("one\ntwo") == "<p>one<br>\ntwo</p>"


def test_inline_emphasis_and_code_render() -> None:
    html = markdown_to_html("**bold**, *it* and `code`")
    assert "<strong>bold</strong>" in html
    assert "<em>it</em>" in html
    assert "<code>code</code>" in html


def test_rendered_html_has_no_surrounding_whitespace() -> None:
    html = markdown_to_html("\n\n- a\n\n")
    assert html == html.strip()


# -- message_content / notice_content -------------------------------------------------------------


def test_message_outside_a_thread_has_no_relation() -> None:
    content = message_content("**hi**")
    assert content == {
        "msgtype": "m.text",
        "body": "**hi**",
        "format": "org.matrix.custom.html",
        "formatted_body": "<p><strong>hi</strong></p>",
        "m.mentions": {},
    }


def test_thread_reply_has_thread_relation_with_fallback_reply() -> None:
    content = message_content("answer", thread_root="$root", reply_to="$question")
    assert content["m.relates_to"] == {
        "rel_type": "m.thread",
        "event_id": "$root",
        "is_falling_back": True,
        "m.in_reply_to": {"event_id": "$question"},
    }


def test_thread_reply_without_reply_to_falls_back_to_the_root() -> None:
    content = message_content("answer", thread_root="$root")
    assert content["m.relates_to"]["m.in_reply_to"] == {"event_id": "$root"}
    assert content["m.relates_to"]["event_id"] == "$root"


def test_plain_reply_has_only_in_reply_to() -> None:
    content = message_content("answer", reply_to="$question")
    assert content["m.relates_to"] == {"m.in_reply_to": {"event_id": "$question"}}


def test_sent_content_mentions_nobody() -> None:
    content = message_content("@general said hi", thread_root="$root")
    assert content["m.mentions"] == {}


def test_notice_content_has_notice_msgtype_and_html() -> None:
    content = notice_content("**failed**: model unreachable")
    assert content["msgtype"] == "m.notice"
    assert content["body"] == "**failed**: model unreachable"
    assert content["formatted_body"] == "<p><strong>failed</strong>: model unreachable</p>"
    assert "m.relates_to" not in content


def test_notice_in_a_thread_keeps_the_thread_relation() -> None:
    content = notice_content("oops", thread_root="$root", reply_to="$q")
    assert content["msgtype"] == "m.notice"
    assert content["m.relates_to"]["rel_type"] == "m.thread"
    assert content["m.relates_to"]["m.in_reply_to"] == {"event_id": "$q"}


def test_sent_thread_reply_parses_back_into_the_same_thread() -> None:
    content = message_content("- a\n- b", thread_root="$root", reply_to="$q")
    message = parse_message(ROOM, event(content, sender="@mindroom_general:localhost"))
    assert message is not None
    assert message.thread_root == "$root"
    assert message.reply_to == "$q"
    assert message.formatted_body is not None
    assert "<ul>" in message.formatted_body
    assert message.mention_ids == frozenset()


def test_sent_notice_parses_back_as_a_notice() -> None:
    message = parse_message(ROOM, event(notice_content("status")))
    assert message is not None
    assert message.is_notice


@pytest.mark.parametrize("rel_type", ["m.reference", "org.example.x", "m.annotation.custom"])
def test_message_with_an_unknown_relation_is_a_plain_message(rel_type: str) -> None:
    source = text("@general hi", **{"m.relates_to": {"rel_type": rel_type, "event_id": "$x"}})
    message = parse_message(ROOM, source)
    assert message is not None
    assert (message.body, message.thread_root, message.is_edit) == ("@general hi", None, False)
    assert (message.relation, message.threadable) == (rel_type, False)
    resumed = parse_message(ROOM, message_source(message))
    assert resumed is not None
    assert (resumed.relation, resumed.thread_root) == (rel_type, None)


def test_thread_messages_and_plain_replies_have_no_other_relation() -> None:
    in_thread = parse_message(
        ROOM, text("x", **{"m.relates_to": {"rel_type": "m.thread", "event_id": "$r"}})
    )
    reply = parse_message(
        ROOM, text("x", **{"m.relates_to": {"m.in_reply_to": {"event_id": "$r"}}})
    )
    assert in_thread is not None
    assert reply is not None
    assert (in_thread.relation, reply.relation, reply.threadable) == (None, None, True)


def test_message_with_an_unknown_relation_is_routed_like_a_plain_one() -> None:
    source = text("hello", **{"m.relates_to": {"rel_type": "org.example.x", "event_id": "$x"}})
    message = parse_message(ROOM, source)
    assert message is not None
    decision = route_message(
        message, room_agents=["general"], identities=AGENTS, own_user_ids=set(), authorized=True
    )
    assert decision.responders == ("general",)
