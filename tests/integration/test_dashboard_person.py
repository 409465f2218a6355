"""A person's own view: ``!memory`` in a DM with a companion sends a personal link;
it opens that person's private memories only, to read, correct, delete and export. Tested at
the intersections: two people with one companion, the admin's token against ``/me``, a link
changed by hand or expired, the link asked for in a shared room."""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, quote, urlsplit

import aiohttp
import nio
import pytest
import pytest_asyncio

from mindroom.dashboard.person import person_link
from mindroom.dashboard.server import Dashboard
from mindroom.memory.files.store import FileMemory
from mindroom.memory.policy.access import CategoryAccess
from mindroom.memory.policy.gate import RoomAudience
from mindroom.memory.policy.view import AgentView
from tests.support.dashboard import open_link, signed_in, start_dashboard
from tests.support.harness import BotHarness, Human, config_text, joined
from tests.support.scripted_model import ScriptedModel

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

ALICE, BOB = "@alice:localhost", "@bob:localhost"


@pytest_asyncio.fixture
async def companion(bot: BotHarness, model: ScriptedModel) -> AsyncIterator[Dashboard]:
    """A running bot with a private companion ``mind`` that remembers Alice and Bob, and its
    dashboard."""
    await bot.start(config_text(model.base_url, {"mind": {"private": {"per": "user"}}}))
    assert bot.bot is not None
    for who, fact in ((ALICE, "Alice is afraid of spiders"), (BOB, "Bob owes Carol ten euros")):
        memory = bot.bot.memories.for_agent("mind", requester=who)
        assert isinstance(memory, FileMemory)
        memory.add_sync(fact, actor="test")
    dash = await start_dashboard(bot)
    yield dash
    await dash.stop()


def as_person(dash: Dashboard, user: str, now: float | None = None) -> str:
    link = person_link(dash.data_dir, dash.host.config.dashboard, user, now)
    assert link is not None
    return link


async def test_the_link_opens_only_its_persons_memory(companion: Dashboard) -> None:
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as alice:
        home = await (await open_link(alice, as_person(companion, ALICE))).text()
        admin_page = await alice.get(f"http://127.0.0.1:{companion.port}/memory")
        exported = await (await alice.get(f"http://127.0.0.1:{companion.port}/me/export")).json()

    assert "Alice is afraid of spiders" in home
    assert "Bob owes Carol" not in home
    assert admin_page.status == 401  # a person's session is not the admin's
    texts = [e["text"] for m in exported["memories"] for e in m["entries"]]
    assert texts == ["Alice is afraid of spiders"]
    assert exported["user_id"] == ALICE


async def test_the_download_holds_only_the_shared_memory_the_person_could_be_shown(
    bot: BotHarness, model: ScriptedModel
) -> None:
    agents = {"mind": {"private": {"per": "user"}}, "general": {}}
    await bot.start(config_text(model.base_url, agents))
    assert bot.bot is not None
    config, memories = bot.bot.config, bot.bot.memories
    mind = memories.for_agent("mind", requester=ALICE)
    general = memories.for_agent("general")
    assert isinstance(mind, FileMemory)
    assert isinstance(general, FileMemory)
    mind.add_sync("Alice is afraid of spiders", actor="test")
    access = CategoryAccess.of(config, "general")
    in_bobs_dm = AgentView(general, access, room=RoomAudience.private_to(BOB, "!bob-dm:x"))
    in_lobby = AgentView(general, access, room=RoomAudience.shared(frozenset({ALICE, BOB})))
    in_bobs_dm.add_sync(f"{ALICE} was fired for embezzlement", actor="test")
    in_lobby.add_sync(f"{ALICE} likes quiet mornings", actor="test")
    dash = await start_dashboard(bot)
    try:
        jar = aiohttp.CookieJar(unsafe=True)
        async with aiohttp.ClientSession(cookie_jar=jar) as alice:
            await open_link(alice, as_person(dash, ALICE))
            answer = await alice.get(f"http://127.0.0.1:{dash.port}/me/export")
            exported = await answer.json()
    finally:
        await dash.stop()

    assert [e["text"] for m in exported["memories"] for e in m["entries"]] == [
        "Alice is afraid of spiders"
    ]
    shared = json.dumps(exported["stores"]["shared_memory"], ensure_ascii=False)
    assert "quiet mornings" in shared  # learned where she reads: hers to download
    assert "embezzlement" not in shared  # learned in Bob's DM: not shown to her anywhere


async def test_a_person_cannot_reach_another_persons_scope_nor_forge_a_link(
    companion: Dashboard,
) -> None:
    base = f"http://127.0.0.1:{companion.port}"
    bob_link = as_person(companion, BOB)
    bob_scope = next(s.id for s in (await _scopes(companion)) if s.person.startswith("bob"))
    query = parse_qs(urlsplit(bob_link).query)
    forged = bob_link.replace(
        query["u"][0].replace("@", "%40").replace(":", "%3A"), "%40alice%3Alocalhost"
    )
    expired = as_person(companion, ALICE, now=time.time() - 3600)
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as alice:
        forged_answer = await alice.get(forged, allow_redirects=False)
        expired_answer = await alice.get(expired, allow_redirects=False)
        home = await (await open_link(alice, as_person(companion, ALICE))).text()
        csrf = re.search(r'name="csrf" value="([^"]+)"', home)
        assert csrf is not None
        into_bob = await alice.post(
            f"{base}/me/s/{bob_scope}/e/whatever/delete", data={"csrf": csrf.group(1)}
        )
    async with signed_in(companion) as admin:
        admin_on_me = await admin.get("/me")

    assert forged_answer.status == 401
    assert "not one mindroom made" in await forged_answer.text()
    assert expired_answer.status == 401
    assert "expired" in await expired_answer.text()
    assert into_bob.status == 404
    assert admin_on_me.status == 401  # the admin's token opens nothing under /me
    bob_file = await _scopes(companion)
    assert bob_file  # the control: the scopes are still there


async def _scopes(dash: Dashboard) -> list:  # noqa: ANN001
    from mindroom.dashboard.scopes import list_scopes

    return list_scopes(dash.host.config, dash.data_dir.parent)


async def test_a_person_corrects_and_deletes_what_the_companion_knows(
    bot: BotHarness, companion: Dashboard
) -> None:
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as alice:
        home = await (await open_link(alice, as_person(companion, ALICE))).text()
        [action] = re.findall(r'<form method="post" action="(/me/s/[^"]+/e/[^"/]+)">', home)
        csrf = re.search(r'name="csrf" value="([^"]+)"', home)
        assert csrf is not None
        base = f"http://127.0.0.1:{companion.port}"
        corrected = await alice.post(
            base + action, data={"csrf": csrf.group(1), "text": "Alice is fine with spiders now"}
        )
        page = await corrected.text()
        bad = await alice.post(base + action, data={"text": "no csrf"})
        [again] = re.findall(r'<form method="post" action="(/me/s/[^"]+/e/[^"/]+)">', page)
        deleted = await alice.post(f"{base}{again}/delete", data={"csrf": csrf.group(1)})
        after = await deleted.text()

    assert bad.status == 403
    assert "Alice is fine with spiders now" in page
    assert "afraid of spiders" not in page
    assert "Alice is fine with spiders now" not in after
    assert bot.bot is not None
    alice_memory = bot.bot.memories.for_agent("mind", requester=ALICE)
    bob_memory = bot.bot.memories.for_agent("mind", requester=BOB)
    assert isinstance(alice_memory, FileMemory)
    assert isinstance(bob_memory, FileMemory)
    assert [e.text for e in alice_memory.list_sync(10)] == []
    assert [e.text for e in bob_memory.list_sync(10)] == ["Bob owes Carol ten euros"]
    actors = {r.actor for r in alice_memory.history_of()}
    assert "person" in actors


async def test_memory_in_a_dm_sends_the_link_and_a_shared_room_does_not(
    bot: BotHarness,
    companion: Dashboard,
    synapse,  # noqa: ANN001
) -> None:
    assert bot.bot is not None
    agent = bot.bot.agents["mind"].user_id
    person = await Human.create(synapse)
    other = await Human.create(synapse)
    try:
        dm = await person.client.room_create(invite=[agent], is_direct=True)
        assert isinstance(dm, nio.RoomCreateResponse)
        await person.wait_for(joined(agent, dm.room_id))
        asked = await person.send(dm.room_id, "!memory link")
        answer = await person.wait_for_reply(dm.room_id, asked, timeout=30)

        public = await person.client.room_create(
            invite=[agent], visibility=nio.RoomVisibility.public, preset=nio.RoomPreset.public_chat
        )
        assert isinstance(public, nio.RoomCreateResponse)
        await person.wait_for(joined(agent, public.room_id))
        public_ask = await person.send(public.room_id, "!memory link")
        public_answer = await person.wait_for_reply(public.room_id, public_ask, timeout=30)

        shared = await person.client.room_create(invite=[agent, other.user_id])
        assert isinstance(shared, nio.RoomCreateResponse)
        await person.wait_for(joined(agent, shared.room_id))
        await other.join(shared.room_id)
        await person.wait_for(joined(other.user_id, shared.room_id))
        refused_ask = await person.send(shared.room_id, "!memory link")
        refused = await person.wait_for_reply(shared.room_id, refused_ask, timeout=30)
    finally:
        await person.close()
        await other.close()

    [link] = re.findall(r"https?://\S+/me/login\?\S+", answer["content"]["body"])
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as browser:
        opened = await open_link(browser, link)
        page = await opened.text()
    assert opened.status == 200
    assert f"Signed in as <strong>{person.user_id}</strong>" in page
    assert "/me/login" not in refused["content"]["body"]
    assert "only in a direct message" in refused["content"]["body"]
    assert "/me/login" not in public_answer["content"]["body"]  # just the two, but public
    assert "only in a direct message" in public_answer["content"]["body"]
    assert refused["content"]["msgtype"] == "m.notice"


async def test_a_login_posted_from_another_site_is_refused(companion: Dashboard) -> None:
    """Login CSRF: a page elsewhere cannot sign a visitor in as the page's owner."""
    link = as_person(companion, BOB)
    query = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    base = f"http://127.0.0.1:{companion.port}"
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as visitor:
        forced = await visitor.post(
            f"{base}/me/login",
            data=query,
            headers={"Origin": "http://evil.example"},
            allow_redirects=False,
        )
        landing = await visitor.get(link)
        own = await visitor.post(f"{base}/me/login", data=query, allow_redirects=False)

    assert forced.status == 403
    assert "@bob:localhost" in await landing.text()  # the landing page names whose it is
    assert own.status == 303  # the control: the same form from the page itself signs in
    assert landing.headers["X-Frame-Options"] == "DENY"


async def test_odd_input_gets_clear_answers_not_server_errors(
    companion: Dashboard, bot: BotHarness
) -> None:
    base = f"http://127.0.0.1:{companion.port}"
    async with aiohttp.ClientSession() as anonymous:
        non_ascii = await anonymous.get(f"{base}/?token=%C3%A9")
        bearer = await anonymous.get(f"{base}/api/status", headers={"Authorization": "Bearer é"})
        person_sig = await anonymous.get(f"{base}/me/login?u=%40a%3Ab&exp=1&sig=%C3%A9")
    async with signed_in(companion) as admin:
        dotted = await admin.get("/agents/mind.private")
        control = await admin.get("/agents/mind")
        scope = next(s for s in await _scopes(companion) if s.person.startswith("alice"))
        injected = await admin.get(
            f"/memory/s/{quote(scope.id, safe='')}/e/%22%3E%3Cimg%20src%3Dx%3E"
        )
        config = bot.storage / "config.yaml"
        good = config.read_text()
        config.write_text("agents: [\n")
        broken = await admin.get("/agents")
        config.write_text(good)

    assert (non_ascii.status, bearer.status, person_sig.status) == (401, 401, 401)
    assert dotted.status == 404  # a dotted name would reach agents.mind.private
    assert control.status == 200
    assert "<img src=x>" not in await injected.text()
    assert broken.status == 503
    assert "config.yaml cannot be read" in await broken.text()


def _join_rule(rule: str, space_id: str | None = None) -> dict:
    content: dict = {"join_rule": rule}
    if space_id is not None:
        content["allow"] = [{"type": "m.room_membership", "room_id": space_id}]
    return {"type": "m.room.join_rules", "state_key": "", "content": content}


async def _ask_link(person: Human, agent: str, **room: object) -> str:
    """The body of the answer to ``!memory link`` in a new room made with ``room``'s options,
    with ``agent`` invited (and joined)."""
    created = await person.client.room_create(**room)  # type: ignore[arg-type]
    assert isinstance(created, nio.RoomCreateResponse), created
    await person.wait_for(joined(agent, created.room_id))
    asked = await person.send(created.room_id, "!memory link")
    answer = await person.wait_for_reply(created.room_id, asked, timeout=30)
    return answer["content"]["body"]


async def test_memory_link_only_in_invite_only_rooms_of_the_person_and_the_agent(
    bot: BotHarness,
    companion: Dashboard,
    synapse,  # noqa: ANN001
) -> None:
    """Rooms that space members may join without an invite (``restricted``,
    ``knock_restricted``, Element's default inside a space) and rooms where someone else is
    invited get no link; the invite-only DM of the same person does (the control)."""
    assert bot.bot is not None
    agent = bot.bot.agents["mind"].user_id
    alice = await Human.create(synapse)
    eve = await Human.create(synapse)
    try:
        space = await alice.client.room_create(space=True, invite=[eve.user_id])
        assert isinstance(space, nio.RoomCreateResponse), space
        await eve.join(space.room_id)
        await alice.wait_for(joined(eve.user_id, space.room_id))
        dm_body = await _ask_link(alice, agent, invite=[agent], is_direct=True)
        restricted = [_join_rule("restricted", space.room_id)]
        restricted_body = await _ask_link(
            alice, agent, invite=[agent], room_version="10", initial_state=restricted
        )
        knock = [_join_rule("knock_restricted", space.room_id)]
        knock_body = await _ask_link(
            alice, agent, invite=[agent], room_version="10", initial_state=knock
        )
        invited_body = await _ask_link(alice, agent, invite=[agent, eve.user_id], is_direct=True)
        # what the refusal is for: Eve, in the space, joins the restricted room uninvited
        restricted_rooms = [
            e["room_id"]
            for e in alice.events
            if e.get("type") == "m.room.join_rules"
            and e["content"].get("join_rule") == "restricted"
        ]
        uninvited = await eve.client.join(restricted_rooms[0])
    finally:
        await alice.close()
        await eve.close()

    assert "/me/login" in dm_body  # the control: the same person, command and agent
    assert isinstance(uninvited, nio.JoinResponse), uninvited
    for body in (restricted_body, knock_body, invited_body):
        assert "/me/login" not in body
        assert "only in a direct message" in body
