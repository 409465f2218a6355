"""The mem0 library behind the ``mem0`` backend: the only module that imports mem0 or chromadb.

One :class:`Mem0Engine` per (mem0 folder, embedder model), shared by every scope that uses it
(:func:`mem0_engine`). It keeps one Chroma collection per embedder model under
``mindroom_data/mem0/chroma`` (vectors of two models never meet), mem0's history in
``mindroom_data/mem0/history.db``, and mem0's own folder (``MEM0_DIR``) there too. A scope is a
mem0 ``user_id``; nothing else (no ``agent_id``) is ever used to filter, so a memory can never
be hidden from its own scope by a second key.

What is deliberately different from a plain ``Memory.from_config``:

* mem0 is built with a placeholder embedder and LLM (cheap: no model is loaded, nothing is
  contacted), then its ``embedding_model`` becomes an adapter around mindroom's own
  :class:`~mindroom.adapters.embeddings.Embedder`: every mindroom embedder provider works, and the
  local
  model is loaded once per process, not once more by mem0.
* The LLM is installed only when an extraction needs it, with a client configured explicitly
  (base URL, key, ``timeout_seconds``, no retries), so ``OPENROUTER_API_KEY`` or the SDK's
  600 s default can never take over. Adding, searching and listing never need it.
* Everything is opened on first use (in a worker thread), never at bot start-up; a missing
  package, a missing embedder or a bad LLM setting is a :class:`MemoryStoreError` that names
  the fix.

Chroma is thread-safe; what is not is mem0's dedup (read existing memories, then write), so
writes of one scope take that scope's lock (:meth:`Mem0Engine.scope_lock`).

Every text mem0 stores passes a gate
------------------------------------
mem0 writes a memory's text in exactly two places: its vector store's ``insert`` (an add,
verbatim or from its own extraction, whose text its model wrote) and ``update``. Both are
wrapped when the ``Memory`` opens: the text about to be stored is handed to the gate of the
calling thread (:meth:`Mem0Engine.gated`, which :class:`~mindroom.memory.mem0.Mem0Memory`
installs around each write with the write's consent), and a text it refuses is not stored
(:class:`WriteRefused`: mem0 then stores the other memories of an extraction one by one, and
the refused one goes neither to its history nor to its entity links). A write with no gate is
refused: a new write path cannot skip the check.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import hashlib
import logging
import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mindroom.adapters import openai_bodies
from mindroom.adapters.http_clients import openai_http_client
from mindroom.config.schema import Config
from mindroom.errors import ConfigError, EmbedderError, MemoryStoreError
from mindroom.memory.mem0.setup import OLLAMA_HOST, memory_llm

if TYPE_CHECKING:
    from mindroom.adapters.embeddings import Embedder

logger = logging.getLogger(__name__)

_M_PERTURB = -6  # glibc's mallopt: fill each block malloc hands out, and each one freed
_PERTURB_BYTE = 0x5A


@functools.cache  # a switch of the whole process: set once, however many scopes open
def scrub_allocations() -> bool:
    """From now on, for the whole process, have the C allocator fill every block it hands out
    (and every block given back) with a fixed byte (glibc's ``M_PERTURB``); False where the
    allocator has no such switch (not glibc). Chroma's vector index (hnswlib) writes its whole
    buffer to disk, the slots not used yet included, from memory it never initialised: without
    this, text the process held before (another person's facts, a proposal waiting for their
    consent) can be written into a scope's index file."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_PERTURB, _PERTURB_BYTE))


INSTALL_HINT = "pip install 'mindroom[mem0]'"
ANTHROPIC_HINT = "pip install 'mindroom[anthropic]'"
_PLACEHOLDER_URL = "http://127.0.0.1:9/v1"  # never contacted: replaced before any use
CLOSE_WAIT_SECONDS = 60.0  # the longest close waits for calls in flight (a model call's bound)
_UNSAFE = re.compile(r"[^a-z0-9]+")


def mem0_dir(storage: Path) -> Path:
    """Where the mem0 backend keeps everything of a storage root."""
    return storage / "mindroom_data" / "mem0"


def collection_name(model_id: str) -> str:
    """A valid Chroma collection name for the vectors of embedder ``model_id`` (stable,
    readable, distinct for distinct ids)."""
    readable = _UNSAFE.sub("_", model_id.lower().rsplit("/", 1)[-1]).strip("_")[:40]
    digest = hashlib.sha256(model_id.encode()).hexdigest()[:12]
    return f"mindroom_{readable or 'model'}_{digest}"


REFUSED = "held back by its scope's consent gate"  # a refused text's error says this


class WriteRefused(MemoryStoreError):
    """mem0 was about to store a text the calling write's gate refused (nothing stored)."""

    def __init__(self) -> None:
        super().__init__(f"not stored: {REFUSED}")


# (text about to be stored, the id it replaces for an update or None) -> may it be stored
WriteGate = Callable[[str, str | None], bool]


@dataclass
class _Gate:
    """The gate of one thread's write, and what passed it (see :meth:`Mem0Engine.gated`)."""

    admit: WriteGate
    refused: int = 0  # texts it refused
    stored: int = 0  # texts stored past it
    failed: int = 0  # inserts that failed after it let them through


class _RefusalFilter(logging.Filter):
    """mem0 logs each memory its store refused as an error; a gate's refusal is no error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return REFUSED not in record.getMessage()


@dataclass(frozen=True)
class LlmSettings:
    """The model mem0 extracts with, resolved from ``memory.llm`` or ``defaults.model``."""

    provider: str  # "openai" (ollama too, through its OpenAI-compatible /v1) or "anthropic"
    model: str
    base_url: str | None
    api_key: str | None
    timeout: float
    temperature: float | None


def llm_settings(config: Config) -> LlmSettings:
    """The extraction model of ``config`` (:func:`mindroom.memory.mem0.setup.memory_llm`, the
    one resolution the doctor shows too), as mem0's client is built from it: ollama through
    its OpenAI-compatible ``/v1``. Raises :class:`MemoryStoreError` when there is none."""
    try:
        llm = memory_llm(config)
    except ConfigError as exc:
        raise MemoryStoreError(
            f"the mem0 backend needs a model to extract memories: {exc}"
        ) from None
    if llm.model is None:
        raise MemoryStoreError(f"memory.llm: provider {llm.provider!r} needs config.model")
    if llm.provider == "ollama":
        base = (llm.base_url or OLLAMA_HOST).rstrip("/") + "/v1"
        return LlmSettings(
            "openai", llm.model, base, llm.api_key or "ollama", llm.timeout_seconds, llm.temperature
        )
    return LlmSettings(
        llm.provider, llm.model, llm.base_url, llm.api_key, llm.timeout_seconds, llm.temperature
    )


@dataclass(frozen=True)
class Mem0Record:
    """One memory as stored: its id, text, scope (mem0 ``user_id``) and payload."""

    id: str
    text: str
    scope_id: str | None
    created_at: str
    updated_at: str
    payload: dict[str, Any]


def _record(memory_id: str, payload: dict[str, Any] | None) -> Mem0Record:
    payload = dict(payload or {})
    return Mem0Record(
        id=str(memory_id),
        text=str(payload.get("data", "")),
        scope_id=payload.get("user_id"),
        created_at=str(payload.get("created_at") or ""),
        updated_at=str(payload.get("updated_at") or payload.get("created_at") or ""),
        payload=payload,
    )


def cosine_of(score: float) -> float:
    """The cosine similarity behind mem0's Chroma score ``1 / (1 + d²)`` (``d²`` the squared
    distance of unit vectors, ``2 - 2 cos``)."""
    if score <= 0:
        return -1.0
    return max(-1.0, min(1.0, 1.0 - (1.0 / score - 1.0) / 2.0))


class _EmbedderAdapter:
    """The engine's current :class:`Embedder` in the shape mem0 calls (``embed``,
    ``embed_batch``); looked up at each call, so a reloaded embedder applies at once."""

    def __init__(self, engine: Mem0Engine) -> None:
        self.engine = engine
        self.config = None  # read only by mem0's telemetry, which is off

    @property
    def embedder(self) -> Embedder | None:
        return self.engine.embedder

    def _embed(self, texts: list[str]) -> list[list[float]]:
        embedder = self.embedder
        if embedder is None:  # never: an engine without one does not open
            raise MemoryStoreError("the mem0 engine has no embedder")
        return [[float(x) for x in row] for row in embedder.embed(texts)]

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        return self._embed([text])[0]

    def embed_batch(self, texts: Sequence[str], memory_action: str = "add") -> list[list[float]]:
        return self._embed(list(texts))


def _import_mem0(data_dir: Path) -> Any:
    """mem0's ``Memory`` class; its folder and telemetry settings are read at import."""
    if "mem0" not in sys.modules:
        data_dir.mkdir(parents=True, exist_ok=True)
        os.environ["MEM0_DIR"] = str(data_dir)
    os.environ["MEM0_TELEMETRY"] = "False"
    try:
        from mem0 import Memory
    except ImportError as exc:
        raise MemoryStoreError(
            f"memory backend mem0 needs the mem0 package: {INSTALL_HINT}"
        ) from exc
    # mem0 warns about features it cannot use here (keyword search in Chroma, spaCy entities)
    logging.getLogger("mem0").setLevel(logging.ERROR)
    main_logger = logging.getLogger("mem0.memory.main")
    if not any(isinstance(f, _RefusalFilter) for f in main_logger.filters):
        main_logger.addFilter(_RefusalFilter())
    return Memory


class Mem0Engine:
    """A mem0 ``Memory`` over one Chroma collection, opened on first use and shared."""

    def __init__(self, data_dir: Path, embedder: Embedder | None) -> None:
        self.data_dir = data_dir
        self.embedder = embedder
        self.collection = collection_name(embedder.model_id if embedder else "none")
        self.config: Config | None = None  # where the LLM comes from; the newest wins
        self._memory: Any = None
        self._llm: LlmSettings | None = None
        self._lock = threading.Lock()
        self._scope_locks: dict[str, threading.Lock] = {}
        self._calls = threading.Condition()  # counts the calls in flight (see close)
        self._in_flight = 0
        self._gates = threading.local()  # the gate of each thread's write (see gated)

    def use_config(self, config: Config) -> None:
        """Take the extraction model from ``config`` from the next extraction on."""
        self.config = config

    def use_embedder(self, embedder: Embedder) -> None:
        """Embed with ``embedder`` from the next call on: the same model (the engine's key),
        configured anew (a reload that moves its server or changes its key)."""
        self.embedder = embedder

    def scope_lock(self, scope_id: str) -> threading.Lock:
        """The lock that serialises writes of ``scope_id`` (mem0's dedup is read-then-write)."""
        with self._lock:
            return self._scope_locks.setdefault(scope_id, threading.Lock())

    @contextlib.contextmanager
    def gated(self, admit: WriteGate) -> Iterator[_Gate]:
        """Run this thread's mem0 writes past ``admit``: every text mem0 is about to store
        (a verbatim add, an update, each memory of an extraction) is stored only when
        ``admit(text, replaced_id)`` says yes; a refused one raises :class:`WriteRefused`
        inside mem0 (see the module docstring)."""
        previous = getattr(self._gates, "gate", None)
        gate = self._gates.gate = _Gate(admit)
        try:
            yield gate
        finally:
            self._gates.gate = previous

    def _admit(self, text: str, replaces: str | None) -> _Gate:
        """This thread's gate, once it let ``text`` through (raises when it did not, or when
        the write has no gate: unknown means no)."""
        gate: _Gate | None = getattr(self._gates, "gate", None)
        if gate is None:
            raise MemoryStoreError("refused: a write to mem0 that states no consent gate")
        if not gate.admit(text, replaces):
            gate.refused += 1
            raise WriteRefused()
        return gate

    def _guard(self, store: Any) -> None:
        """Wrap ``store``'s two writes of a memory text (``insert``, ``update``) in the gate."""
        insert, update = store.insert, store.update

        def gated_insert(vectors: Any, payloads: Any = None, ids: Any = None) -> Any:
            gates = [self._admit(str((p or {}).get("data", "")), None) for p in payloads or []]
            try:
                result = insert(vectors=vectors, payloads=payloads, ids=ids)
            except Exception:
                for gate in gates[:1]:
                    gate.failed += 1
                raise
            for gate in gates[:1]:
                gate.stored += len(gates)
            return result

        def gated_update(vector_id: Any, vector: Any = None, payload: Any = None) -> Any:
            if payload is not None and "data" in payload:
                self._admit(str(payload["data"]), str(vector_id))
            return update(vector_id=vector_id, vector=vector, payload=payload)

        store.insert = gated_insert
        store.update = gated_update

    @property
    def memory(self) -> Any:
        """The mem0 ``Memory``, built on first use. Raises :class:`MemoryStoreError`."""
        with self._lock:
            if self._memory is None:
                self._memory = self._open()
            return self._memory

    def _open(self) -> Any:
        if self.embedder is None:
            raise MemoryStoreError(
                "memory backend mem0 needs an embedder, and none is available: install the "
                "local one (pip install 'mindroom[embeddings]') or set memory.embedder "
                "(not 'none')"
            )
        memory_class = _import_mem0(self.data_dir)
        if not scrub_allocations():
            logger.info("this C library cannot scrub allocations: see docs/privacy.md (mem0)")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        placeholder = {"api_key": "unused", "openai_base_url": _PLACEHOLDER_URL}
        memory = memory_class.from_config(
            {
                "vector_store": {
                    "provider": "chroma",
                    "config": {
                        "collection_name": self.collection,
                        "path": str(self.data_dir / "chroma"),
                    },
                },
                "embedder": {"provider": "openai", "config": {**placeholder, "model": "unused"}},
                "llm": {"provider": "openai", "config": {**placeholder, "model": "unused"}},
                "history_db_path": str(self.data_dir / "history.db"),
            }
        )
        memory.embedding_model = _EmbedderAdapter(self)
        self._guard(memory.vector_store)
        connection = memory.db.connection  # mem0's history: WAL and a busy timeout, as ours
        with memory.db._lock:
            connection.execute("PRAGMA journal_mode=WAL")
            connection.execute("PRAGMA busy_timeout=10000")
        self._llm = None
        return memory

    def _install_llm(self, memory: Any) -> None:
        """Give ``memory`` the configured extraction model (again only when it changed)."""
        if self.config is None:
            raise MemoryStoreError("the mem0 engine has no config to take its model from")
        settings = llm_settings(self.config)
        # an extraction gives up after max_extraction_seconds; its model call must too, or the
        # abandoned call keeps the scope's lock and the retries time out behind it
        limit = self.config.memory.auto_flush.extractor.max_extraction_seconds
        settings = dataclasses.replace(settings, timeout=min(settings.timeout, limit))
        if settings == self._llm:
            return
        from mem0.utils.factory import LlmFactory

        env_key = "ANTHROPIC_API_KEY" if settings.provider == "anthropic" else "OPENAI_API_KEY"
        key = settings.api_key or os.environ.get(env_key) or "none"  # "none": a keyless server
        options: dict[str, Any] = {"model": settings.model, "api_key": key}
        if settings.temperature is not None:
            options["temperature"] = settings.temperature
        if settings.provider == "anthropic":
            if settings.base_url:
                options["anthropic_base_url"] = settings.base_url
        else:
            options["openai_base_url"] = settings.base_url or os.environ.get(
                "OPENAI_BASE_URL", "https://api.openai.com/v1"
            )
        try:
            llm = LlmFactory.create(settings.provider, options)
        except ImportError as exc:
            hint = ANTHROPIC_HINT if settings.provider == "anthropic" else INSTALL_HINT
            raise MemoryStoreError(
                f"mem0's {settings.provider} model needs the {settings.provider} package: {hint}"
            ) from exc
        client = llm.client  # rebuilt: explicit URL and key, our timeout, no retries
        base = options.get("openai_base_url") or options.get("anthropic_base_url")
        kwargs: dict[str, Any] = {"api_key": options["api_key"], "timeout": settings.timeout}
        if base:
            kwargs["base_url"] = base
        if settings.provider == "openai":  # the openai SDK's client: on the shared context
            kwargs["http_client"] = openai_http_client()
            openai_bodies.install()  # its extraction requests: not walked again by the SDK
        llm.client = type(client)(max_retries=0, **kwargs)
        memory.llm = llm
        self._llm = settings

    # -- operations (blocking; callers run them in a worker thread) -------------------------

    def add(self, scope_id: str, text: str, metadata: dict[str, Any]) -> Mem0Record:
        """Store ``text`` verbatim in ``scope_id`` (no model call)."""
        result = self._call(
            "add",
            [{"role": "user", "content": text}],
            user_id=scope_id,
            metadata=metadata,
            infer=False,
        )
        added = result["results"][0]
        record = self.get(added["id"])
        if record is None:
            raise MemoryStoreError(f"memory {added['id']} was written but cannot be read back")
        return record

    def extract(
        self, scope_id: str, messages: list[dict[str, str]], metadata: dict[str, Any]
    ) -> list[Mem0Record]:
        """mem0's own extraction of ``messages`` into ``scope_id``: the memories it added."""
        memory = self.memory
        with self._lock:
            self._install_llm(memory)
        from mem0.exceptions import LLMError

        try:
            try:
                with self._busy():
                    result = memory.add(messages, user_id=scope_id, metadata=metadata, infer=True)
            except Exception:
                gate: _Gate | None = getattr(self._gates, "gate", None)
                if gate is not None and gate.refused and not gate.stored and not gate.failed:
                    # every memory mem0 extracted was refused: mem0 says "failed to insert any"
                    logger.info("mem0 %s: every extracted memory was held back", scope_id)
                    return []
                raise
        except LLMError as exc:
            raise MemoryStoreError(f"mem0's extraction model failed: {exc}") from exc
        except EmbedderError as exc:
            raise MemoryStoreError(f"mem0 cannot embed: {exc}") from exc
        except MemoryStoreError:
            raise
        except Exception as exc:  # mem0 raises its own and plain errors alike
            raise MemoryStoreError(f"mem0 could not store memories: {exc}") from exc
        records = []
        for item in result.get("results", []):
            if item.get("event") == "ADD" and (record := self.get(item["id"])) is not None:
                records.append(record)
        return records

    def search(self, scope_id: str, query: str, limit: int) -> list[tuple[Mem0Record, float]]:
        """The ``limit`` memories of ``scope_id`` nearest ``query``, with cosine similarity."""
        found = self._call(
            "search", query, top_k=limit, filters={"user_id": scope_id}, threshold=0.0
        )
        hits = []
        for item in found.get("results", []):
            payload = {**(item.get("metadata") or {}), "data": item.get("memory", "")}
            for key in ("user_id", "created_at", "updated_at"):
                payload[key] = item.get(key)
            record = _record(item["id"], payload)
            if record.scope_id == scope_id:  # the filter did this; a second check is cheap
                hits.append((record, cosine_of(float(item.get("score") or 0.0))))
        return hits

    def records(self, scope_id: str) -> list[Mem0Record]:
        """Every memory of ``scope_id``, oldest first (no cap)."""
        listed = self._call("vector_store.list", filters={"user_id": scope_id}, top_k=None)
        rows = listed[0] if listed and isinstance(listed[0], list) else listed
        records = [_record(row.id, row.payload) for row in rows or []]
        records = [r for r in records if r.scope_id == scope_id]
        return sorted(records, key=lambda r: (r.created_at, r.id))

    def find(self, scope_id: str, key: str, value: str) -> Mem0Record | None:
        """A memory of ``scope_id`` whose metadata ``key`` is ``value`` (None: none)."""
        listed = self._call("vector_store.list", filters={"user_id": scope_id, key: value}, top_k=1)
        rows = listed[0] if listed and isinstance(listed[0], list) else listed
        return _record(rows[0].id, rows[0].payload) if rows else None

    def get(self, memory_id: str) -> Mem0Record | None:
        """The memory ``memory_id`` of any scope (None: no such id). Callers check the scope."""
        found = self._call("vector_store.get", vector_id=memory_id)
        return None if found is None else _record(found.id, found.payload)

    def update(self, memory_id: str, text: str, metadata: dict[str, Any]) -> None:
        """Replace the text of ``memory_id``."""
        self._call("update", memory_id, text=text, metadata=metadata)

    def delete(self, memory_id: str) -> None:
        """Forget ``memory_id`` (mem0's history keeps its text)."""
        self._call("delete", memory_id)

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """mem0's change records of ``memory_id``, oldest first."""
        return list(self._call("history", memory_id))

    @contextlib.contextmanager
    def _busy(self) -> Iterator[None]:
        with self._calls:
            self._in_flight += 1
        try:
            yield
        finally:
            with self._calls:
                self._in_flight -= 1
                self._calls.notify_all()

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """Call ``method`` (``"search"``, ``"vector_store.list"``) of the mem0 ``Memory``.

        The ``Memory`` is looked up once the call counts as in flight, so :meth:`close` never
        closes one a call is about to use (it would crash the process)."""
        try:
            with self._busy():
                target = self.memory
                for name in method.split("."):
                    target = getattr(target, name)
                return target(*args, **kwargs)
        except EmbedderError as exc:
            raise MemoryStoreError(f"mem0 cannot embed: {exc}") from exc
        except MemoryStoreError:
            raise
        except Exception as exc:  # chroma and mem0 raise plain ValueError and their own
            raise MemoryStoreError(f"mem0 failed: {exc}") from exc

    def close(self) -> None:
        """Release mem0's history connection; the next use opens it again.

        Calls still running in other threads (a search, an extraction whose caller gave up)
        finish first, for at most :data:`CLOSE_WAIT_SECONDS`: mem0 closes its SQLite
        connection without a lock, and closing it under a running call crashes the process.
        Past the bound the connection is left to the process's end, with a warning.
        """
        with self._lock:
            memory, self._memory, self._llm = self._memory, None, None
        if memory is None:
            return
        with self._calls:
            idle = self._calls.wait_for(lambda: self._in_flight == 0, CLOSE_WAIT_SECONDS)
        if not idle:
            logger.warning("mem0 calls still running after %.0f s: not closed", CLOSE_WAIT_SECONDS)
            return
        memory.close()


_engines: dict[tuple[Path, str], Mem0Engine] = {}
_engines_lock = threading.Lock()


def mem0_engine(config: Config, data_dir: Path, embedder: Embedder | None) -> Mem0Engine:
    """The process's one engine for (``data_dir``, ``embedder``'s model); cheap: nothing is
    opened until the first operation. The newest caller's ``config`` supplies its extraction
    model and its ``embedder`` embeds (the same model: a reloaded config applies at once)."""
    key = (data_dir.resolve(), embedder.model_id if embedder else "none")
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            engine = _engines[key] = Mem0Engine(data_dir, embedder)
    engine.use_config(config)
    if embedder is not None:
        engine.use_embedder(embedder)
    return engine


def close_engines(data_dir: Path | None = None) -> None:
    """Close the engines (of ``data_dir``, or all); their next use reopens them."""
    with _engines_lock:
        engines = [e for k, e in _engines.items() if data_dir is None or k[0] == data_dir.resolve()]
    for engine in engines:
        engine.close()
