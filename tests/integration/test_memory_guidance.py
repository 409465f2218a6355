"""Real turns of a private companion scaffolded from the repository's ``mind_template``: what it
learns goes to the template's section for new memories, and the template's guidance (HTML
comments for people) is in the file but never in what the model is sent."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from mindroom.adapters.agno.runner import AgentRuntime, TurnRequest
from mindroom.config import load_config
from mindroom.memory.files.markdown import entry_sections
from mindroom.memory.registry import MemoryRegistry
from tests.support.harness import REPO, config_text
from tests.support.scripted_model import Reply, ScriptedModel, ToolCall, all_text, tool_results

ALICE = "@alice:localhost"
FACT = "Alice keeps bees on her roof"
# words of the template's guidance comments (the control below finds each in the file)
GUIDANCE = [
    "This is what your companion remembers about you",
    "Guidance like this note, inside the markers, is not a memory",
    "mindroom: new memories below",
    "move this comment under another heading",
]


@pytest.mark.asyncio
async def test_a_real_turn_sends_the_memory_but_not_the_template_guidance(tmp_path: Path) -> None:
    shutil.copytree(REPO / "mind_template", tmp_path / "tpl")
    with ScriptedModel() as model:
        path = tmp_path / "config.yaml"
        agents = {"mind": {"rooms": ["r"], "private": {"per": "user", "template_dir": "tpl"}}}
        path.write_text(config_text(model.base_url, agents))
        config = load_config(path)
        registry = MemoryRegistry(config, tmp_path / "mindroom_data", tmp_path)
        runtime = AgentRuntime(config, tmp_path / "mindroom_data", registry)
        try:
            # turn 1: the model remembers a fact with its tool
            model.push(Reply(tool_calls=[ToolCall("add_memory", {"text": FACT})]))
            model.push("Noted.")
            first = await runtime.run_turn(TurnRequest("mind", "s1", ALICE, "I keep bees"))
            assert first.ok, first.error

            # turn 2 (a new conversation): the model reads MEMORY.md with memory_get
            model.push(Reply(tool_calls=[ToolCall("memory_get", {"path": "MEMORY.md"})]))
            model.push("Bees, on your roof.")
            asked = len(model.requests)
            second = await runtime.run_turn(
                TurnRequest("mind", "s2", ALICE, "what do I keep on my roof?")
            )
            assert second.ok, second.error
            memory = registry.for_agent("mind", ALICE)
            assert memory is not None
            file = memory.scope.entrypoint.read_text(encoding="utf-8")
        finally:
            await runtime.close()
            registry.close()

    # the control: the file has the fact, under the template's section for new memories, and
    # every piece of guidance
    assert [(e.text, heading) for e, heading in entry_sections(file, "MEMORY.md")] == [
        (FACT, "## Notes")
    ]
    for words in GUIDANCE:
        assert words in file
    # what the second turn sent: the recalled MEMORY.md (first request) and the file as
    # memory_get read it (the tool result in the second)
    sent = [all_text(request) for request in model.requests[asked:]]
    assert len(sent) == 2
    assert "### Long-term memory: MEMORY.md" in sent[0]
    assert FACT in sent[0]
    read = tool_results(model)[-1]
    assert FACT in read
    assert "MEMORY.md (lines 1-" in read
    for text in [*sent, read]:
        for words in GUIDANCE:
            assert words not in text
        assert "<!--\n" not in text
        assert "\n-->" not in text
