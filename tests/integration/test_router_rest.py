"""The router rests where an agent hears: it polls instead of long-polling, and loses nothing.

Every event in a room wakes the long-poll of every account in it, and the homeserver pays for
each wake; the intake needs each event once. So where every room of the router has a listening
agent of this process in it, the router only polls (``REST_POLL_S``). These tests, on a real
Synapse with the bot in-process, hold what that must not cost:

* it still speaks (a command), and in an encrypted room a person who joined while it rested can
  read what it says (it catches up before it sends);
* an invite to a room of its own still reaches it, and there it listens again;
* when the agent leaves, or is kicked, the router is nudged awake at once, not at its next
  poll (and a kicked account no longer counts the room as its own);
* a room's audience, and a command's answer, never count as private to one person because
  the resting router has not seen the others yet;
* its questions (a forget listing) are neither held up by a reaction its catch-up hears as it
  posts one, nor answered late: the agent that hears the ✅ answers as the router, which
  still catches up first.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nio
import pytest
import pytest_asyncio

from mindroom.adapters.matrix import client as matrix_client
from mindroom.adapters.matrix.client import MatrixAccount
from mindroom.adapters.matrix.events import IncomingReaction
from mindroom.adapters.matrix.homeserver import EmbeddedHomeserver
from mindroom.pipeline import prompts
from tests.integration.test_reload import write
from tests.support.harness import (
    DECRYPTED,
    BotHarness,
    Human,
    config_text,
    joined,
    relation,
    unique,
)
from tests.support.scripted_model import ScriptedModel
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]


def from_sender(sender: str, room_id: str, words: str):  # noqa: ANN201 - a predicate
    def matches(event: dict) -> bool:  # type: ignore[type-arg]
        body = (event.get("content") or {}).get("body") or ""
        return (
            event.get("sender") == sender
            and event.get("room_id") == room_id
            and event.get("type") == "m.room.message"
            and words in body
        )

    return matches


async def leave_earlier_rooms(bot: BotHarness, *keep: str) -> None:
    """The router of the session's homeserver is in the rooms of earlier tests, some without
    an agent (where it must not rest): it leaves all but ``keep``."""
    assert bot.bot is not None
    assert bot.bot.router is not None
    for room_id in bot.bot.router.joined_rooms() - set(keep):
        await bot.bot.router.leave(room_id)


async def started(bot: BotHarness, model: ScriptedModel, human: Human) -> tuple[str, str]:
    """The bot with ``general`` in a configured room the person joined, the router resting:
    (the room, the router's user)."""
    model.default = "ok"
    lobby = unique("lobby")
    room_id = await bot.start_in_room(
        config_text(model.base_url, {"general": {"rooms": [lobby]}}), lobby, human
    )
    assert bot.bot is not None
    assert bot.bot.router is not None
    router = bot.bot.router
    await leave_earlier_rooms(bot, room_id)
    await human.send(room_id, "!help")  # ends the router's long-poll of before it left them
    await wait_until(lambda: router.resting, "the router rests")
    return room_id, router.user_id


async def resting_in_a_room_of(
    bot: BotHarness, model: ScriptedModel, person: Human, **create: Any
) -> str:
    """The bot with ``general``; ``person`` makes a room (``create``: room_create's options)
    with general and the router in it; the router rests once general answered there: the
    room."""
    model.default = "ok"
    await bot.start(config_text(model.base_url, {"general": {"rooms": []}}))
    assert bot.bot is not None
    assert bot.bot.router is not None
    router, general = bot.bot.router, bot.bot.agents["general"].user_id
    created = await person.client.room_create(invite=[general, router.user_id], **create)
    assert isinstance(created, nio.RoomCreateResponse), created
    room_id = created.room_id
    await person.wait_for(joined(general, room_id))
    await person.wait_for(joined(router.user_id, room_id))
    await leave_earlier_rooms(bot, room_id)
    asked = await person.send(room_id, "hello")  # also ends the router's last long-poll
    await person.wait_for_reply(room_id, asked)
    await wait_until(lambda: router.resting, "the router rests")
    return room_id


async def resting_in_an_encrypted_room(
    bot: BotHarness, model: ScriptedModel, alice: Human
) -> tuple[str, MatrixAccount, MatrixAccount]:
    """:func:`resting_in_a_room_of` an encrypted room of ``alice``: (the room, the router,
    general)."""
    room_id = await resting_in_a_room_of(
        bot, model, alice, initial_state=[nio.EnableEncryptionBuilder().as_dict()]
    )
    assert bot.bot is not None
    assert bot.bot.router is not None
    return room_id, bot.bot.router, bot.bot.agents["general"]


async def joins_unseen_by_the_router(
    alice: Human, carol: Human, room_id: str, router: MatrixAccount, agent: MatrixAccount
) -> None:
    """``alice`` brings ``carol`` into the room: the agent sees her, the resting router not."""
    await alice.client.room_invite(room_id, carol.user_id)
    await carol.join(room_id)
    await carol.wait_for(joined(carol.user_id, room_id))  # her client knows the room
    await wait_until(lambda: carol.user_id in agent.room_members(room_id), "agent sees carol")
    assert carol.user_id not in router.room_members(room_id)  # the router rests unaware


@pytest_asyncio.fixture
async def alice(synapse: EmbeddedHomeserver, tmp_path: Path) -> AsyncIterator[Human]:
    """A person whose client encrypts, as Element does."""
    person = await Human.create(synapse, keys=tmp_path / "alice")
    yield person
    await person.close()


@pytest_asyncio.fixture
async def carol(synapse: EmbeddedHomeserver, tmp_path: Path) -> AsyncIterator[Human]:
    """Someone else whose client encrypts."""
    person = await Human.create(synapse, keys=tmp_path / "carol")
    yield person
    await person.close()


@pytest_asyncio.fixture
async def closed_room(
    bot: BotHarness, model: ScriptedModel, human: Human, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, MatrixAccount, MatrixAccount]:
    """:func:`resting_in_a_room_of` an invite-only room of ``human``, the router's view kept
    as it rested (no poll comes): (the room, the router, general)."""
    monkeypatch.setattr(matrix_client, "REST_POLL_S", 3600.0)
    room_id = await resting_in_a_room_of(bot, model, human, preset=nio.RoomPreset.private_chat)
    assert bot.bot is not None
    assert bot.bot.router is not None
    return room_id, bot.bot.router, bot.bot.agents["general"]


async def a_newcomer_it_missed(
    synapse: EmbeddedHomeserver,
    person: Human,
    room_id: str,
    router: MatrixAccount,
    general: MatrixAccount,
) -> Human:
    """Someone ``person`` brings into the room, whom general sees and the resting router not."""
    newcomer = await Human.create(synapse)
    await person.client.room_invite(room_id, newcomer.user_id)
    await newcomer.join(room_id)
    await wait_until(lambda: newcomer.user_id in general.room_members(room_id), "general sees it")
    assert newcomer.user_id not in router.room_members(room_id)  # the router rests unaware
    return newcomer


async def test_a_resting_router_still_answers_and_an_invite_to_its_own_room_wakes_it(
    bot: BotHarness, model: ScriptedModel, human: Human
) -> None:
    room_id, router_user = await started(bot, model, human)
    assert bot.bot is not None
    assert bot.bot.router is not None
    router = bot.bot.router

    asked = await human.send(room_id, "hello there")  # the agent hears and answers
    reply = await human.wait_for_reply(room_id, asked)
    assert reply["sender"] == bot.bot.agents["general"].user_id
    await human.send(room_id, "!agents")  # the router's to answer: it speaks while resting
    await human.wait_for(from_sender(router_user, room_id, "general"))
    assert router.resting

    # a room of its own: the invite reaches it by its poll, and there nobody else hears
    created = await human.client.room_create(invite=[router_user], name=unique("own"))
    assert isinstance(created, nio.RoomCreateResponse), created
    await human.wait_for(joined(router_user, created.room_id))
    await wait_until(lambda: not router.resting, "the router listens again")
    await human.send(created.room_id, "!help")
    await human.wait_for(from_sender(router_user, created.room_id, "!agents"))


async def test_when_the_agent_leaves_the_router_is_woken_at_once(
    bot: BotHarness, model: ScriptedModel, human: Human, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(matrix_client, "REST_POLL_S", 3600.0)  # only a nudge wakes it now
    room_id, router_user = await started(bot, model, human)
    assert bot.bot is not None
    assert bot.bot.router is not None
    router = bot.bot.router

    await bot.bot.agents["general"].leave(room_id)
    await wait_until(lambda: not router.resting, "the router listens again", timeout=20)
    # the control that it hears the room itself now: nobody else is there to hear this
    await human.send(room_id, "!help")
    await human.wait_for(from_sender(router_user, room_id, "!agents"), timeout=20)


async def test_a_person_who_joined_while_the_router_rested_can_read_what_it_says(
    bot: BotHarness,
    model: ScriptedModel,
    monkeypatch: pytest.MonkeyPatch,
    alice: Human,
    carol: Human,
) -> None:
    monkeypatch.setattr(matrix_client, "REST_POLL_S", 3600.0)  # its view stays as it rested
    room_id, router, agent = await resting_in_an_encrypted_room(bot, model, alice)
    await alice.send(room_id, "!agents")  # the positive control: alice reads the router
    first = await alice.wait_for(from_sender(router.user_id, room_id, "general"))
    assert first.get(DECRYPTED)

    await joins_unseen_by_the_router(alice, carol, room_id, router, agent)
    await carol.send(room_id, "!agents")
    said = await carol.wait_for(from_sender(router.user_id, room_id, "general"))
    assert said.get(DECRYPTED)


async def test_a_room_is_not_private_to_one_person_because_the_resting_router_lags(
    bot: BotHarness,
    synapse: EmbeddedHomeserver,
    human: Human,
    closed_room: tuple[str, MatrixAccount, MatrixAccount],
) -> None:
    room_id, router, general = closed_room
    assert bot.bot is not None
    presence = bot.bot
    await wait_until(
        lambda: all(
            a.only_with(room_id, human.user_id, presence.own_user_ids()) for a in (router, general)
        ),
        "both accounts see the person's closed room",
    )
    # the positive control: the room is the person's alone, as every account sees it
    assert presence.audience(room_id, human.user_id).only_person == human.user_id

    bob = await a_newcomer_it_missed(synapse, human, room_id, router, general)
    try:
        assert router.only_with(room_id, human.user_id, presence.own_user_ids())  # it lags
        audience = presence.audience(room_id, human.user_id)
        assert audience.only_person is None
        assert bob.user_id in audience.readers
    finally:
        await bob.close()


async def test_a_kicked_agent_forgets_the_room_and_the_router_is_woken_at_once(
    bot: BotHarness, model: ScriptedModel, human: Human, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(matrix_client, "REST_POLL_S", 3600.0)  # only a nudge wakes it now
    room_id = await resting_in_a_room_of(bot, model, human)  # the person made it: an admin
    assert bot.bot is not None
    assert bot.bot.router is not None
    router, general = bot.bot.router, bot.bot.agents["general"]

    kicked = await human.client.room_kick(room_id, general.user_id, reason="enough")
    assert isinstance(kicked, nio.RoomKickResponse), kicked
    await wait_until(lambda: room_id not in general.joined_rooms(), "general knows it left")
    await wait_until(lambda: not router.resting, "the router listens again", timeout=20)
    assert bot.bot.room_agents(room_id) == []
    await human.send(room_id, "!help")  # only the router hears it now
    await human.wait_for(from_sender(router.user_id, room_id, "!agents"), timeout=20)


async def test_a_memory_link_is_not_given_where_the_resting_router_missed_a_newcomer(
    synapse: EmbeddedHomeserver, human: Human, closed_room: tuple[str, MatrixAccount, MatrixAccount]
) -> None:
    room_id, router, general = closed_room
    # the positive control: the person's closed room answers with the private line
    await human.send(room_id, "!memory link")
    alone = await human.wait_for(from_sender(router.user_id, room_id, "what I know about you"))
    assert "only in a direct message" not in alone["content"]["body"]

    bob = await a_newcomer_it_missed(synapse, human, room_id, router, general)
    try:
        asked = await human.send(room_id, "!memory link")
        refused = await human.wait_for(
            lambda e: relation(e).get("m.in_reply_to", {}).get("event_id") == asked
        )
        assert refused["sender"] == router.user_id
        assert "only in a direct message" in refused["content"]["body"]
    finally:
        await bob.close()


async def test_a_message_only_the_resting_router_can_decrypt_is_answered_not_asked_again(
    bot: BotHarness, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch, alice: Human
) -> None:
    """The agent cannot decrypt it (the person's client keeps the key from its device): before
    it asks the person to send it again, the resting router is nudged to poll, decrypts it,
    and the agent answers it, with no notice."""
    monkeypatch.setattr(matrix_client, "REST_POLL_S", 3600.0)  # only a nudge makes it poll
    room_id = await resting_in_a_room_of(
        bot, model, alice, initial_state=[nio.EnableEncryptionBuilder().as_dict()]
    )
    assert bot.bot is not None
    general, tasks = bot.bot.agents["general"], bot.bot.tasks
    device = alice.client.device_store[general.user_id][general.client.device_id]
    alice.client.blacklist_device(device)  # no room key for the agent from now on
    alice.client.invalidate_outbound_session(room_id)
    asked = await alice.send(room_id, "only the router can read this")
    reply = await alice.wait_for_reply(room_id, asked, timeout=30)
    assert reply["sender"] == general.user_id
    assert reply.get(DECRYPTED)
    # the agent's ask-again waited out its grace: whatever it would have posted is posted
    await wait_until(lambda: tasks.jobs("undecryptable:"), "the agent could not")
    await wait_until(lambda: not tasks.jobs("undecryptable:"), "its grace ended")
    await bot.settle(alice, room_id)
    notices = [
        e
        for e in alice.messages(room_id, general.user_id)
        if relation(e).get("m.in_reply_to", {}).get("event_id") == asked
        and e["event_id"] != reply["event_id"]
    ]
    assert notices == []


async def test_a_reload_that_removes_the_rooms_agent_wakes_the_router_there(
    bot: BotHarness, model: ScriptedModel, human: Human, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A config reload during the rest: the only agent of the room is removed (it leaves), and
    the router, woken by that and not by a poll, hears the room from then on."""
    monkeypatch.setattr(matrix_client, "REST_POLL_S", 3600.0)  # only a nudge wakes it now
    room_id, router_user = await started(bot, model, human)
    assert bot.bot is not None
    assert bot.bot.router is not None
    router, agents = bot.bot.router, bot.bot.agents

    doc = json.loads((bot.storage / "config.yaml").read_text())
    doc["agents"] = {"elsewhere": {"rooms": []}}  # general goes; the room keeps no agent
    write(bot, doc)
    await wait_until(lambda: "general" not in agents, "the reload removed general")
    await wait_until(lambda: not router.resting, "the router listens again", timeout=20)
    await human.send(room_id, "!help")
    await human.wait_for(from_sender(router_user, room_id, "!agents"), timeout=20)


async def test_a_thumbs_up_the_router_catches_up_on_while_posting_a_forget_listing_holds_nothing(
    bot: BotHarness, model: ScriptedModel, human: Human, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The resting router catches up before it sends, in the sending task. A 👍 (a yes) on
    some other message, heard there while it posts a forget listing, once waited for that
    very posting (a reaction to a prompt not recorded yet waits for it): the listing came
    :data:`POSTING_WAIT_S` late. Here that wait is an hour, so it would not come at all."""
    monkeypatch.setattr(matrix_client, "REST_POLL_S", 3600.0)  # no poll: only its catch-up
    monkeypatch.setattr(prompts, "POSTING_WAIT_S", 3600.0)
    room_id, router_user = await started(bot, model, human)
    assert bot.bot is not None
    assert bot.bot.router is not None
    router, desk = bot.bot.router, bot.bot.prompts
    memory = bot.bot.memories.for_agent("general")
    memory.add_sync(f"{human.user_id} keeps bees in the garden", actor="test")
    heard: list[tuple[str, str, bool]] = []  # (account, key, while a listing was posted)
    on_reaction = desk.on_reaction

    async def spied(account: MatrixAccount, reaction: IncomingReaction) -> None:
        heard.append((account.name, reaction.key, bool(desk._posting.get(reaction.room_id))))
        await on_reaction(account, reaction)

    monkeypatch.setattr(desk, "on_reaction", spied)
    asked = await human.send(room_id, "hello")
    answer = await human.wait_for_reply(room_id, asked)
    await human.react(room_id, answer["event_id"], "👍")
    await wait_until(lambda: ("general", "👍", False) in heard, "general hears the 👍")
    assert router.resting
    assert ("router", "👍", False) not in heard  # it rests: it has not heard it yet
    command = await human.send(room_id, "!memory forget bees")
    listing = await human.wait_for_reply(room_id, command, timeout=30)

    assert listing["sender"] == router_user
    assert "I would forget 1 thing" in listing["content"]["body"]
    # the control: the router heard the 👍 in its catch-up, as the listing was being posted
    assert ("router", "👍", True) in heard
    assert desk.waiting == 0

    # a ✅ to the listing: general hears it at once, the resting router would only at its poll
    await human.react(room_id, listing["event_id"], "✅")
    confirmed = await human.wait_for_reply(room_id, listing["event_id"], timeout=30)
    assert confirmed["sender"] == router_user  # answered as the router, which asked
    assert confirmed["content"]["body"].startswith("Forgot 1 thing.")


async def test_a_newcomer_reads_the_routers_answer_to_a_check_mark_the_agent_heard(
    bot: BotHarness,
    model: ScriptedModel,
    monkeypatch: pytest.MonkeyPatch,
    alice: Human,
    carol: Human,
) -> None:
    """General hears the ✅ to the router's forget listing and answers it as the router, from
    general's own sync. The router, resting, must still catch up before it speaks there: a
    person who joined meanwhile can read the answer in the encrypted room."""
    monkeypatch.setattr(matrix_client, "REST_POLL_S", 3600.0)  # its view stays as it rested
    room_id, router, agent = await resting_in_an_encrypted_room(bot, model, alice)
    assert bot.bot is not None
    bot.bot.memories.for_agent("general").add_sync(
        f"{alice.user_id} keeps bees in the garden", actor="test"
    )
    command = await alice.send(room_id, "!memory forget bees")
    listing = await alice.wait_for_reply(room_id, command, timeout=30)
    assert listing["sender"] == router.user_id
    assert listing.get(DECRYPTED)  # the control: alice reads the router

    await joins_unseen_by_the_router(alice, carol, room_id, router, agent)
    await alice.react(room_id, listing["event_id"], "✅")
    confirmed = await carol.wait_for_reply(room_id, listing["event_id"], timeout=30)

    assert confirmed["sender"] == router.user_id
    assert confirmed.get(DECRYPTED)
    assert confirmed["content"]["body"].startswith("Forgot 1 thing.")
