"""Unit tests for who answers a message (routing), who may talk (authorization), sessions."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest

from mindroom.agents.runner import session_id_for
from mindroom.authorization import default_allowed_users, is_authorized
from mindroom.matrix.events import AgentIdentity, IncomingMessage
from mindroom.routing import Route, route_message

ROOM = "!lobby:localhost"
ROUTER = "@mindroom_router:localhost"
ALICE = "@alice:localhost"
BOB = "@bob:localhost"
GENERAL = AgentIdentity("general", "@mindroom_general:localhost", "General")
CODER = AgentIdentity("coder", "@mindroom_coder:localhost", "Coder")
MIND = AgentIdentity("mind", "@mindroom_mind:localhost", "Mind")
IDENTITIES = [GENERAL, CODER, MIND]
OWN = {GENERAL.user_id, CODER.user_id, MIND.user_id, ROUTER}


def msg(
    body: str = "hello",
    *,
    sender: str = ALICE,
    thread_root: str | None = None,
    msgtype: str = "m.text",
    is_edit: bool = False,
    mentions: Collection[str] = (),
) -> IncomingMessage:
    return IncomingMessage(
        event_id="$e",
        room_id=ROOM,
        sender=sender,
        body=body,
        msgtype=msgtype,
        thread_root=thread_root,
        is_edit=is_edit,
        mention_ids=frozenset(mentions),
    )


def route(
    message: IncomingMessage,
    room_agents: Sequence[str] = ("general", "coder", "mind"),
    *,
    authorized: bool = True,
    thread_senders: Collection[str] = (),
) -> Route:
    return route_message(
        message,
        room_agents=room_agents,
        identities=IDENTITIES,
        own_user_ids=OWN,
        authorized=authorized,
        thread_senders=thread_senders,
    )


# -- rule 1: own accounts, edits, notices ---------------------------------------------------------


@pytest.mark.parametrize("sender", [GENERAL.user_id, CODER.user_id, ROUTER])
def test_message_from_own_account_is_never_answered(sender: str) -> None:
    decision = route(msg("@coder @general hi", sender=sender), ["general"])
    assert decision.responders == ()
    assert decision.reason == "own account"


def test_edit_is_never_answered() -> None:
    decision = route(msg("* @general fixed", is_edit=True), ["general"])
    assert decision == Route((), "edit")


def test_edit_in_a_thread_of_one_agent_is_never_answered() -> None:
    message = msg("* fixed", is_edit=True, thread_root="$root")
    decision = route(message, thread_senders={ALICE, GENERAL.user_id})
    assert decision.responders == ()


def test_notice_is_never_answered() -> None:
    decision = route(msg("@general status", msgtype="m.notice"), ["general"])
    assert decision == Route((), "notice")


def test_emote_in_single_agent_room_is_answered() -> None:
    assert route(msg("waves", msgtype="m.emote"), ["general"]).responders == ("general",)


# -- rule 2: authorization ------------------------------------------------------------------------


def test_unauthorized_sender_is_never_answered_even_when_mentioning() -> None:
    decision = route(msg("@general hi", sender="@eve:evil.org"), ["general"], authorized=False)
    assert decision == Route((), "sender not authorized")


def test_unauthorized_sender_is_not_answered_in_an_agents_thread() -> None:
    message = msg("more", sender="@eve:evil.org", thread_root="$root")
    decision = route(message, authorized=False, thread_senders={"@eve:evil.org", CODER.user_id})
    assert decision.responders == ()


# -- rule 3: mentions -----------------------------------------------------------------------------


def test_mention_picks_only_the_mentioned_agent_among_several() -> None:
    decision = route(msg("@coder fix this"))
    assert decision == Route(("coder",), "mentioned")


def test_several_mentioned_agents_all_answer_in_config_order() -> None:
    assert route(msg("@mind and @general?")).responders == ("general", "mind")


def test_mention_by_m_mentions_without_body_text_is_answered() -> None:
    decision = route(msg("look at this", mentions={MIND.user_id}))
    assert decision.responders == ("mind",)


def test_mention_of_an_agent_not_in_the_room_is_ignored() -> None:
    decision = route(msg("@coder hi"), ["general", "mind"])
    assert decision.responders == ()


def test_mention_of_absent_agent_does_not_block_single_agent_room() -> None:
    assert route(msg("@coder hi"), ["general"]).responders == ("general",)


def test_only_mentioned_agents_present_in_the_room_answer() -> None:
    assert route(msg("@coder @mind hi"), ["general", "mind"]).responders == ("mind",)


def test_mentioned_agent_beats_thread_continuity() -> None:
    message = msg("@coder what do you think?", thread_root="$root")
    decision = route(message, thread_senders={ALICE, GENERAL.user_id})
    assert decision == Route(("coder",), "mentioned")


def test_mention_is_answered_in_a_thread_with_several_humans() -> None:
    message = msg("@general?", thread_root="$root")
    decision = route(message, thread_senders={ALICE, BOB, CODER.user_id})
    assert decision.responders == ("general",)


def test_mention_in_single_agent_room_gives_mentioned_reason() -> None:
    assert route(msg("@general hi"), ["general"]) == Route(("general",), "mentioned")


# -- rule 4: thread continuity --------------------------------------------------------------------


def test_thread_with_exactly_one_agent_is_answered_by_it_without_mention() -> None:
    message = msg("and then?", thread_root="$root")
    decision = route(message, thread_senders={ALICE, CODER.user_id})
    assert decision == Route(("coder",), "agent of this thread")


def test_thread_root_by_agent_counts_for_continuity() -> None:
    # The agent wrote the root (e.g. a scheduled post); the human replies in its thread.
    decision = route(msg("thanks", thread_root="$root"), thread_senders={MIND.user_id})
    assert decision.responders == ("mind",)


def test_thread_with_two_humans_and_no_mention_is_answered_by_nobody() -> None:
    message = msg("what do you think, bob?", thread_root="$root")
    decision = route(message, thread_senders={ALICE, BOB, CODER.user_id})
    assert decision.responders == ()
    assert decision.reason == "thread with several humans and no mention"


def test_new_human_joining_an_agents_thread_stops_continuity() -> None:
    # Bob speaks for the first time: thread_senders need not already include him.
    message = msg("me too", sender=BOB, thread_root="$root")
    decision = route(message, thread_senders={ALICE, CODER.user_id})
    assert decision.responders == ()


def test_thread_with_two_agents_and_no_mention_is_answered_by_nobody() -> None:
    message = msg("and then?", thread_root="$root")
    decision = route(message, thread_senders={ALICE, CODER.user_id, GENERAL.user_id})
    assert decision.responders == ()


def test_thread_agent_that_left_the_room_does_not_continue_the_thread() -> None:
    message = msg("and then?", thread_root="$root")
    decision = route(message, ["general", "mind"], thread_senders={ALICE, CODER.user_id})
    assert decision.responders == ()


def test_thread_agent_counts_even_if_another_agent_already_left() -> None:
    message = msg("and then?", thread_root="$root")
    senders = {ALICE, CODER.user_id, GENERAL.user_id}
    assert route(message, ["coder", "mind"], thread_senders=senders).responders == ("coder",)


def test_router_in_a_thread_is_not_a_human_nor_an_agent() -> None:
    message = msg("and then?", thread_root="$root")
    decision = route(message, thread_senders={ALICE, ROUTER, MIND.user_id})
    assert decision.responders == ("mind",)


def test_thread_of_humans_only_in_multi_agent_room_is_answered_by_nobody() -> None:
    decision = route(msg("hm", thread_root="$root"), thread_senders={ALICE})
    assert decision == Route((), "no agent mentioned")


def test_thread_senders_outside_a_thread_are_ignored() -> None:
    decision = route(msg("hm"), thread_senders={ALICE, CODER.user_id})
    assert decision.responders == ()


# -- rule 5: single-agent room --------------------------------------------------------------------


def test_single_agent_room_is_answered_without_mention() -> None:
    assert route(msg("hi"), ["mind"]) == Route(("mind",), "only agent in room")


def test_single_agent_room_answers_in_a_thread_of_humans_only() -> None:
    decision = route(msg("hm", thread_root="$root"), ["mind"], thread_senders={ALICE})
    assert decision.responders == ("mind",)


def test_single_agent_room_waits_to_be_named_in_a_thread_of_several_humans() -> None:
    # Rule 4 comes before rule 5: once several humans talk in a thread, agents wait.
    message = msg("what do you think, bob?", thread_root="$root")
    decision = route(message, ["mind"], thread_senders={ALICE, BOB, MIND.user_id})
    assert decision.responders == ()


# -- rule 6: otherwise nobody ---------------------------------------------------------------------


def test_multi_agent_room_without_mention_is_answered_by_nobody() -> None:
    assert route(msg("hello everyone")) == Route((), "no agent mentioned")


def test_room_without_agents_is_answered_by_nobody() -> None:
    assert route(msg("@general hi"), []).responders == ()


def test_mention_of_a_human_is_not_an_agent_mention() -> None:
    assert route(msg("@bob hi", mentions={BOB})).responders == ()


# -- authorization --------------------------------------------------------------------------------


def test_default_allowed_users_is_everyone_on_the_own_server() -> None:
    assert default_allowed_users("example.org") == ["@*:example.org"]


def test_server_glob_matches_users_of_that_server() -> None:
    allowed = default_allowed_users("example.org")
    assert is_authorized("@a:example.org", allowed)
    assert is_authorized("@alice.smith_1:example.org", allowed)


@pytest.mark.parametrize(
    "user_id",
    [
        "@a:example.org.evil",
        "@a:evil.example.org",
        "@a:notexample.org",
        "@a:example.orgx",
        "@a:EXAMPLE.ORG",
        "a:example.org",
        "@a:example.org:8448",
    ],
)
def test_server_glob_does_not_match_other_servers(user_id: str) -> None:
    assert not is_authorized(user_id, ["@*:example.org"])


def test_exact_id_matches_only_that_user() -> None:
    allowed = ["@alice:example.org"]
    assert is_authorized("@alice:example.org", allowed)
    assert not is_authorized("@alice2:example.org", allowed)
    assert not is_authorized("@bob:example.org", allowed)


def test_any_of_several_patterns_authorizes() -> None:
    allowed = ["@alice:other.org", "@*:example.org"]
    assert is_authorized("@alice:other.org", allowed)
    assert is_authorized("@bob:example.org", allowed)
    assert not is_authorized("@bob:other.org", allowed)


def test_empty_allow_list_authorizes_nobody() -> None:
    assert not is_authorized("@alice:example.org", [])


def test_server_with_port_needs_its_own_glob() -> None:
    allowed = default_allowed_users("localhost:8008")
    assert is_authorized("@alice:localhost:8008", allowed)
    assert not is_authorized("@alice:localhost", allowed)


# -- sessions -------------------------------------------------------------------------------------


def test_session_ids_separate_room_and_threads() -> None:
    room = session_id_for("general", ROOM, None)
    thread_a = session_id_for("general", ROOM, "$a")
    thread_b = session_id_for("general", ROOM, "$b")
    assert room == "general:!lobby:localhost"
    assert thread_a == "general:!lobby:localhost:$a"
    assert len({room, thread_a, thread_b}) == 3
    assert session_id_for("general", ROOM, "$a") == thread_a
    assert session_id_for("coder", ROOM, "$a") != thread_a
    assert session_id_for("general", "!other:localhost", "$a") != thread_a
