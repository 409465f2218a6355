"""The ``memory:`` section of ``config.yaml`` (and the embedder an agent may override).

Split from :mod:`mindroom.config.schema`, which re-exports every name here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from mindroom.config.categories_schema import CategoriesConfig
from mindroom.config.maintenance_schema import MaintenanceConfig
from mindroom.config.models_schema import ref_tag
from mindroom.config.paths import STORAGE_ROOT, relative_inside
from mindroom.config.strict import Strict as _Strict

MemoryBackendName = Literal["file", "mem0", "none"]
EmbedderProvider = Literal["sentence_transformers", "huggingface", "openai", "ollama", "none"]


class EmbedderSettings(_Strict):
    """``embedder.config``: which model, and where a remote one is served.

    ``host`` is ollama's server (``http://localhost:11434``); ``base_url`` and ``api_key`` are
    an OpenAI-compatible server's, as for models (unset: ``OPENAI_BASE_URL``/``OPENAI_API_KEY``).
    ``model`` of a local provider is the bundled ``all-MiniLM-L6-v2`` when unset, or the path of
    a sentence-transformers model folder (relative to the config file).
    """

    model: str | None = Field(default=None, min_length=1)
    dimensions: int | None = Field(default=None, ge=1, le=65536)
    host: str | None = Field(default=None, min_length=1)
    base_url: str | None = Field(default=None, min_length=1)
    api_key: str | None = None


class EmbedderConfig(_Strict):
    """The embedder of memory search: ``provider`` and its ``config``.

    ``none`` (also the shorthand ``embedder: none``) keeps search keyword-only; a bare provider
    name is shorthand for that provider with its defaults.
    """

    provider: EmbedderProvider
    config: EmbedderSettings = Field(default_factory=EmbedderSettings)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: object) -> object:
        if isinstance(value, str):
            return {"provider": value}
        return value

    @model_validator(mode="after")
    def _settings_fit_the_provider(self) -> EmbedderConfig:
        settings, provider = self.config, self.provider
        if provider == "none" and settings != EmbedderSettings():
            raise ValueError("provider 'none' takes no config (it turns embeddings off)")
        if settings.host is not None and provider != "ollama":
            hint = "; an OpenAI server is config.base_url" if provider == "openai" else ""
            raise ValueError(f"config.host is only for provider 'ollama', not {provider!r}{hint}")
        for key in ("base_url", "api_key"):
            if getattr(settings, key) is not None and provider != "openai":
                hint = "; ollama's server is config.host" if provider == "ollama" else ""
                raise ValueError(
                    f"config.{key} is only for provider 'openai', not {provider!r}{hint}"
                )
        if provider == "ollama" and settings.model is None:
            raise ValueError("provider 'ollama' needs config.model (e.g. nomic-embed-text)")
        return self


class MemoryLlmSettings(_Strict):
    """``memory.llm.config``: the model mem0 extracts memories with, and where it is served.

    ``host`` is ollama's server (default ``http://localhost:11434``); ``base_url`` and
    ``api_key`` are an OpenAI-compatible server's (unset: ``OPENAI_BASE_URL``/``OPENAI_API_KEY``)
    or Anthropic's (``ANTHROPIC_API_KEY``).
    """

    model: str | None = Field(default=None, min_length=1)
    host: str | None = Field(default=None, min_length=1)
    base_url: str | None = Field(default=None, min_length=1)
    api_key: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    timeout_seconds: float = Field(default=60.0, gt=0)


class MemoryLlmConfig(_Strict):
    """``memory.llm``: the model the mem0 backend extracts memories with.

    Unset, mem0 uses the config's default model (``defaults.model``), so one model setting is
    enough; set, ``provider`` (``ollama``, ``openai`` or ``anthropic``) and its ``config``.
    """

    provider: Literal["ollama", "openai", "anthropic"] = "ollama"
    config: MemoryLlmSettings = Field(default_factory=MemoryLlmSettings)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: object) -> object:
        if isinstance(value, str):
            return {"provider": value}
        return value

    @model_validator(mode="after")
    def _settings_fit_the_provider(self) -> MemoryLlmConfig:
        settings, provider = self.config, self.provider
        if settings.host is not None and provider != "ollama":
            raise ValueError(f"config.host is only for provider 'ollama', not {provider!r}")
        if settings.base_url is not None and provider == "ollama":
            raise ValueError("ollama's server is config.host, not config.base_url")
        if provider == "ollama" and settings.model is None:
            raise ValueError("provider 'ollama' needs config.model (e.g. llama3.2)")
        return self


EmbedderRef = Annotated[
    Annotated[str, Tag("(key)")] | Annotated[EmbedderConfig, Tag("(inline)")],
    Discriminator(ref_tag),
]
"""An embedder: a key of ``models:`` (or ``none``), or the older inline form."""

LlmRef = Annotated[
    Annotated[str, Tag("(key)")] | Annotated[MemoryLlmConfig, Tag("(inline)")],
    Discriminator(ref_tag),
]
"""A model: a key of ``models:``, or the older inline form of ``memory.llm``."""


class RecallGateConfig(_Strict):
    """When a memory is relevant to a message (see mindroom.memory.search.relevance)."""

    # what a hit shares with the message must be at least as specific as one word found in
    # only this many entries (its terms weighted by how rare they are in this memory)
    rare_word_entries: int = Field(default=5, ge=1)
    # with an embedder: the cosine similarity of message and entry that makes a hit relevant
    min_similarity: float = Field(default=0.5, ge=-1, le=1)
    # ... or this lower one, when the keywords it shares pass the rare-word rule too
    min_similarity_with_keywords: float = Field(default=0.35, ge=-1, le=1)


class FileMemoryConfig(_Strict):
    """Where file memory lives and how much of it each turn sees."""

    path: str | None = None  # the parent of team mirrors, relative to the storage root
    max_entrypoint_lines: int = Field(
        default=200, ge=1, description="lines of MEMORY.md a turn gets"
    )
    # lines of today's and yesterday's entries a turn may get (only the relevant ones)
    max_daily_lines: int = Field(default=20, ge=0)
    # older entries a turn may get (only the relevant ones)
    recall_hits: int = Field(default=5, ge=0, le=50)
    # the whole memory block of a turn, in characters
    recall_max_chars: int = Field(default=12000, ge=500)
    recall_gate: RecallGateConfig = Field(default_factory=RecallGateConfig)

    @field_validator("path")
    @classmethod
    def _inside_storage(cls, value: str | None) -> str | None:
        return None if value is None else relative_inside(value, STORAGE_ROOT)


class FlushBatchConfig(_Strict):
    """How much one flush cycle takes on."""

    max_sessions_per_cycle: int = Field(
        default=10, ge=1, description="sessions one flush cycle takes on"
    )
    max_sessions_per_agent_per_cycle: int = Field(
        default=3, ge=1, description="...of which at most this many of one agent"
    )


class MemorySnippetsConfig(_Strict):
    """Existing memory shown to the extraction turn, so it does not repeat what is known."""

    memory_snippets: int = Field(
        default=5, ge=0, description="existing entries shown to the extraction turn"
    )
    snippet_max_chars: int = Field(default=400, ge=20, description="characters of each")


class ExtractorConfig(_Strict):
    """The silent extraction turn."""

    no_reply_token: str = Field(
        default="NO_REPLY",
        description="what the extraction turn answers when there is nothing to remember",
    )
    max_messages_per_flush: int = Field(
        default=20, ge=1, description="messages one extraction turn reads"
    )
    max_chars_per_flush: int = Field(
        default=12000, ge=200, description="characters one extraction turn reads"
    )
    max_extraction_seconds: float = Field(
        default=30, gt=0, description="one extraction turn may take this long"
    )
    # facts the flush writes into one memory a day, at most (3 a message of the person too)
    max_facts_per_day: int = Field(default=60, ge=0)
    include_memory_context: MemorySnippetsConfig = Field(default_factory=MemorySnippetsConfig)


class CurationConfig(_Strict):
    """Promotion of durable facts from daily files into MEMORY.md."""

    enabled: bool = Field(
        default=False, description="promote durable facts from daily files into MEMORY.md"
    )
    max_lines_per_pass: int = Field(default=20, ge=1, description="lines one pass may add")
    max_passes_per_day: int = Field(default=1, ge=1, description="passes a day")
    append_only: bool = Field(
        default=True, description="a pass only adds lines, never rewrites existing ones"
    )


class AutoFlushConfig(_Strict):
    """The background loop that turns finished conversations into memory."""

    enabled: bool = Field(default=True, description="run the background flush")
    flush_interval_seconds: float = Field(
        default=1800, gt=0, description="how often the flush loop runs"
    )
    idle_seconds: float = Field(
        default=120, ge=0, description="a conversation is flushed once it has been quiet this long"
    )
    max_dirty_age_seconds: float = Field(
        default=600, ge=0, description="...or once its oldest unflushed message is this old"
    )
    stale_ttl_seconds: float = Field(
        default=86400, gt=0, description="a queued flush older than this is dropped"
    )
    max_cross_session_reprioritize: int = Field(
        default=5,
        ge=0,
        description="other sessions of the same person moved up the queue when one is flushed",
    )
    retry_cooldown_seconds: float = Field(
        default=30, ge=0, description="the first wait after a failed flush"
    )
    max_retry_cooldown_seconds: float = Field(
        default=300, ge=0, description="the longest wait after repeated failures (the wait doubles)"
    )
    batch: FlushBatchConfig = Field(default_factory=FlushBatchConfig)
    extractor: ExtractorConfig = Field(default_factory=ExtractorConfig)
    curation: CurationConfig = Field(default_factory=CurationConfig)


class CompactionConfig(_Strict):
    """Long threads: flush, then replace old history by a summary plus the recent turns."""

    threshold: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="compact when a thread's history reaches this share of the model's "
        "`context_tokens`",
    )
    keep_recent_messages: int = Field(
        default=6, ge=0, description="the most recent messages kept as they are"
    )


class SearchConfig(_Strict):
    """Hybrid memory search: how much the keyword (BM25) and the vector half count, and how
    many hits each brings before they are fused (see :mod:`mindroom.memory.search.hybrid`)."""

    keyword_weight: float = Field(
        default=0.5, ge=0, description="the weight of the keyword (BM25) half in the fused score"
    )
    vector_weight: float = Field(
        default=0.5, ge=0, description="the weight of the vector half in the fused score"
    )
    candidates: int = Field(
        default=30, ge=1, le=1000, description="hits each half brings before they are fused"
    )
    # a hit gains this share of the better score of the entries just before and after it in
    # its file: entries written together (one conversation's turns) are read together
    neighbour_weight: float = Field(default=0.3, ge=0)
    # a hit gains this share of the sum of its file's best three hits: a day (a conversation)
    # with several good hits is about the query, and so its weaker hits are likelier answers
    file_weight: float = Field(default=0.2, ge=0)
    # where both halves search: "local" (SQLite FTS5 and the vectors beside each memory's
    # files) or "postgresql" (a derived index in storage.database: full-text search and
    # pgvector, which the database must have; see mindroom.memory.search.pg_search)
    index: Literal["local", "postgresql"] = "local"


class LifecycleConfig(_Strict):
    """TTL: unused, unimportant, unpinned entries expire (soft-deleted), then are purged."""

    ttl_days: int = Field(default=60, ge=1)  # not read, changed or written for this long
    importance_below: int = Field(default=3, ge=1, le=6)  # only entries less important expire
    purge_after_days: int = Field(default=30, ge=0)  # expired entries wait this long


class RelationsConfig(_Strict):
    """Edges between entries about the same thing (mindroom.memory.search.relations)."""

    enabled: bool = Field(
        default=True, description="link new entries to the entries about the same thing"
    )
    top_k: int = Field(default=3, ge=1, le=20)  # neighbours a new entry links to, at most
    link_min: float = Field(default=0.6, ge=-1, le=1)  # the similarity an edge needs
    boost: float = Field(default=0.1, ge=0)  # a hit gains this times its strongest edge


class InsightsConfig(_Strict):
    """Theory-of-mind insights after a flush (mindroom.memory.jobs.insights): one model call per
    person a day, at most, when enabled."""

    enabled: bool = Field(
        default=False,
        description="write theory-of-mind insights after a flush (one model call per person a day "
        "at most)",
    )
    min_hours: float = Field(
        default=24, gt=0, description="hours between two insight passes for one person"
    )
    max_tokens: int = Field(
        default=220, ge=16, le=2000, description="the longest answer of the insights call"
    )


MemorySource = Literal["memory", "sessions"]
DEFAULT_SOURCES: tuple[MemorySource, ...] = ("memory",)


class MemoryConfig(_Strict):
    """Memory backend (``file``, ``mem0`` or ``none``) and its settings.

    ``memory: none`` is shorthand for ``backend: none``.
    """

    backend: MemoryBackendName = Field(
        default="file", description="`file` (markdown memory files), `mem0` or `none`"
    )
    file: FileMemoryConfig = Field(default_factory=FileMemoryConfig)
    team_reads_member_memory: bool = Field(
        default=False, description="a team's turns also recall its members' memories"
    )
    embedder: EmbedderRef | None = Field(
        default=None,
        description="the embedder of memory search: a key of `models:` (an entry with "
        "`kind: embedder`), or `none` for keyword-only search; unset: the bundled local model "
        "when mindroom[embeddings] is installed, else keyword-only. The older inline form "
        "(`provider` and `config`) is deprecated",
    )
    llm: LlmRef | None = Field(
        default=None,
        description="the mem0 backend's extraction model: a key of `models:` (a chat model); "
        "unset: `defaults.model`. The older inline form (`provider` and `config`) is deprecated",
    )
    # install a missing optional extra (the local embedder) on first use; off: an error that
    # names the install command
    auto_install: bool = True
    search: SearchConfig = Field(default_factory=SearchConfig)
    # private companions: people whose session db and index stay open (least recent closed)
    max_open_private_instances: int = Field(default=64, ge=1)
    auto_flush: AutoFlushConfig = Field(default_factory=AutoFlushConfig)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    # scheduled jobs (consolidation), see mindroom.config.maintenance_schema
    maintenance: MaintenanceConfig = Field(default_factory=MaintenanceConfig)
    # how entries are sorted, and which agent may see which (mindroom.config.categories_schema)
    categories: CategoriesConfig = Field(default_factory=CategoriesConfig)
    allowlists: dict[str, list[str]] = Field(
        default_factory=dict,
        description="agent or team -> the categories it may read and write; one not listed may "
        "use every category",
    )
    # the memory tools agents get: "all" (add/search/list/... and memory_query) or "query"
    # (memory_query alone; memory is then written by the flush)
    tools: Literal["all", "query"] = "all"
    # where an entry may be recalled (mindroom.memory.policy.audience)
    audience: Literal["strict", "room", "shared"] = Field(
        default="strict",
        description="where a memory may be recalled: `strict` only in rooms whose readers "
        "could all read where it was learned; `room` also in the room it was learned in, "
        "whoever reads it now; `shared` everywhere the agent answers",
    )
    # TTL, run by the maintenance job of type "lifecycle" (mindroom.memory.jobs.lifecycle)
    lifecycle: LifecycleConfig = Field(default_factory=LifecycleConfig)
    relations: RelationsConfig = Field(default_factory=RelationsConfig)
    insights: InsightsConfig = Field(default_factory=InsightsConfig)
    # what memory search and recall read: the memory files, and with "sessions" the text of
    # past conversations too (mindroom.memory.search.session_source)
    sources: list[MemorySource] = Field(default_factory=lambda: list(DEFAULT_SOURCES))
    # a conversation's transcript is indexed once this many new messages wait (and at its end)
    session_index_messages: int = Field(default=4, ge=1, le=1000)

    @field_validator("sources")
    @classmethod
    def _memory_first(cls, value: list[str]) -> list[str]:
        if "memory" not in value:
            raise ValueError("sources must include 'memory' (the memory files); add 'sessions'")
        if len(set(value)) != len(value):
            raise ValueError("a source is listed twice")
        return value

    @property
    def sessions_source(self) -> bool:
        """Whether past conversations are searched beside the memory files."""
        return "sessions" in self.sources

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: object) -> object:
        if isinstance(value, str):
            return {"backend": value}
        return value
