"""Compaction summaries: staged for long histories, with tool failures and memory
file operations kept beside the summary. Real Agno, the scripted model over HTTP."""

from __future__ import annotations

import pytest
from agno.models.openai import OpenAIChat
from agno.models.response import ToolExecution
from agno.run.agent import RunOutput

from mindroom.adapters.agno.summaries import staged_summary
from mindroom.memory.extraction import ChatLine
from mindroom.sessions.compaction import render_carried
from mindroom.sessions.summaries import chunks, notes_of
from tests.support.scripted_model import ScriptedModel, all_text, system_text


def lines(n: int, size: int = 200) -> list[ChatLine]:
    return [
        ChatLine("user" if i % 2 == 0 else "assistant", f"message {i} " + "x" * size)
        for i in range(n)
    ]


def test_chunks_keep_order_and_size_and_cut_a_giant_message() -> None:
    history = [*lines(30), ChatLine("user", "y" * 10_000)]
    parts = chunks(history, 2_000)
    flat = [line for part in parts for line in part]

    assert len(parts) > 3
    assert [line.text[:10] for line in flat[:30]] == [line.text[:10] for line in history[:30]]
    assert all(sum(len(line.line) + 1 for line in part) <= 2_000 for part in parts)
    assert flat[-1].text.endswith("[...]")  # the giant message, cut to fit one chunk
    assert chunks([], 2_000) == []


@pytest.mark.asyncio
async def test_a_long_history_is_summarized_in_stages_then_merged_with_the_instructions(
    model: ScriptedModel,
) -> None:
    def handler(request: dict) -> str:
        if "Merge them" in system_text(request):
            return "MERGED"
        first = all_text(request).split("message ", 1)[1].split()[0]
        return f"PART-FROM-{first}"

    model.set_handler(handler)
    chat = OpenAIChat(id="m", base_url=model.base_url, api_key="x", max_retries=0)

    short = await staged_summary(chat, lines(4), chunk_chars=20_000, instructions="keep dates")
    calls_for_short = len(model.requests)
    summary = await staged_summary(chat, lines(40), chunk_chars=2_000, instructions="keep dates")

    staged = model.requests[calls_for_short:]
    assert short == "PART-FROM-0"
    assert calls_for_short == 1  # a history that fits: one call
    assert summary == "MERGED"
    assert len(staged) > 3  # one call per chunk, then the merge
    assert "Merge them" in system_text(staged[-1])
    assert all("keep dates" in system_text(r) for r in staged)  # the instructions, every stage
    assert "PART-FROM-0" in all_text(staged[-1])  # the merge reads every part, oldest first
    assert all_text(staged[-1]).index("Part 1:") < all_text(staged[-1]).index("Part 2:")


def test_failed_tool_calls_and_memory_file_operations_are_listed_verbatim() -> None:
    runs = [
        RunOutput(
            run_id="r1",
            tools=[
                ToolExecution(
                    tool_name="add_memory",
                    tool_args={"text": "Ada likes tea"},
                    result="remembered [m-1a2b3c4d] (memory/2026-11-25.md:3)",
                ),
                ToolExecution(
                    tool_name="search_memories", tool_args={"query": "tea"}, result="found 2"
                ),
                ToolExecution(
                    tool_name="update_memory",
                    tool_args={"entry_id": "m-9"},
                    result="error: no memory m-9",
                ),
                ToolExecution(
                    tool_name="web_fetch",
                    tool_args={"url": "x"},
                    tool_call_error=True,
                    result="timeout",
                ),
            ],
        )
    ]

    notes = notes_of(runs)
    carried = render_carried("SUMMARY", notes.render(), [ChatLine("user", "latest words")])

    assert notes.file_operations == (
        "- add_memory(text=Ada likes tea): remembered [m-1a2b3c4d] (memory/2026-11-25.md:3)",
    )
    assert notes.failures == (
        "- update_memory(entry_id=m-9): error: no memory m-9",
        "- web_fetch(url=x): timeout",
    )
    assert "search_memories" not in notes.render()  # a read that worked is not worth keeping
    assert carried.index("SUMMARY") < carried.index("Tool calls that failed")
    assert carried.index("Memory file operations") < carried.index("user: latest words")
