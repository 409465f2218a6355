"""Unit tests for who answers a message (routing), who may talk (authorization), sessions."""

from __future__ import annotations

from collections.abc import Collection, Sequence

import pytest

from mindroom.adapters.agno.runner import session_id_for
from mindroom.adapters.matrix.events import AgentIdentity, IncomingMessage
from mindroom.authorization import default_allowed_users, is_authorized
from mindroom.pipeline.commands import parse_command
from mindroom.pipeline.routing import (
    Route,
    RouteKind,
    fallback_choice,
    route_handoff,
    route_message,
)

ROOM = "!lobby:localhost"
ROUTER = "@mindroom_router:localhost"
ALICE = "@alice:localhost"
BOB = "@bob:localhost"
GENERAL = AgentIdentity("general", "@mindroom_general:localhost", "General")
CODER = AgentIdentity("coder", "@mindroom_coder:localhost", "Coder")
MIND = AgentIdentity("mind", "@mindroom_mind:localhost", "Mind")
IDENTITIES = [GENERAL, CODER, MIND]
OWN = {GENERAL.user_id, CODER.user_id, MIND.user_id, ROUTER}
ROUTER_CHOOSES = "no mention: the router chooses"


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
    assert decision == Route(RouteKind.IGNORED, reason="edit")


def test_edit_in_a_thread_of_one_agent_is_never_answered() -> None:
    message = msg("* fixed", is_edit=True, thread_root="$root")
    decision = route(message, thread_senders={ALICE, GENERAL.user_id})
    assert decision.responders == ()


def test_notice_is_never_answered() -> None:
    decision = route(msg("@general status", msgtype="m.notice"), ["general"])
    assert decision == Route(RouteKind.IGNORED, reason="notice")


def test_emote_in_single_agent_room_is_answered() -> None:
    assert route(msg("waves", msgtype="m.emote"), ["general"]).responders == ("general",)


# -- rule 2: authorization ------------------------------------------------------------------------


def test_unauthorized_sender_is_never_answered_even_when_mentioning() -> None:
    decision = route(msg("@general hi", sender="@eve:evil.org"), ["general"], authorized=False)
    assert decision == Route(RouteKind.IGNORED, reason="sender not authorized")


def test_unauthorized_sender_is_not_answered_in_an_agents_thread() -> None:
    message = msg("more", sender="@eve:evil.org", thread_root="$root")
    decision = route(message, authorized=False, thread_senders={"@eve:evil.org", CODER.user_id})
    assert decision.responders == ()


# -- rule 3: commands ----------------------------------------------------------------------------


@pytest.mark.parametrize("body", ["!help", "!new", "!agents", "!HELP me", "!nonsense"])
def test_message_starting_with_bang_from_an_authorized_human_is_a_command(body: str) -> None:
    assert route(msg(body)) == Route(RouteKind.COMMAND, reason="command")


def test_command_in_a_single_agent_room_goes_to_the_router_not_the_agent() -> None:
    assert route(msg("!help"), ["general"]) == Route(RouteKind.COMMAND, reason="command")


def test_command_that_mentions_an_agent_is_still_a_command() -> None:
    decision = route(msg("!help @coder", mentions={CODER.user_id}))
    assert decision == Route(RouteKind.COMMAND, reason="command")


def test_command_in_an_agents_thread_is_a_command() -> None:
    message = msg("!new", thread_root="$root")
    decision = route(message, thread_senders={ALICE, CODER.user_id})
    assert decision == Route(RouteKind.COMMAND, reason="command")


def test_command_from_an_unauthorized_sender_is_ignored() -> None:
    decision = route(msg("!help", sender="@eve:evil.org"), authorized=False)
    assert decision == Route(RouteKind.IGNORED, reason="sender not authorized")
    assert not decision.command


@pytest.mark.parametrize("sender", [GENERAL.user_id, ROUTER])
def test_command_from_an_own_account_is_ignored(sender: str) -> None:
    decision = route(msg("!help", sender=sender))
    assert decision == Route(RouteKind.IGNORED, reason="own account")
    assert not decision.command


def test_edited_command_is_not_run_again() -> None:
    decision = route(msg("!new", is_edit=True))
    assert decision == Route(RouteKind.IGNORED, reason="edit")


def test_command_sent_as_a_notice_is_ignored() -> None:
    decision = route(msg("!help", msgtype="m.notice"))
    assert decision == Route(RouteKind.IGNORED, reason="notice")


def test_bang_inside_the_text_is_not_a_command() -> None:
    decision = route(msg("hi!help"), ["general"])
    assert decision == Route(RouteKind.ONLY_AGENT, ("general",), "only agent in room")


@pytest.mark.parametrize("body", ["! hello there", "!"])
def test_message_routed_as_a_command_is_one_the_command_parser_accepts(body: str) -> None:
    decision = route(msg(body), ["general"])
    assert decision.responders or parse_command(body) is not None


# -- rule 4: mentions -----------------------------------------------------------------------------


def test_mention_picks_only_the_mentioned_agent_among_several() -> None:
    decision = route(msg("@coder fix this"))
    assert decision == Route(RouteKind.MENTIONED, ("coder",), "mentioned")


def test_several_mentioned_agents_all_answer_in_config_order() -> None:
    assert route(msg("@mind and @general?")).responders == ("general", "mind")


def test_mention_by_m_mentions_without_body_text_is_answered() -> None:
    decision = route(msg("look at this", mentions={MIND.user_id}))
    assert decision.responders == ("mind",)


def test_mention_of_an_agent_not_in_the_room_is_not_answered_by_another_agent() -> None:
    decision = route(msg("@coder hi"), ["general", "mind"])
    assert decision.kind is RouteKind.MENTIONED_ABSENT
    assert decision.responders == ()
    assert decision.absent == ("coder",)


def test_mention_of_an_absent_agent_in_a_single_agent_room_gets_the_absent_notice() -> None:
    decision = route(msg("@coder hi"), ["general"])
    assert decision.kind is RouteKind.MENTIONED_ABSENT
    assert decision.absent == ("coder",)


def test_mention_of_an_absent_agent_in_an_agents_thread_gets_the_absent_notice() -> None:
    message = msg("@coder hi", thread_root="$root")
    decision = route(message, ["general"], thread_senders={ALICE, GENERAL.user_id})
    assert (decision.kind, decision.absent) == (RouteKind.MENTIONED_ABSENT, ("coder",))


def test_absent_agent_mentioned_beside_a_present_one_leaves_the_present_one_to_answer() -> None:
    decision = route(msg("@coder @general hi"), ["general"])
    assert decision == Route(RouteKind.MENTIONED, ("general",), "mentioned")


def test_absent_mention_from_an_unauthorized_sender_is_ignored() -> None:
    assert route(msg("@coder hi"), ["general"], authorized=False).kind is RouteKind.IGNORED


def test_only_mentioned_agents_present_in_the_room_answer() -> None:
    assert route(msg("@coder @mind hi"), ["general", "mind"]).responders == ("mind",)


def test_mentioned_agent_beats_thread_continuity() -> None:
    message = msg("@coder what do you think?", thread_root="$root")
    decision = route(message, thread_senders={ALICE, GENERAL.user_id})
    assert decision == Route(RouteKind.MENTIONED, ("coder",), "mentioned")


def test_mention_is_answered_in_a_thread_with_several_humans() -> None:
    message = msg("@general?", thread_root="$root")
    decision = route(message, thread_senders={ALICE, BOB, CODER.user_id})
    assert decision.responders == ("general",)


def test_mention_in_single_agent_room_gives_mentioned_reason() -> None:
    assert route(msg("@general hi"), ["general"]) == Route(
        RouteKind.MENTIONED, ("general",), "mentioned"
    )


# -- rule 5: thread continuity --------------------------------------------------------------------


def test_thread_with_exactly_one_agent_is_answered_by_it_without_mention() -> None:
    message = msg("and then?", thread_root="$root")
    decision = route(message, thread_senders={ALICE, CODER.user_id})
    assert decision == Route(RouteKind.THREAD_AGENT, ("coder",), "agent of this thread")


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


def test_thread_with_two_agents_and_no_mention_asks_the_router() -> None:
    message = msg("and then?", thread_root="$root")
    decision = route(message, thread_senders={ALICE, CODER.user_id, GENERAL.user_id})
    assert decision == Route(RouteKind.ROUTER, ("general", "coder", "mind"), ROUTER_CHOOSES)


def test_thread_agent_that_left_the_room_does_not_continue_the_thread_the_router_chooses() -> None:
    message = msg("and then?", thread_root="$root")
    decision = route(message, ["general", "mind"], thread_senders={ALICE, CODER.user_id})
    assert decision == Route(RouteKind.ROUTER, ("general", "mind"), ROUTER_CHOOSES)


def test_thread_agent_counts_even_if_another_agent_already_left() -> None:
    message = msg("and then?", thread_root="$root")
    senders = {ALICE, CODER.user_id, GENERAL.user_id}
    assert route(message, ["coder", "mind"], thread_senders=senders).responders == ("coder",)


def test_router_in_a_thread_is_not_a_human_nor_an_agent() -> None:
    message = msg("and then?", thread_root="$root")
    decision = route(message, thread_senders={ALICE, ROUTER, MIND.user_id})
    assert decision.responders == ("mind",)


def test_thread_of_one_human_only_in_multi_agent_room_asks_the_router() -> None:
    decision = route(msg("hm", thread_root="$root"), thread_senders={ALICE})
    assert decision == Route(RouteKind.ROUTER, ("general", "coder", "mind"), ROUTER_CHOOSES)


def test_thread_senders_outside_a_thread_are_ignored_and_the_router_chooses() -> None:
    decision = route(msg("hm"), thread_senders={ALICE, CODER.user_id})
    assert decision == Route(RouteKind.ROUTER, ("general", "coder", "mind"), ROUTER_CHOOSES)


# -- rule 6: single-agent room --------------------------------------------------------------------


def test_single_agent_room_is_answered_without_mention() -> None:
    assert route(msg("hi"), ["mind"]) == Route(
        RouteKind.ONLY_AGENT, ("mind",), "only agent in room"
    )


def test_single_agent_room_answers_in_a_thread_of_humans_only() -> None:
    decision = route(msg("hm", thread_root="$root"), ["mind"], thread_senders={ALICE})
    assert decision.responders == ("mind",)


def test_single_agent_room_waits_to_be_named_in_a_thread_of_several_humans() -> None:
    # Rule 5 comes before rule 6: once several humans talk in a thread, agents wait.
    message = msg("what do you think, bob?", thread_root="$root")
    decision = route(message, ["mind"], thread_senders={ALICE, BOB, MIND.user_id})
    assert decision.responders == ()


# -- rule 7: several agents and no mention: the router chooses ------------------------------------


def test_multi_agent_room_without_mention_asks_the_router() -> None:
    decision = route(msg("hello everyone"))
    assert decision == Route(RouteKind.ROUTER, ("general", "coder", "mind"), ROUTER_CHOOSES)


def test_router_candidates_are_the_room_agents_in_the_given_order() -> None:
    decision = route(msg("hello"), ["mind", "general"])
    assert decision.responders == ("mind", "general")
    assert decision.ask_router


def test_mention_does_not_ask_the_router() -> None:
    assert not route(msg("@coder fix this")).ask_router


def test_single_agent_room_does_not_ask_the_router() -> None:
    assert not route(msg("hi"), ["general"]).ask_router


def test_mention_of_a_human_is_not_an_agent_mention_so_the_router_chooses() -> None:
    decision = route(msg("@bob hi", mentions={BOB}))
    assert decision == Route(RouteKind.ROUTER, ("general", "coder", "mind"), ROUTER_CHOOSES)


# -- rule 8: otherwise nobody ---------------------------------------------------------------------


def test_room_without_agents_is_answered_by_nobody() -> None:
    assert route(msg("hi"), []) == Route(RouteKind.IGNORED, reason="no agent in room")


def test_mention_in_a_room_without_agents_names_the_absent_agent() -> None:
    assert route(msg("@general hi"), []).absent == ("general",)


# -- hand-off between agents ----------------------------------------------------------------------


def handoff(
    text: str,
    *,
    from_agent: str = "general",
    room_agents: Sequence[str] = ("general", "coder", "mind"),
    hops: int = 1,
    max_hops: int = 3,
) -> Route:
    return route_handoff(
        text,
        from_agent=from_agent,
        room_agents=room_agents,
        identities=IDENTITIES,
        hops=hops,
        max_hops=max_hops,
    )


def test_agent_naming_another_agent_hands_off_to_it() -> None:
    decision = handoff("@coder can you write the script?")
    assert decision == Route(RouteKind.HANDOFF, ("coder",), "hand-off from general")


def test_agent_naming_another_by_full_user_id_hands_off_to_it() -> None:
    assert handoff("over to @mindroom_mind:localhost").responders == ("mind",)


def test_agent_naming_itself_hands_off_to_nobody() -> None:
    assert handoff("as @general I think so", from_agent="general") == Route(
        RouteKind.IGNORED, reason="no hand-off"
    )


def test_agent_text_without_a_mention_hands_off_to_nobody() -> None:
    assert handoff("the coder agent could help") == Route(RouteKind.IGNORED, reason="no hand-off")


def test_hand_off_to_an_agent_not_in_the_room_goes_to_nobody() -> None:
    decision = handoff("@coder please", room_agents=("general", "mind"))
    assert decision == Route(RouteKind.IGNORED, reason="no hand-off")


def test_hand_off_is_not_a_router_question_nor_a_command() -> None:
    decision = handoff("@mind?")
    assert not decision.ask_router
    assert not decision.command


def test_hand_off_below_the_hop_cap_goes_through() -> None:
    assert handoff("@coder", hops=2, max_hops=3).responders == ("coder",)


@pytest.mark.parametrize(("hops", "max_hops"), [(3, 3), (4, 3), (0, 0)])
def test_hand_off_at_the_hop_cap_goes_to_nobody(hops: int, max_hops: int) -> None:
    decision = handoff("@coder your turn", hops=hops, max_hops=max_hops)
    assert decision.responders == ()
    assert "cap" in decision.reason
    assert str(max_hops) in decision.reason


def test_several_agents_named_in_a_hand_off_keep_config_order() -> None:
    decision = handoff("@mind and @coder, both of you", from_agent="general")
    assert decision.responders == ("coder", "mind")


def test_several_named_including_itself_hand_off_to_the_others_only() -> None:
    assert handoff("@coder @general @mind", from_agent="coder").responders == ("general", "mind")


def test_fallback_choice_is_the_first_candidate() -> None:
    assert fallback_choice(("coder", "general", "mind")) == "coder"
    assert fallback_choice(["mind"]) == "mind"


def test_fallback_choice_is_deterministic() -> None:
    candidates = ("general", "coder", "mind")
    assert {fallback_choice(candidates) for _ in range(5)} == {"general"}


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
