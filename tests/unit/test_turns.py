"""plan_turn: who acts, for whom, where, and when private memory may be recalled (pure)."""

from __future__ import annotations

import pytest

from mindroom.config import parse_config
from mindroom.config.schema import Config
from mindroom.memory.policy.gate import RoomAudience
from mindroom.pipeline.presence import REQUESTER_KEY, resumed_requester
from mindroom.pipeline.routing import Route, RouteKind
from mindroom.pipeline.turns import TeamSpec, TurnPlan, plan_turn

ALICE = "@alice:localhost"
BOB = "@bob:localhost"
ROOM = "!lobby:localhost"

MENTIONED = Route(RouteKind.MENTIONED, ("mind",), "mentioned")
THREAD = Route(RouteKind.THREAD_AGENT, ("mind",), "agent of this thread")
HANDOFF = Route(RouteKind.HANDOFF, ("mind",), "hand-off from general")
ROUTER = Route(RouteKind.ROUTER, ("mind",), "router")
ONLY = Route(RouteKind.ONLY_AGENT, ("mind",), "only agent in room")


@pytest.fixture
def config() -> Config:
    return parse_config(
        """
models:
  default: {provider: openai, id: m, base_url: "http://127.0.0.1:9/v1", api_key: x}
agents:
  general: {role: Helps., rooms: [lobby]}
  coder: {role: Codes., rooms: [lobby]}
  mind: {role: Companion., rooms: [lobby], private: {per: user}}
  roomy: {role: Room mode., rooms: [lobby], private: {per: user}, thread_mode: room}
teams:
  crew: {agents: [general, coder], rooms: [lobby]}
""",
        "config.yaml",
    )


def plan(
    config: Config,
    *,
    agent: str = "mind",
    route: Route = MENTIONED,
    requester: str = ALICE,
    thread_root: str | None = None,
    room_humans: tuple[str, ...] = (ALICE,),
    audience: RoomAudience | None = None,
    team: TeamSpec | None = None,
    generation: int = 0,
) -> TurnPlan:
    return plan_turn(
        config,
        agent=agent,
        route=route,
        room_id=ROOM,
        event_id="$event",
        thread_root=thread_root,
        requester=requester,
        room_humans=room_humans,
        audience=audience or RoomAudience.private_to(ALICE),
        team=team,
        generation=generation,
    )


def test_a_private_companion_keeps_one_session_per_person_in_one_thread(config: Config) -> None:
    alice = plan(config, thread_root="$root", requester=ALICE)
    bob = plan(config, thread_root="$root", requester=BOB)
    assert alice.thread_root == bob.thread_root == "$root"
    assert alice.session_id != bob.session_id
    assert alice.private
    assert alice.scope_requester == ALICE
    assert bob.scope_requester == BOB


def test_a_shared_agent_keeps_one_session_per_thread_for_everyone(config: Config) -> None:
    alice = plan(config, agent="general", thread_root="$root", requester=ALICE)
    bob = plan(config, agent="general", thread_root="$root", requester=BOB)
    assert alice.session_id == bob.session_id
    assert not alice.private
    assert alice.scope_requester is None


def test_an_ad_hoc_team_with_a_private_member_is_per_person(config: Config) -> None:
    team = TeamSpec.ad_hoc(config, ("general", "mind"))
    alice = plan(config, agent="general", team=team, requester=ALICE)
    bob = plan(config, agent="general", team=team, requester=BOB)
    assert alice.private
    assert alice.owner == team.name
    assert alice.session_id != bob.session_id


def test_a_configured_team_of_shared_agents_is_shared(config: Config) -> None:
    alice = plan(config, agent="crew", route=Route(RouteKind.MENTIONED, ("crew",), "m"))
    assert alice.team is not None
    assert alice.team.name == "crew"
    assert not alice.private
    assert not alice.streaming


def test_new_conversation_generations_give_new_sessions(config: Config) -> None:
    assert plan(config, generation=1).session_id != plan(config, generation=0).session_id


ALL_ROUTES = [MENTIONED, THREAD, HANDOFF, ROUTER, ONLY]
GROUP = RoomAudience.shared(frozenset({ALICE, BOB}))


@pytest.mark.parametrize("route", ALL_ROUTES)
def test_private_memory_is_used_in_the_requesters_own_room_whatever_the_route(
    config: Config, route: Route
) -> None:
    p = plan(config, route=route, audience=RoomAudience.private_to(ALICE))
    assert p.private_recall


@pytest.mark.parametrize("route", ALL_ROUTES)
@pytest.mark.parametrize("thread_root", [None, "$t"])
def test_private_memory_is_never_used_where_others_can_read_whatever_the_route(
    config: Config, route: Route, thread_root: str | None
) -> None:
    p = plan(config, route=route, thread_root=thread_root, room_humans=(ALICE, BOB), audience=GROUP)
    assert p.private
    assert not p.private_recall


def test_a_room_only_someone_else_can_read_is_not_the_requesters(config: Config) -> None:
    p = plan(config, requester=ALICE, audience=RoomAudience.private_to(BOB))
    assert not p.private_recall


def test_room_mode_in_a_group_room_never_uses_private_memory(config: Config) -> None:
    handed = plan(config, agent="roomy", route=HANDOFF, room_humans=(ALICE, BOB), audience=GROUP)
    asked = plan(config, agent="roomy", route=MENTIONED, room_humans=(ALICE, BOB), audience=GROUP)
    assert handed.thread_root is None
    assert not handed.private_recall
    assert not asked.private_recall


def test_shared_agents_are_never_gated(config: Config) -> None:
    p = plan(
        config,
        agent="general",
        route=HANDOFF,
        thread_root="$t",
        room_humans=(ALICE, BOB),
        audience=GROUP,
    )
    assert p.private_recall


def test_a_resumed_hand_off_is_for_the_person_recorded_in_the_ledger() -> None:
    source = {"sender": "@mindroom_general:localhost", REQUESTER_KEY: ALICE}
    assert resumed_requester(source, "@mindroom_general:localhost") == ALICE
    assert resumed_requester({"sender": BOB}, BOB) == BOB  # a person's own message
    assert resumed_requester({REQUESTER_KEY: 42}, BOB) == BOB  # a damaged record
