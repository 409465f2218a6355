"""The memory settings the dashboard edits (keys below ``memory.``), in this order:
backend, team reads, embedder, the file backend, auto-flush (intervals, idle and age
thresholds, retries, batch sizing), the extractor's limits and the memory context it is given,
and the memory LLM of the mem0 backend.
Defaults are the schema's (:mod:`mindroom.config.memory_schema`), shown as placeholders."""

from __future__ import annotations

from mindroom.dashboard.forms import Field

_EMBEDDERS = ("sentence_transformers", "huggingface", "openai", "ollama", "none")

MEMORY_FIELDS: list[Field] = [
    Field("backend", "Backend", "choice", ("file", "mem0", "none"), "file"),
    Field("team_reads_member_memory", "Teams read their members' memory", "flag", hint="off"),
    Field(
        "embedder.provider",
        "Embedder provider",
        "choice",
        _EMBEDDERS,
        "the bundled local model or keyword-only",  # the page says which (pages._memory_spec)
        shorthand=True,
    ),
    Field("embedder.config.model", "Embedder model", hint="the provider's default"),
    Field("embedder.config.dimensions", "Embedder dimensions", "number", hint="the model's"),
    Field("embedder.config.host", "Embedder host (Ollama)"),
    Field("embedder.config.base_url", "Embedder base URL (OpenAI-compatible)"),
    Field("embedder.config.api_key", "Embedder API key (use ${VAR})"),
    Field("file.path", "File backend path", hint="agents/<name>/workspace"),
    Field("file.max_entrypoint_lines", "MEMORY.md lines loaded into context", "number", hint="200"),
    Field("file.max_daily_lines", "Daily-file lines loaded into context", "number", hint="20"),
    Field("auto_flush.enabled", "Auto-flush", "flag", hint="on"),
    Field("auto_flush.flush_interval_seconds", "Flush interval (s)", "number", hint="1800"),
    Field("auto_flush.idle_seconds", "Idle before a flush (s)", "number", hint="120"),
    Field("auto_flush.max_dirty_age_seconds", "Max dirty age (s)", "number", hint="600"),
    Field("auto_flush.stale_ttl_seconds", "Forget sessions idle for (s)", "number", hint="86400"),
    Field("auto_flush.retry_cooldown_seconds", "Retry cooldown (s)", "number", hint="30"),
    Field("auto_flush.max_retry_cooldown_seconds", "Max retry cooldown (s)", "number", hint="300"),
    Field(
        "auto_flush.max_cross_session_reprioritize",
        "Cross-session reprioritize",
        "number",
        hint="5",
    ),
    Field("auto_flush.batch.max_sessions_per_cycle", "Sessions per cycle", "number", hint="10"),
    Field(
        "auto_flush.batch.max_sessions_per_agent_per_cycle",
        "Sessions per agent per cycle",
        "number",
        hint="3",
    ),
    Field(
        "auto_flush.extractor.max_messages_per_flush",
        "Extractor: messages per flush",
        "number",
        hint="20",
    ),
    Field(
        "auto_flush.extractor.max_chars_per_flush",
        "Extractor: characters per flush",
        "number",
        hint="12000",
    ),
    Field(
        "auto_flush.extractor.max_extraction_seconds",
        "Extractor: time limit (s)",
        "number",
        hint="30",
    ),
    Field(
        "auto_flush.extractor.max_facts_per_day", "Extractor: facts per day", "number", hint="60"
    ),
    Field(
        "auto_flush.extractor.include_memory_context.memory_snippets",
        "Memory context: snippets",
        "number",
        hint="5",
    ),
    Field(
        "auto_flush.extractor.include_memory_context.snippet_max_chars",
        "Memory context: characters per snippet",
        "number",
        hint="400",
    ),
    Field(
        "llm.provider",
        "Memory LLM provider (mem0)",
        "choice",
        ("ollama", "openai", "anthropic"),
        "defaults.model",
    ),
    Field("llm.config.model", "Memory LLM model"),
    Field("llm.config.host", "Memory LLM host (Ollama)"),
    Field("llm.config.base_url", "Memory LLM base URL"),
    Field("llm.config.api_key", "Memory LLM API key (use ${VAR})"),
]
