"""The memory browser and a person's own view over mem0-backed scopes.

Real mem0 (local Chroma, the local embedder) in the running bot over a real Synapse: the
browser lists a shared agent on mem0 and each person's private companion on mem0, searches
them with mem0's own search, edits, deletes and restores through the same write path as the
tools, and shows mem0's history; ``/me`` shows a person their own mem0 memories and nobody
else's.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from urllib.parse import quote

import aiohttp
import pytest
import pytest_asyncio

from mindroom.dashboard.person import person_link
from mindroom.dashboard.server import Dashboard
from mindroom.memory.mem0 import Mem0Memory
from tests.support.dashboard import form_of, open_link, signed_in, start_dashboard
from tests.support.harness import BotHarness, config_text
from tests.support.scripted_model import ScriptedModel

pytestmark = [pytest.mark.synapse, pytest.mark.asyncio]

ALICE, BOB = "@alice:localhost", "@bob:localhost"
MEM0 = {"backend": "mem0", "auto_flush": {"enabled": False}}
SHARED = ["The release is on Friday", "The build server is called hopper"]


def mem0_of(bot: BotHarness, agent: str, requester: str | None = None) -> Mem0Memory:
    assert bot.bot is not None
    memory = bot.bot.memories.for_agent(agent, requester=requester)
    assert isinstance(memory, Mem0Memory)
    return memory


def texts(memory: Mem0Memory) -> list[str]:
    return sorted(e.text for e in memory.list_sync(100))


@pytest_asyncio.fixture
async def on_mem0(bot: BotHarness, model: ScriptedModel) -> AsyncIterator[Dashboard]:
    """A bot whose shared ``general`` and private ``mind`` keep their memory in mem0 (and
    ``coder`` in files), with memories for the agent, Alice and Bob, and its dashboard."""
    agents: dict[str, dict] = {
        "general": {"rooms": []},
        "mind": {"private": {"per": "user"}},
        "coder": {"rooms": [], "memory_backend": "file"},  # one on files beside them
    }
    await bot.start(config_text(model.base_url, agents, memory=MEM0))
    for text in SHARED:
        mem0_of(bot, "general").add_sync(text, actor="test")
    mem0_of(bot, "mind", ALICE).add_sync("Alice is afraid of spiders", actor="test")
    mem0_of(bot, "mind", BOB).add_sync("Bob owes Carol ten euros", actor="test")
    dash = await start_dashboard(bot)
    yield dash
    await dash.stop()


def entry_link(page: str, scope: str, text: str) -> str:
    """The link of the listed entry whose text is ``text``."""
    found = re.search(
        rf'href="(/memory/s/{re.escape(quote(scope, safe=""))}/e/[^"?]+)[^"]*">[^<]*</a></td>'
        rf"<td>{re.escape(html.escape(text))}<",
        page,
    )
    assert found is not None, page
    return found.group(1)


async def test_the_browser_lists_searches_edits_deletes_and_restores_a_mem0_scope(
    bot: BotHarness, on_mem0: Dashboard
) -> None:
    general = mem0_of(bot, "general")
    async with signed_in(on_mem0) as admin:
        index = await (await admin.get("/memory")).text()
        listing = await (await admin.get("/memory/s/agent_general")).text()
        # mem0's own search, by meaning: no word of the query is in the entry
        found = await (
            await admin.get("/memory/s/agent_general", params={"q": "when do we ship"})
        ).text()
        link = entry_link(found, "agent_general", SHARED[0])
        entry = await (await admin.get(link)).text()
        saved = await admin.post(link, data={**form_of(entry), "text": "The release is on Monday"})
        after_save = await saved.text()
        texts_after_save = texts(general)
        deleted = await admin.post(f"{link}/delete", data=form_of(after_save))
        texts_after_delete = texts(general)
        gone_page = await (await admin.get("/memory/s/agent_general/deleted")).text()
        history = await deleted.text()
        restored = await admin.post(f"{link}/restore", data=form_of(history))
        texts_after_restore = texts(general)
        gone_after = await (await admin.get("/memory/s/agent_general/deleted")).text()
        alices_id = mem0_of(bot, "mind", ALICE).list_sync(1)[0].id
        foreign = await admin.get(f"/memory/s/agent_general/e/{alices_id}")

    assert 'href="/memory/s/agent_general"' in index
    assert 'href="/memory/s/agent_coder"' in index  # the file-backed one beside it
    assert all(text in listing for text in SHARED)
    assert found.index(SHARED[0]) < found.index(SHARED[1])  # the release first, by meaning
    assert "The release is on Friday" in entry
    assert saved.status == 200  # redirected to the entry
    assert texts_after_save == sorted(["The release is on Monday", SHARED[1]])
    assert texts_after_delete == [SHARED[1]]
    assert "The release is on Monday" in gone_page  # the deleted list has it
    # mem0's history of the entry: added, changed, deleted, each with its texts
    assert [op for op in re.findall(r"<td>(add|update|delete)</td>", history)] == [
        "delete",
        "update",
        "add",
    ]
    assert restored.status == 200
    assert texts_after_restore == sorted(["The release is on Monday", SHARED[1]])
    assert "The release is on Monday" not in gone_after  # live again: not listed as deleted
    assert foreign.status == 404  # a private scope's id through a shared one: not there


async def test_a_private_mem0_scope_is_gated_and_holds_only_its_persons_memory(
    on_mem0: Dashboard,
) -> None:
    async with signed_in(on_mem0) as admin:
        index = await (await admin.get("/memory")).text()
        private_links = re.findall(r'href="(/memory/s/private[^"]+)"', index)
        pages = {}
        for link in private_links:
            gated = await (await admin.get(link)).text()
            shown = await (await admin.get(link, params={"private": "shown"})).text()
            pages[link] = (gated, shown)

    assert len(private_links) == 2  # Alice's and Bob's, apart from the shared ones
    shown_texts = []
    for gated, shown in pages.values():
        assert "Private memory" in gated
        assert "spiders" not in gated
        assert "Carol" not in gated
        shown_texts.append(("spiders" in shown, "Carol" in shown))
    assert sorted(shown_texts) == [(False, True), (True, False)]  # one person's each


async def test_a_person_reads_corrects_deletes_and_exports_their_mem0_memory_only(
    bot: BotHarness, on_mem0: Dashboard
) -> None:
    link = person_link(on_mem0.data_dir, on_mem0.host.config.dashboard, ALICE)
    assert link is not None
    base = f"http://127.0.0.1:{on_mem0.port}"
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as alice:
        home = await (await open_link(alice, link)).text()
        exported = await (await alice.get(f"{base}/me/export")).json()
        [action] = re.findall(r'<form method="post" action="(/me/s/[^"]+/e/[^"/]+)">', home)
        csrf = re.search(r'name="csrf" value="([^"]+)"', home)
        assert csrf is not None
        corrected = await (
            await alice.post(
                base + action, data={"csrf": csrf.group(1), "text": "Alice likes spiders now"}
            )
        ).text()
        after_correct = texts(mem0_of(bot, "mind", ALICE))
        [again] = re.findall(r'<form method="post" action="(/me/s/[^"]+/e/[^"/]+)">', corrected)
        # Bob's id through Alice's own scope: mem0 finds ids in any scope, the browser must not
        bobs_id = mem0_of(bot, "mind", BOB).list_sync(1)[0].id
        into_bob = await alice.post(
            f"{base}{again.rsplit('/e/', 1)[0]}/e/{bobs_id}/delete", data={"csrf": csrf.group(1)}
        )
        await alice.post(f"{base}{again}/delete", data={"csrf": csrf.group(1)})

    assert "Alice is afraid of spiders" in home
    assert "Carol" not in home  # Bob's, on the same companion
    assert exported["user_id"] == ALICE
    assert [e["text"] for m in exported["memories"] for e in m["entries"]] == [
        "Alice is afraid of spiders"
    ]
    assert "Alice likes spiders now" in corrected
    assert after_correct == ["Alice likes spiders now"]
    assert into_bob.status == 422
    assert "no memory with id" in await into_bob.text()
    assert texts(mem0_of(bot, "mind", ALICE)) == []
    assert texts(mem0_of(bot, "mind", BOB)) == ["Bob owes Carol ten euros"]  # untouched
