-- The planvm run store, version 1. Every table is STRICT; times are Unix milliseconds;
-- JSON columns hold serde_json text.

-- 'plnr': tells a planvm store from any other SQLite file.
PRAGMA application_id = 1886154354;

-- Compiled programs, stored once per content hash (SHA-256 of the .pbc bytes, hex).
CREATE TABLE programs (
    hash   TEXT PRIMARY KEY,
    source TEXT,          -- the plan source; NULL for a run of a .pbc file
    pbc    BLOB NOT NULL  -- the program as `planc compile` writes it
) STRICT;

CREATE TABLE runs (
    id           TEXT PRIMARY KEY,  -- UUID v7 (sortable by creation) or --run-id
    program      TEXT NOT NULL REFERENCES programs(hash),
    plan         TEXT NOT NULL,     -- the plan file as named on the command line
    parent       TEXT REFERENCES runs(id),
    branch_seq   INTEGER,           -- the parent's seq_no a branch starts at
    presets      TEXT NOT NULL,     -- JSON object: --var values (a branch: the variables at the branch point)
    limits       TEXT NOT NULL,     -- JSON: max_steps, max_total_bytes, max_value_bytes, max_concurrency
    status       TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed')),
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    steps        INTEGER NOT NULL DEFAULT 0,  -- instructions committed
    final_answer TEXT,              -- JSON, once ok
    error        TEXT,              -- JSON {code, message, seq_no, line}, once failed
    owner        TEXT,              -- host:pid of the process running it
    lease_until  INTEGER            -- a 'running' run past this (or whose owner is gone) is interrupted
) STRICT;

-- Every committed instruction, with the variables it wrote.
CREATE TABLE steps (
    run     TEXT NOT NULL REFERENCES runs(id),
    step    INTEGER NOT NULL,  -- 1 for the first instruction the run executed
    seq_no  INTEGER,
    pc      INTEGER NOT NULL,
    op      TEXT NOT NULL,
    writes  TEXT NOT NULL,     -- JSON object: variable -> value
    omitted TEXT,              -- JSON object: variable -> bytes, for values too large to keep here
    PRIMARY KEY (run, step)
) STRICT, WITHOUT ROWID;

-- Every tool call, from the moment it is sent. One per instruction instance: `step` is
-- the number of instructions the run commits before it (the cassette's `step`).
CREATE TABLE calls (
    run        TEXT NOT NULL REFERENCES runs(id),
    step       INTEGER NOT NULL,
    seq_no     INTEGER,
    tool       TEXT NOT NULL,
    args       TEXT NOT NULL,   -- JSON object
    state      TEXT NOT NULL CHECK (state IN ('inflight', 'answered', 'committed', 'discarded')),
    output     TEXT,            -- JSON, when it succeeded
    error      TEXT,            -- when it failed
    latency_ms INTEGER,
    PRIMARY KEY (run, step)
) STRICT, WITHOUT ROWID;

-- The latest commit point of each run: the VM state to continue from.
CREATE TABLE checkpoints (
    run   TEXT PRIMARY KEY REFERENCES runs(id),
    steps INTEGER NOT NULL,
    state TEXT NOT NULL  -- plan_vm::VmState as JSON
) STRICT;

CREATE INDEX runs_by_parent ON runs(parent);
