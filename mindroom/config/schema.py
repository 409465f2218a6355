"""The shape of ``config.yaml``: pydantic models at the boundary, nothing else.

Validation here is structural and cross-referential (an agent's model must exist, a room's
settings must name a configured room). Reading the file, expanding ``${VAR}`` and turning
validation errors into readable messages is :mod:`mindroom.config.load`'s job.
"""

from __future__ import annotations

import re
import warnings
from typing import Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from mindroom.config.categories_schema import check_allowlists
from mindroom.config.memory_schema import (
    AutoFlushConfig,
    CompactionConfig,
    CurationConfig,
    EmbedderConfig,
    EmbedderProvider,
    EmbedderRef,
    EmbedderSettings,
    ExtractorConfig,
    FileMemoryConfig,
    FlushBatchConfig,
    MemoryBackendName,
    MemoryConfig,
    MemoryLlmConfig,
    MemoryLlmSettings,
    MemorySnippetsConfig,
    RecallGateConfig,
    SearchConfig,
)
from mindroom.config.models_schema import (
    LOCAL_EMBEDDER_PROVIDERS,
    AnyModel,
    ConfigDeprecationWarning,
    LocalEmbedderModel,
    ModelConfig,
    ModelKind,
    OllamaModel,
    ServedModel,
    SpeechEndpoint,
    SpeechToText,
    SpeechToTextConfig,
    SpeechToTextModel,
)
from mindroom.config.paths import CONFIG_FOLDER, relative_inside
from mindroom.config.sessions_schema import SessionsConfig
from mindroom.config.strict import Strict as _Strict

__all__ = [  # the memory section's models live in memory_schema; importable from here too
    "AutoFlushConfig",
    "CompactionConfig",
    "ConfigDeprecationWarning",
    "CurationConfig",
    "EmbedderConfig",
    "EmbedderProvider",
    "EmbedderSettings",
    "ExtractorConfig",
    "FileMemoryConfig",
    "FlushBatchConfig",
    "MemoryBackendName",
    "MemoryConfig",
    "MemoryLlmConfig",
    "MemoryLlmSettings",
    "MemorySnippetsConfig",
    "ModelConfig",
    "RecallGateConfig",
    "SearchConfig",
    "ServedModel",
    "SpeechEndpoint",
    "SpeechToTextConfig",
    "SpeechToTextModel",
]

AGENT_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,39}")
ROOM_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
ROUTER = "router"
"""The name of the router's account; no agent or team may take it."""
RESERVED_NAMES = frozenset({ROUTER, "appservice"})  # appservice: the service's own user

ThreadMode = Literal["thread", "room"]
TeamMode = Literal["coordinate", "collaborate"]
LearningMode = Literal["always", "agentic"]


def _check_user_patterns(value: list[str] | None) -> list[str] | None:
    for pattern in value or []:
        if not pattern.startswith("@") or ":" not in pattern:
            raise ValueError(
                f"{pattern!r} is not a Matrix user ID or glob (expected '@user:server' "
                "or e.g. '@*:example.org')"
            )
    return value


class PrivateConfig(_Strict):
    """A private companion: one definition, a private state root per requester.

    ``per: user`` shares the memory folder ``root`` among all of a person's private agents that
    name the same ``root``; ``per: user_agent`` gives each (person, agent) its own.
    ``template_dir`` (relative to the config file) is copied into a new memory folder.
    """

    per: Literal["user", "user_agent"] = Field(
        default="user",
        description="`user`: one memory per person (shared by the agents naming the same `root`); "
        "`user_agent`: one per person and agent",
    )
    root: str | None = Field(
        default=None, description="the name of the shared private memory folder (with `per: user`)"
    )
    template_dir: str | None = Field(
        default=None,
        description="a folder (relative to the config file) copied into each new private memory",
    )

    @field_validator("root")
    @classmethod
    def _root_name(cls, value: str | None) -> str | None:
        if value is not None and not ROOM_NAME_RE.fullmatch(value.lower()):
            raise ValueError(f"{value!r} is not a plain folder name")
        return value

    @field_validator("template_dir")
    @classmethod
    def _inside_config_folder(cls, value: str | None) -> str | None:
        return None if value is None else relative_inside(value, CONFIG_FOLDER)


class AgentConfig(_Strict):
    """One agent: its own Matrix account, its instructions and where it lives."""

    display_name: str | None = Field(
        default=None, description="the name people see in the room; unset: the agent's key"
    )
    role: str = Field(
        default="",
        description="one line on what the agent is for (the router reads it to pick an agent)",
    )
    instructions: list[str] = Field(
        default_factory=list, description="lines added to the agent's system prompt"
    )
    model: str | None = Field(
        default=None, description="a key of `models:` (a chat model); unset: `defaults.model`"
    )
    rooms: list[str] = Field(
        default_factory=list, description="rooms (by name) the agent lives in; created on first run"
    )
    thread_mode: ThreadMode | None = Field(
        default=None,
        description="`thread` answers in a thread under each message, `room` in the timeline; "
        "unset: `defaults.thread_mode`",
    )
    history_runs: int | None = Field(
        default=None,
        ge=0,
        description="earlier runs of the session in the agent's context; unset: "
        "`defaults.history_runs`",
    )
    streaming: bool | None = Field(
        default=None,
        description="stream answers (a message, then edits); unset: `defaults.streaming`",
    )
    stream_first_send_seconds: float | None = Field(
        default=None,
        ge=0,
        description="seconds a streamed answer runs before its message is sent; unset: "
        "`defaults.stream_first_send_seconds`",
    )
    stream_edit_interval_seconds: float | None = Field(
        default=None,
        ge=0,
        description="least seconds between a streamed message's edits; unset: "
        "`defaults.stream_edit_interval_seconds`",
    )
    status_reactions: bool | None = Field(
        default=None,
        description="show work as reactions on the message answered; unset: "
        "`defaults.status_reactions`",
    )
    memory_backend: MemoryBackendName | None = Field(
        default=None, description="`file`, `mem0` or `none`; unset: `memory.backend`"
    )
    memory_embedder: EmbedderRef | None = Field(
        default=None,
        description="this agent's memory search embedder, a key of `models:` (or `none`); "
        "unset: memory.embedder",
    )
    learning: bool | None = Field(
        default=None, description="Agno's learning for this agent; unset: `defaults.learning`"
    )
    learning_mode: LearningMode | None = Field(
        default=None, description="`always` or `agentic`; unset: `defaults.learning_mode`"
    )
    private: PrivateConfig | None = None


class TeamConfig(_Strict):
    """A configured team: its own account; its members answer together."""

    display_name: str | None = Field(
        default=None, description="the name people see in the room; unset: the team's key"
    )
    role: str = Field(default="", description="one line on what the team is for")
    agents: list[str] = Field(
        min_length=2, description="the member agents (at least two; no private companions)"
    )
    mode: TeamMode | None = Field(
        default=None,
        description="`coordinate` (a leader delegates) or `collaborate` (all answer); unset: "
        "`defaults.team_mode`",
    )
    rooms: list[str] = Field(default_factory=list, description="rooms (by name) the team lives in")
    model: str | None = Field(
        default=None, description="a key of `models:` for the team leader; unset: `defaults.model`"
    )
    instructions: list[str] = Field(
        default_factory=list, description="lines added to the team's system prompt"
    )


class DefaultsConfig(_Strict):
    """Values every agent inherits unless it sets its own."""

    model: str = Field(
        default="default",
        description="the key of `models:` every agent, team and the router use unless they name "
        "another",
    )
    thread_mode: ThreadMode = Field(
        default="thread",
        description="`thread` answers in a thread under each message, `room` in the timeline",
    )
    history_runs: int = Field(
        default=10, ge=0, description="earlier runs of the session in an agent's context"
    )
    markdown: bool = Field(default=True, description="agents write markdown (rendered in the room)")
    streaming: bool = Field(
        default=True, description="agents stream answers (a message, then edits)"
    )
    stream_first_send_seconds: float = Field(
        default=1.0,
        ge=0,
        description="seconds a streamed answer runs before its message is sent (an answer "
        "finished sooner is posted once, never edited)",
    )
    stream_edit_interval_seconds: float = Field(
        default=1.5,
        ge=0,
        description="least seconds between a streamed message's edits (the final edit is sent "
        "at once)",
    )
    # a reaction on the person's message: ⏳ while an agent works on it (then removed), ⚠️ when
    # it failed
    status_reactions: bool = False
    learning: bool = False  # off: hidden, costly, not per person (docs/configuration.md)
    learning_mode: LearningMode = Field(
        default="always",
        description="Agno's learning mode when learning is on: `always` or `agentic`",
    )
    team_mode: TeamMode = Field(
        default="coordinate", description="how configured teams work: `coordinate` or `collaborate`"
    )


class RouterConfig(_Strict):
    """How a message that names no agent finds one, and how far agents may hand off."""

    model: str | None = Field(
        default=None, description="a key of `models:` the router asks; unset: `defaults.model`"
    )
    context_messages: int = Field(
        default=6,
        ge=0,
        le=50,
        description="earlier messages of the room the router reads to choose an agent",
    )
    max_agent_hops: int = Field(
        default=3,
        ge=0,
        le=20,
        description="how many times agents may hand a message on to each other",
    )


class RoomConfig(_Strict):
    """Per-room settings, keyed by room name."""

    join_rule: Literal["public", "invite"] = Field(
        default="public",
        description="`public`: joinable by alias by everyone on the homeserver; `invite`: invite "
        "only",
    )
    topic: str | None = Field(default=None, description="the room's topic, set when it is created")
    allowed_users: list[str] | None = Field(
        default=None,
        description="Matrix IDs or globs who may talk in this room; unset: "
        "`authorization.allowed_users`",
    )

    @field_validator("allowed_users")
    @classmethod
    def _user_patterns(cls, value: list[str] | None) -> list[str] | None:
        return _check_user_patterns(value)


class TokenLogin(_Strict):
    """An account's login issued elsewhere (an OIDC provider such as the Matrix Authentication
    Service): mindroom uses it as is, with no password, and never registers the account."""

    access_token: str = Field(min_length=1)  # e.g. ${GENERAL_MATRIX_TOKEN}
    device_id: str = Field(min_length=1, description="the device of that login")


class AppserviceConfig(_Strict):
    """``matrix.mode: appservice``: mindroom as the homeserver's application service.

    The homeserver sends every event of the agents' rooms to ``url`` (where ``host``:``port``
    listens); ``mindroom appservice registration`` writes the file the homeserver loads.
    """

    id: str = Field(
        default="mindroom",
        min_length=1,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="the application service's ID in the registration file",
    )
    host: str = Field(
        default="127.0.0.1", min_length=1, description="the address the service listens on"
    )
    port: int = Field(default=9009, ge=1, le=65535, description="the port the service listens on")
    url: str | None = Field(default=None, pattern=r"^https?://")  # unset: http://host:port
    # the room aliases it may create (the config's rooms are made with their names as aliases);
    # the homeserver also sends it the events of every room with such an alias
    aliases: str = Field(default="#.*", min_length=2, pattern=r"^#")


class MatrixConfig(_Strict):
    """Where the homeserver is. ``MATRIX_HOMESERVER`` in the environment overrides it."""

    homeserver: str = Field(
        default="http://localhost:8008",
        description="the homeserver's URL; `MATRIX_HOMESERVER` overrides it",
    )
    # clientserver: each agent its own login, device and sync loop (the default);
    # appservice: one application service acts as every agent (see AppserviceConfig)
    mode: Literal["clientserver", "appservice"] = "clientserver"
    appservice: AppserviceConfig = Field(default_factory=AppserviceConfig)
    # account name (router, an agent, a team) -> its access token and device
    logins: dict[str, TokenLogin] = Field(default_factory=dict)
    device_name: str = Field(
        default="mindroom", description="the device name of the agents' logins"
    )
    # room keys backed up on the homeserver, readable with the recovery key (MINDROOM_RECOVERY_KEY)
    key_backup: bool = True
    catch_up_seconds: float = Field(
        default=300.0,
        ge=0,
        description="messages this young that arrived while mindroom was down are answered; older "
        "ones are skipped",
    )
    # Version 12 room IDs break common clients (matrix-commander); 10 works everywhere.
    room_version: str = Field(default="10", min_length=1)


class StorageConfig(_Strict):
    """Where the control state lives: the ledger (claimed messages, sync and transaction
    positions), the flush queue, compactions and the session book."""

    # unset: mindroom_data/ledger.db (SQLite, one process); postgresql://user:pass@host/db:
    # one PostgreSQL for several processes (pip install 'mindroom[postgres]'); ${VAR} works
    database: str | None = Field(default=None, pattern=r"^postgres(ql)?(\+asyncpg)?://")
    # with a database, several `mindroom run` share the agents (leases): the agents of a
    # process that stopped renewing its leases (killed, its machine lost) move to another
    # process within this many seconds; the holders renew every third of it
    failover_seconds: float = Field(default=30.0, ge=3.0, le=3600.0)


class DashboardConfig(_Strict):
    """The web dashboard ``mindroom run`` serves on 127.0.0.1 (``mindroom dashboard url``)."""

    enabled: bool = Field(default=True, description="serve the dashboard from `mindroom run`")
    port: int = Field(default=8765, ge=1, le=65535, description="its port on 127.0.0.1")
    # the address people's browsers reach it at, for the links `!memory` sends (a reverse
    # proxy's https://...); unset: http://127.0.0.1:<port>, which works on this machine only
    public_url: str | None = Field(default=None, pattern=r"^https?://")


class OpsConfig(_Strict):
    """``/healthz`` and ``/metrics`` (Prometheus), served by ``mindroom run`` when ``port`` is
    set, without the dashboard's token: on ``host`` (``0.0.0.0`` in a container)."""

    host: str = Field(
        default="127.0.0.1",
        min_length=1,
        description="the address of `/healthz` and `/metrics` (`0.0.0.0` in a container)",
    )
    port: int | None = Field(
        default=None, ge=1, le=65535, description="their port; unset: not served"
    )


class MediaConfig(_Strict):
    """Files sent to agents: what is read, up to which size."""

    max_bytes: int = Field(default=20_000_000, ge=1)  # bigger files get a notice
    max_text_chars: int = Field(default=20_000, ge=100)  # of a text file or PDF: the first part
    # a PDF's first pages are read, at most this many
    max_pdf_pages: int = Field(default=50, ge=1, le=10_000)
    # reading one file may take this long; a slower one is refused (its reader is killed)
    read_seconds: float = Field(default=20.0, gt=0, le=600)
    speech_to_text: SpeechToText | None = Field(
        default=None,
        description="voice messages are transcribed when set: `{model: <key of models:>}`; "
        "the older inline form (`base_url`, `api_key`, `model`) is deprecated",
    )


class AuthorizationConfig(_Strict):
    """Who may talk to the agents.

    ``allowed_users`` holds Matrix IDs or globs (``@*:example.org``). ``None`` (the default) means
    the users of the bot's own homeserver.
    """

    allowed_users: list[str] | None = Field(
        default=None,
        description="Matrix IDs or globs (`@*:example.org`) who may talk to the agents; unset: "
        "the users of the bot's own homeserver",
    )
    admins: list[str] = Field(
        default_factory=list, description="Matrix IDs or globs who may use the admin commands"
    )

    @field_validator("allowed_users", "admins")
    @classmethod
    def _user_patterns(cls, value: list[str] | None) -> list[str] | None:
        return _check_user_patterns(value)


_LLM_PROVIDERS = ("openai", "anthropic", "ollama")
_EMBEDDER_PROVIDERS = ("none", "openai", "ollama", *LOCAL_EMBEDDER_PROVIDERS)


DEPRECATIONS = "deprecations"
"""The validation context key of a list that collects deprecation messages instead of
warning (``Config.model_validate(data, context={DEPRECATIONS: []})``): how
:func:`mindroom.config.load.parse_config` reports them with the file's name."""


def _deprecated(info: ValidationInfo, message: str) -> None:
    """Tell whoever writes the config that a key is written in an older form: into the
    context's list when the caller collects them, else as a :class:`ConfigDeprecationWarning`."""
    collected = info.context.get(DEPRECATIONS) if isinstance(info.context, dict) else None
    if isinstance(collected, list):
        collected.append(message)
    else:
        warnings.warn(message, ConfigDeprecationWarning, stacklevel=2)


def _ollama_host(base_url: str | None) -> str | None:
    """Ollama's own address from its OpenAI-compatible endpoint (``.../v1``)."""
    if base_url is None:
        return None
    return base_url.rstrip("/").removesuffix("/v1")


def _legacy_llm(llm: str | MemoryLlmConfig) -> MemoryLlmConfig:
    if isinstance(llm, MemoryLlmConfig):
        return llm
    try:
        return MemoryLlmConfig(provider=llm)  # type: ignore[arg-type]  # a provider's name
    except ValueError as exc:  # e.g. ollama without a model
        raise ValueError(f"memory.llm: {_first_error(exc)}") from None


def _legacy_embedder(ref: str | EmbedderConfig, path: str = "memory.embedder") -> EmbedderConfig:
    if isinstance(ref, EmbedderConfig):
        return ref
    try:
        return EmbedderConfig(provider=ref)  # type: ignore[arg-type]  # a provider's name
    except ValueError as exc:
        raise ValueError(f"{path}: {_first_error(exc)}") from None


def _first_error(exc: ValueError) -> str:
    errors = exc.errors() if isinstance(exc, ValidationError) else []
    message = str(errors[0]["msg"]) if errors else str(exc)
    return message.removeprefix("Value error, ")


def _model_hint(inline: MemoryLlmConfig | EmbedderConfig) -> str:
    """The ``models:`` entry that replaces an inline model, as a one-line hint (no secrets)."""
    parts = []
    if isinstance(inline, EmbedderConfig):
        parts.append("kind: embedder")
    parts.append(f"provider: {inline.provider}")
    settings = inline.config
    if settings.model is not None:
        parts.append(f"id: {settings.model}")
    for key in ("host", "base_url"):
        if getattr(settings, key) is not None:
            parts.append(f"{key}: {getattr(settings, key)}")
    if settings.api_key is not None:
        parts.append("api_key: ...")
    if isinstance(settings, MemoryLlmSettings):  # a models: entry waits longer by default
        if settings.temperature is not None:
            parts.append(f"temperature: {settings.temperature}")
        parts.append(f"timeout_seconds: {settings.timeout_seconds:g}")
    elif settings.dimensions is not None:
        parts.append(f"dimensions: {settings.dimensions}")
    return ", ".join(parts)


class Config(_Strict):
    """The whole of ``config.yaml``."""

    models: dict[str, ModelConfig] = Field(
        default_factory=dict,
        description="every model, by key (see models.<key>); everything else names a key",
    )
    agents: dict[str, AgentConfig] = Field(default_factory=dict)
    teams: dict[str, TeamConfig] = Field(default_factory=dict)
    defaults: DefaultsConfig = Field(default_factory=DefaultsConfig)
    rooms: dict[str, RoomConfig] = Field(default_factory=dict)
    matrix: MatrixConfig = Field(default_factory=MatrixConfig)
    router: RouterConfig = Field(default_factory=RouterConfig)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    authorization: AuthorizationConfig = Field(default_factory=AuthorizationConfig)
    sessions: SessionsConfig = Field(default_factory=SessionsConfig)
    media: MediaConfig = Field(default_factory=MediaConfig)
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    ops: OpsConfig = Field(default_factory=OpsConfig)

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
    def _references(self, info: ValidationInfo) -> Config:
        if self.memory.search.index == "postgresql" and not self.storage.database:
            raise ValueError(
                "memory.search.index: postgresql needs storage.database (a PostgreSQL URL)"
            )
        self._check_model_references(info)
        for name, agent in self.agents.items():
            for room in agent.rooms:
                if not ROOM_NAME_RE.fullmatch(room):
                    raise ValueError(
                        f"agents.{name}.rooms: room name {room!r} is not a valid alias "
                        "(lowercase letters, digits, '.', '_' and '-')"
                    )
        for name, team in self.teams.items():
            self._check_team(name, team)
        self._check_shared_private_roots()
        for name in self.matrix.logins:
            if name not in self.account_names:
                raise ValueError(
                    f"matrix.logins.{name}: no agent or team is called {name!r} (nor is it "
                    "'router')"
                )
        for room in self.rooms:
            if room not in self.room_names:
                raise ValueError(f"rooms.{room}: no agent or team lists this room in its rooms")
        memory = self.memory
        check_allowlists(memory.allowlists, memory.categories, {*self.agents, *self.teams})
        return self

    def _check_team(self, name: str, team: TeamConfig) -> None:
        """Team ``name``: a safe name of its own, configured shared agents once each, valid
        rooms."""
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
        for room in team.rooms:
            if not ROOM_NAME_RE.fullmatch(room):
                raise ValueError(f"teams.{name}.rooms: room name {room!r} is not valid")

    def _model_entry(self, path: str, key: str, kind: ModelKind) -> AnyModel:
        """The entry of ``models:`` that ``path`` names by ``key``; a ValueError naming the key
        and the known keys when there is none, or when it is not a ``kind`` model."""
        model = self.models.get(key)
        if model is None:
            known = ", ".join(sorted(self.models)) or "none defined"
            raise ValueError(f"{path}: unknown model {key!r} (models: {known})")
        if model.kind != kind:
            raise ValueError(
                f"{path}: models.{key} is a {model.kind} model, not a {kind} model "
                f"(set its kind, or name another model)"
            )
        return model

    def _check_model_references(self, info: ValidationInfo) -> None:
        chat: list[tuple[str, str | None]] = [
            (f"agents.{n}.model", a.model or self.defaults.model) for n, a in self.agents.items()
        ]
        chat += [(f"teams.{n}.model", t.model) for n, t in self.teams.items()]
        chat.append(("router.model", self.router.model))
        chat.append(
            ("memory.maintenance.consolidation.model", self.memory.maintenance.consolidation.model)
        )
        for path, key in chat:
            if key is not None:
                self._model_entry(path, key, "chat")
        llm = self.memory.llm
        if isinstance(llm, str) and (llm in self.models or llm not in _LLM_PROVIDERS):
            self._model_entry("memory.llm", llm, "chat")
        elif llm is not None:
            _deprecated(
                info,
                "memory.llm with its own provider and config is deprecated: add the model "
                f"under models: ({_model_hint(_legacy_llm(llm))}) and write memory.llm: <key>",
            )
        embedders = [("memory.embedder", self.memory.embedder)]
        embedders += [
            (f"agents.{n}.memory_embedder", a.memory_embedder) for n, a in self.agents.items()
        ]
        for path, ref in embedders:
            if (
                isinstance(ref, str)
                and ref != "none"
                and (ref in self.models or ref not in _EMBEDDER_PROVIDERS)
            ):
                self._model_entry(path, ref, "embedder")
            elif ref is not None and ref != "none":
                inline = _legacy_embedder(ref, path)
                new = "none" if inline.provider == "none" else "<key>"
                where = (
                    ""
                    if new == "none"
                    else f"add the embedder under models: ({_model_hint(inline)}) and "
                )
                _deprecated(
                    info,
                    f"{path} with its own provider and config is deprecated: {where}write "
                    f"{path}: {new}",
                )
        speech = self.media.speech_to_text
        if isinstance(speech, SpeechToTextModel):
            self._model_entry("media.speech_to_text.model", speech.model, "speech_to_text")
        elif speech is not None:
            _deprecated(
                info,
                "media.speech_to_text with its own base_url is deprecated: add the endpoint "
                f"under models: (kind: speech_to_text, provider: openai, id: {speech.model}, "
                f"base_url: {speech.base_url}, api_key: ...) and write "
                "media.speech_to_text: {model: <key>}",
            )

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

    def agent_stream_pacing(self, name: str) -> tuple[float, float]:
        """How agent ``name``'s streamed answers are paced: seconds before the first send, and
        the least seconds between edits."""
        own = self.agents.get(name)
        first = own.stream_first_send_seconds if own else None
        interval = own.stream_edit_interval_seconds if own else None
        return (
            self.defaults.stream_first_send_seconds if first is None else first,
            self.defaults.stream_edit_interval_seconds if interval is None else interval,
        )

    def agent_status_reactions(self, name: str) -> bool:
        """Whether agent ``name`` shows its work as reactions on the message it answers."""
        own = self.agents[name].status_reactions if name in self.agents else None
        return self.defaults.status_reactions if own is None else own

    def agent_memory_backend(self, name: str) -> MemoryBackendName:
        """The memory backend of agent ``name``."""
        return self.agents[name].memory_backend or self.memory.backend

    def agent_embedder(self, name: str) -> EmbedderConfig | None:
        """The embedder agent ``name``'s memory search asks for (None: not configured, so the
        default applies: see :mod:`mindroom.adapters.embeddings`)."""
        return self.embedder(self.agents[name].memory_embedder or self.memory.embedder)

    @property
    def memory_embedder(self) -> EmbedderConfig | None:
        """The embedder ``memory.embedder`` asks for (None: the default applies)."""
        return self.embedder(self.memory.embedder)

    def embedder(self, ref: str | EmbedderConfig | None) -> EmbedderConfig | None:
        """The embedder settings that ``ref`` (a key of ``models:``, ``none``, or the older
        inline form) stands for; None when unset."""
        if ref is None or isinstance(ref, EmbedderConfig):
            return ref
        if ref == "none" or (ref not in self.models and ref in _EMBEDDER_PROVIDERS):
            return EmbedderConfig(provider=ref)  # type: ignore[arg-type]  # checked above
        model = self.models[ref]
        if isinstance(model, LocalEmbedderModel):
            settings = EmbedderSettings(model=model.id, dimensions=model.dimensions)
            return EmbedderConfig(provider=model.provider, config=settings)
        if isinstance(model, OllamaModel):
            host = model.host or _ollama_host(model.base_url)
            settings = EmbedderSettings(model=model.id, dimensions=model.dimensions, host=host)
            return EmbedderConfig(provider="ollama", config=settings)
        settings = EmbedderSettings(  # an openai entry: validation lets no other be an embedder
            model=model.id,
            dimensions=model.dimensions,
            base_url=model.base_url,
            api_key=model.api_key,
        )
        return EmbedderConfig(provider="openai", config=settings)

    @property
    def memory_llm(self) -> MemoryLlmConfig | None:
        """``memory.llm`` as a provider and its settings (None: unset, ``defaults.model``)."""
        llm = self.memory.llm
        if llm is None or isinstance(llm, MemoryLlmConfig):
            return llm
        if llm not in self.models:
            return MemoryLlmConfig(provider=llm)  # type: ignore[arg-type]  # checked above
        model = self.chat_model(llm)
        host = None
        if isinstance(model, OllamaModel):
            host = model.host or _ollama_host(model.base_url)
        settings = MemoryLlmSettings(
            model=model.id,
            host=host,
            base_url=None if isinstance(model, OllamaModel) else model.base_url,
            api_key=model.api_key,
            temperature=model.temperature,
            timeout_seconds=model.timeout_seconds,
        )
        return MemoryLlmConfig(provider=model.provider, config=settings)

    @property
    def speech_to_text(self) -> SpeechEndpoint | None:
        """Where voice messages are transcribed (None: they are not)."""
        speech = self.media.speech_to_text
        if speech is None:
            return None
        if isinstance(speech, SpeechToTextConfig):
            return SpeechEndpoint(speech.base_url, speech.api_key, speech.model)
        model = self.chat_or_speech_model(speech.model)
        return SpeechEndpoint(model.base_url, model.api_key or "none", model.id)

    def chat_model(self, key: str) -> ServedModel:
        """The served model ``key`` (validation made sure every chat model reference is one)."""
        return self.chat_or_speech_model(key)

    def chat_or_speech_model(self, key: str) -> ServedModel:
        """The entry ``key`` of ``models:``, a model at a server."""
        model = self.models[key]
        if isinstance(model, LocalEmbedderModel):
            raise ValueError(f"models.{key} is a local embedder, not a served model")
        return model

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
