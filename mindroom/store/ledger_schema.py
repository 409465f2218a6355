"""The ledger's tables (``mindroom_data/ledger.db``, or PostgreSQL); what each holds is in
:mod:`mindroom.store.ledger`.

Versioned (:class:`mindroom.store.migrations.Migration`): a change is a new version appended to
:data:`MIGRATIONS`, never an edit of an old one. Every statement runs on SQLite and
PostgreSQL alike; each version runs once (its statements and its record commit together).
"""

from mindroom.store.migrations import Migration, statements

SCHEMA = """
CREATE TABLE IF NOT EXISTS handled (
    event_id   TEXT PRIMARY KEY,
    room_id    TEXT NOT NULL,
    responders TEXT NOT NULL,
    source     TEXT NOT NULL,
    status     TEXT NOT NULL,
    claimed_at DOUBLE PRECISION NOT NULL,
    done_at    DOUBLE PRECISION
);
CREATE INDEX IF NOT EXISTS handled_pending ON handled (status, claimed_at);
CREATE TABLE IF NOT EXISTS sync_tokens (
    account TEXT PRIMARY KEY,
    token   TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS compactions (
    base_session TEXT PRIMARY KEY,
    generation   INTEGER NOT NULL,
    carried      TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS reply_parts (
    trigger_id TEXT NOT NULL,
    agent      TEXT NOT NULL,
    part       INTEGER NOT NULL,
    event_id   TEXT,
    PRIMARY KEY (trigger_id, agent, part)
);
CREATE TABLE IF NOT EXISTS session_generations (
    room_id     TEXT NOT NULL,
    thread_root TEXT NOT NULL,
    generation  INTEGER NOT NULL,
    PRIMARY KEY (room_id, thread_root)
);
CREATE TABLE IF NOT EXISTS flush_sessions (
    key                TEXT PRIMARY KEY,
    agent              TEXT NOT NULL,
    session_id         TEXT NOT NULL,
    requester          TEXT NOT NULL DEFAULT '',
    team               TEXT NOT NULL DEFAULT '[]',
    dirty              INTEGER NOT NULL DEFAULT 0,
    dirty_revision     INTEGER NOT NULL DEFAULT 0,
    first_dirty_at     DOUBLE PRECISION NOT NULL DEFAULT 0,
    last_seen_at       DOUBLE PRECISION NOT NULL DEFAULT 0,
    flushed_updated_at DOUBLE PRECISION NOT NULL DEFAULT 0,
    cursor             INTEGER NOT NULL DEFAULT 0,
    in_flight          INTEGER NOT NULL DEFAULT 0,
    failures           INTEGER NOT NULL DEFAULT 0,
    next_attempt_at    DOUBLE PRECISION NOT NULL DEFAULT 0,
    boosted            INTEGER NOT NULL DEFAULT 0,
    claim_id           TEXT,
    claim_pid          INTEGER,
    claim_boot         TEXT,
    claimed_at         DOUBLE PRECISION
);
CREATE TABLE IF NOT EXISTS flush_curation (
    scope  TEXT NOT NULL,
    day    TEXT NOT NULL,
    passes INTEGER NOT NULL,
    PRIMARY KEY (scope, day)
);
CREATE TABLE IF NOT EXISTS conversation_sessions (
    key            TEXT PRIMARY KEY,
    owner          TEXT NOT NULL,
    requester      TEXT NOT NULL DEFAULT '',
    room_id        TEXT NOT NULL,
    thread_root    TEXT NOT NULL DEFAULT '',
    kind           TEXT NOT NULL,
    base           TEXT NOT NULL,
    session_id     TEXT NOT NULL,
    serial         INTEGER NOT NULL DEFAULT 0,
    started_at     DOUBLE PRECISION NOT NULL,
    last_active_at DOUBLE PRECISION NOT NULL,
    turns          INTEGER NOT NULL DEFAULT 0,
    input_tokens   BIGINT NOT NULL DEFAULT 0,
    output_tokens  BIGINT NOT NULL DEFAULT 0,
    context_tokens BIGINT NOT NULL DEFAULT 0,
    model          TEXT NOT NULL DEFAULT '',
    reason         TEXT NOT NULL DEFAULT '',
    previous       TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS conversation_sessions_room
    ON conversation_sessions (room_id, thread_root);
"""

# Several processes on one database (mindroom.cluster.leases): who answers a claimed message
# (``agent``: whose lease holder; ``owner``: the process working on it), the leases, and the
# running processes with their pinned agents.
SHARDS = """
ALTER TABLE handled ADD COLUMN agent TEXT;
ALTER TABLE handled ADD COLUMN owner TEXT;
CREATE INDEX IF NOT EXISTS handled_agent ON handled (agent, status);
CREATE TABLE IF NOT EXISTS leases (
    name       TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    taken_at   DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS processes (
    owner      TEXT PRIMARY KEY,
    pins       TEXT NOT NULL,
    host       TEXT NOT NULL,
    pid        INTEGER NOT NULL,
    started_at DOUBLE PRECISION NOT NULL,
    seen_at    DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS agent_accounts (
    name    TEXT PRIMARY KEY,
    user_id TEXT NOT NULL
);
"""

# Several appservice processes (mindroom.cluster.inbox): the homeserver's events as one ordered log,
# each appended once (by event ID) whichever process the homeserver reached; ``inbox_head``
# numbers them (its row is locked by each append, so appends commit in order). Each account's
# position in it is a ``sync_tokens`` row ``inbox:<user>``.
INBOX = """
CREATE TABLE IF NOT EXISTS inbox (
    seq         BIGINT PRIMARY KEY,
    event_id    TEXT UNIQUE,
    event       TEXT NOT NULL,
    received_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX IF NOT EXISTS inbox_received ON inbox (received_at);
CREATE TABLE IF NOT EXISTS inbox_head (
    id  INTEGER PRIMARY KEY,
    seq BIGINT NOT NULL
);
INSERT INTO inbox_head (id, seq) VALUES (1, 0) ON CONFLICT (id) DO NOTHING;
"""

# Who answered a handled message (a JSON list of agent and team names, or of an ad-hoc team's
# members joined with " + "), written when it is finished; NULL for rows from before.
ANSWERED_BY = """
ALTER TABLE handled ADD COLUMN answered_by TEXT;
"""

# ``!memory forget``: the entries a person asked to forget, waiting for their confirmation
# (``pending``, until ``expires_at``), and their last confirmed forget, which ``!memory undo``
# restores (``done``, until ``expires_at``). One row of each per requester; ``entries`` is a
# JSON list of ``[owner, scope, entry id]`` (ids only: the texts stay in the memory files).
# ``prompt_event_id`` is the message that listed them (a reaction to it confirms).
MEMORY_FORGETS = """
CREATE TABLE IF NOT EXISTS memory_forgets (
    requester       TEXT NOT NULL,
    state           TEXT NOT NULL,
    subject         TEXT NOT NULL,
    entries         TEXT NOT NULL,
    room_id         TEXT NOT NULL,
    prompt_event_id TEXT,
    created_at      DOUBLE PRECISION NOT NULL,
    expires_at      DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (requester, state)
);
CREATE INDEX IF NOT EXISTS memory_forgets_prompt ON memory_forgets (prompt_event_id);
"""

# The messages mindroom posted that a person answers with a reaction (mindroom.store.prompts):
# the message's event, its room and the account that posted it, the person who may answer
# (``user_id``; or an admin), what it asks (``kind``) about what (``ref``), and the answer once
# given. A (kind, ref, person) is offered once. Keyed by the person's ID in ``user_id``, so
# their data's export and erasure (mindroom.people.data) find the rows.
PROMPTS = """
CREATE TABLE IF NOT EXISTS prompts (
    event_id    TEXT PRIMARY KEY,
    room_id     TEXT NOT NULL,
    account     TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    kind        TEXT NOT NULL,
    ref         TEXT NOT NULL,
    created_at  DOUBLE PRECISION NOT NULL,
    answer      TEXT,
    answered_by TEXT,
    answered_at DOUBLE PRECISION
);
CREATE UNIQUE INDEX IF NOT EXISTS prompts_offered ON prompts (kind, ref, user_id);
"""

# Who could read a session's conversation, narrowed at every turn (see
# mindroom.memory.flush.told): what its flush learns is recalled only where all of them could
# read, however the room has changed since. JSON; NULL: not recorded yet.
FLUSH_TOLD = """
ALTER TABLE flush_sessions ADD COLUMN told TEXT;
"""

MIGRATIONS = (
    Migration(1, statements(SCHEMA)),
    Migration(2, statements(SHARDS)),
    Migration(3, statements(INBOX)),
    Migration(4, statements(ANSWERED_BY)),
    Migration(5, statements(MEMORY_FORGETS)),
    Migration(6, statements(PROMPTS)),
    Migration(7, statements(FLUSH_TOLD)),
)
