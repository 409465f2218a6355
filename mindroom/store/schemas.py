"""Every SQLite store of mindroom, declared in one place: the registry of the storage layer.

Two kinds, and nothing else opens a SQLite file:

- **Stores** (:data:`STORES`): control state that nothing can rebuild (pending consent
  proposals, the maintenance schedule, which threads saw which memory changes, ...). Each has
  versioned migrations (:mod:`mindroom.store.migrations`; the ledger's own runner in
  :mod:`mindroom.store.database`), declared here as a :class:`StoreSchema` whose version 1 is the
  schema as it was created before versions existed. A change is a new version appended to a
  store's list, never an edit of an old one.
- **Derived indexes** (:data:`DERIVED`): rebuilt from the memory files or the transcripts
  (deleting one loses nothing); they keep their own schema check and rebuild on a mismatch.

:data:`READERS` names the modules that open other stores' files without owning one. The test
``tests/unit/test_store_migrations.py`` opens every store at its oldest schema and migrates it, and
checks that every module importing ``sqlite3`` is declared in one of these lists.
"""

from mindroom.store.ledger_schema import MIGRATIONS as LEDGER_MIGRATIONS
from mindroom.store.migrations import Migration, StoreSchema, statements

# -- consent proposals (a scope's consent.db) -------------------------------------------------

CONSENT = StoreSchema(
    "consent",
    "mindroom.memory.policy.consent",
    (
        Migration(
            1,
            statements(
                """
CREATE TABLE IF NOT EXISTS proposals (
    id TEXT PRIMARY KEY, kind TEXT NOT NULL, field TEXT NOT NULL, text TEXT NOT NULL,
    fields TEXT NOT NULL, path TEXT NOT NULL, user_id TEXT, signals INTEGER NOT NULL,
    created REAL NOT NULL, expires REAL NOT NULL, status TEXT NOT NULL DEFAULT 'pending',
    decided_at REAL, decided_by TEXT
)
"""
            ),
        ),
        # the entry a held-back update would have replaced (confirming replaces it); older code
        # added it ad hoc, so a file may have it already (the runner then counts it as done)
        Migration(2, ("ALTER TABLE proposals ADD COLUMN replaces TEXT",)),
    ),
)

# -- consolidation (a scope's consolidation.db): its records (mindroom.memory.jobs.consolidate
# .records), the pair fingerprints (.fingerprints) and the insight runs (mindroom.memory.jobs
# .insights); older code created each module's tables on its own, so a file may hold any of them

CONSOLIDATION_STATEMENTS = (
    """CREATE TABLE IF NOT EXISTS memory_conflicts (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,                    -- conflict | merge
    memory_id TEXT NOT NULL,
    conflicting_memory_id TEXT NOT NULL,
    reason TEXT NOT NULL,
    created_at REAL NOT NULL,
    metadata_json TEXT NOT NULL,           -- texts and paths as seen; a merge's proposal
    status TEXT NOT NULL DEFAULT 'open',   -- open | resolved
    resolution TEXT,
    resolved_at REAL,
    UNIQUE (kind, memory_id, conflicting_memory_id)
)""",
    "CREATE INDEX IF NOT EXISTS idx_memory_conflicts_mem ON memory_conflicts(memory_id)",
    """CREATE TABLE IF NOT EXISTS retrievals (
    entry_id TEXT PRIMARY KEY, count INTEGER NOT NULL, last_at REAL NOT NULL
)""",
    "CREATE TABLE IF NOT EXISTS corroborations (entry_id TEXT PRIMARY KEY, days TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS pair_fingerprints (
    first_id TEXT NOT NULL,
    second_id TEXT NOT NULL,
    similarity INTEGER NOT NULL,  -- hundredths: round(similarity, 2) * 100
    judged_at REAL NOT NULL,      -- unix seconds
    PRIMARY KEY (first_id, second_id, similarity)
)""",
    "CREATE TABLE IF NOT EXISTS insight_runs (person TEXT PRIMARY KEY, at REAL NOT NULL)",
)

CONSOLIDATION = StoreSchema(
    "consolidation",
    "mindroom.memory.jobs.consolidate.records",
    (Migration(1, CONSOLIDATION_STATEMENTS),),
)

# -- the maintenance schedule (mindroom_data/maintenance.db; PostgreSQL: see its module) ------

MAINTENANCE_SCRIPT = """
CREATE TABLE IF NOT EXISTS maintenance_jobs (
    id               TEXT PRIMARY KEY,
    job_type         TEXT NOT NULL,
    mode             TEXT NOT NULL,
    cadence          TEXT NOT NULL,
    interval_minutes INTEGER,
    weekday          TEXT,
    window_start     TEXT,
    window_end       TEXT,
    next_due_at      TEXT NOT NULL,
    last_run_at      TEXT,
    last_status      TEXT,
    last_summary     TEXT,
    enabled          INTEGER NOT NULL DEFAULT 1,
    metadata_json    TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    lease_owner      TEXT,
    lease_run_id     TEXT,
    lease_expires_at TEXT
);
CREATE INDEX IF NOT EXISTS idx_maintenance_jobs_due ON maintenance_jobs(next_due_at);
CREATE TABLE IF NOT EXISTS maintenance_runs (
    id            TEXT PRIMARY KEY,
    job_id        TEXT NOT NULL REFERENCES maintenance_jobs(id),
    owner         TEXT NOT NULL,
    status        TEXT NOT NULL,
    started_at    TEXT NOT NULL,
    completed_at  TEXT,
    summary       TEXT,
    stats_json    TEXT NOT NULL,
    error_message TEXT
);
CREATE INDEX IF NOT EXISTS idx_maintenance_runs_job ON maintenance_runs(job_id, started_at);
"""

MAINTENANCE = StoreSchema(
    "maintenance",
    "mindroom.memory.jobs.maintenance.store",
    (Migration(1, statements(MAINTENANCE_SCRIPT)),),
)

# -- operational events (a scope's events.db) --------------------------------------------------

OPS_EVENTS = StoreSchema(
    "ops_events",
    "mindroom.memory.ops_events",
    (
        Migration(
            1,
            statements(
                """
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY, user_id TEXT, thread_id TEXT, node TEXT NOT NULL, op TEXT NOT NULL,
    status TEXT NOT NULL, memory_id TEXT, category TEXT, sim REAL, ts REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_user ON events(user_id, ts DESC);
CREATE INDEX IF NOT EXISTS events_node ON events(node, ts DESC);
"""
            ),
        ),
    ),
)

# -- a mem0 scope's op keys and ids (its state folder's ops.db) --------------------------------

MEM0_OPS = StoreSchema(
    "mem0_ops",
    "mindroom.memory.mem0.ops",
    (
        Migration(
            1,
            statements(
                """
CREATE TABLE IF NOT EXISTS ops (op_key TEXT PRIMARY KEY, op TEXT NOT NULL,
    entry_id TEXT NOT NULL, text TEXT NOT NULL, done INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ids (entry_id TEXT PRIMARY KEY, seq INTEGER);
"""
            ),
        ),
    ),
)

# -- how far each thread has seen a scope's history (its deltas.db) ----------------------------

THREAD_REVISIONS = StoreSchema(
    "thread_revisions",
    "mindroom.memory.search.delta",
    (
        Migration(
            1,
            (
                """CREATE TABLE IF NOT EXISTS thread_revisions (
    thread_id TEXT PRIMARY KEY, rev INTEGER NOT NULL, offset INTEGER NOT NULL,
    updated_at REAL NOT NULL
)""",
            ),
        ),
    ),
)

# -- an agent account's key backup state (backup.db beside its key stores) ---------------------

KEY_BACKUP = StoreSchema(
    "key_backup",
    "mindroom.adapters.matrix.key_backup",
    (
        Migration(
            1,
            statements(
                """
CREATE TABLE IF NOT EXISTS backed_up (
    version TEXT NOT NULL, room_id TEXT NOT NULL, session_id TEXT NOT NULL,
    first_index INTEGER NOT NULL, PRIMARY KEY (version, room_id, session_id));
CREATE TABLE IF NOT EXISTS restored (device_id TEXT PRIMARY KEY, version TEXT);
CREATE TABLE IF NOT EXISTS outcome (id INTEGER PRIMARY KEY CHECK (id = 1),
    version TEXT, state TEXT NOT NULL, detail TEXT NOT NULL);
"""
            ),
        ),
    ),
)

# -- the ledger (mindroom_data/ledger.db or PostgreSQL; its runner is the async Database) -------

LEDGER = StoreSchema("ledger", "mindroom.store.ledger", LEDGER_MIGRATIONS)

# The stores opened through mindroom.store.migrations.open_store (synchronous sqlite3).
STORES: tuple[StoreSchema, ...] = (
    CONSENT,
    CONSOLIDATION,
    MAINTENANCE,
    OPS_EVENTS,
    MEM0_OPS,
    THREAD_REVISIONS,
    KEY_BACKUP,
)
# The stores opened through mindroom.store.database.Database (SQLAlchemy, SQLite or PostgreSQL).
ASYNC_STORES: tuple[StoreSchema, ...] = (LEDGER,)

# Modules that use a store declared above besides its owner (the same file, the same schema).
SHARERS: dict[str, StoreSchema] = {
    "mindroom.memory.jobs.consolidate.fingerprints": CONSOLIDATION,
    "mindroom.memory.jobs.insights": CONSOLIDATION,
}

# Derived and rebuildable: module -> what it is rebuilt from. No migrations: a schema mismatch
# rebuilds (or the file is deleted and filled again).
DERIVED: dict[str, str] = {
    "mindroom.memory.search.index": "the memory files (FTS5 keyword index)",
    "mindroom.memory.search.vectors": "the memory files' entries (embeddings)",
    "mindroom.memory.search.session_index": "the session transcripts (JSONL)",
    "mindroom.memory.search.relations": "the entries and their similarity (relation edges)",
}

# Modules that open other stores' files and own none: module -> why.
READERS: dict[str, str] = {
    "mindroom.people.data": "exports and erases one person's rows from every store's file",
    "mindroom.dashboard.ledger_reads": "reads the ledger's file read-only for the dashboard",
}

# The storage layer itself.
LAYER: tuple[str, ...] = (
    "mindroom.store.database",
    "mindroom.store.migrations",
    "mindroom.store.sqlite_loop",
    "mindroom.store.wal",
)
