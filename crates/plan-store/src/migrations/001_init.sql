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
    steps        INTEGER NOT NULL DEFAULT 0,  -- instructions committed (as of the last state or the end)
    final_answer TEXT,              -- JSON, once ok
    error        TEXT,              -- JSON {code, message, seq_no, line}, once failed
    owner        TEXT,              -- host:pid of the process running it
    lease_until  INTEGER            -- a 'running' run past this (or whose owner is gone) is interrupted
) STRICT;

-- The run's journal: each row holds one or more commit points (the driver about to wait
-- for calls, or the run ended), in order, as a JSON array; a point holds everything since
-- the point before:
--   {"sent":      [{"step", "seq_no", "tool", "args"}],   calls about to be sent
--    "answered":  [{"step", "output" | "error", "latency_ms"}],
--    "steps":     [{"step", "seq_no", "pc", "op", "writes", "omitted"?}],
--    "committed": [step, ...], "discarded": [step, ...]}
-- (empty lists left out). A call is known by its `step`: the number of instructions the
-- run commits before it (the cassette's `step`). A resumed run appends after the rows of
-- its earlier attempts; a later point about the same step wins. The views below unfold
-- it for the sqlite3 shell.
-- NB: a rowid table: rows are appended, and are too large for WITHOUT ROWID to pay.
CREATE TABLE journal (
    run   TEXT NOT NULL REFERENCES runs(id),
    seq   INTEGER NOT NULL,  -- 0, 1, ... per run
    at    INTEGER NOT NULL,
    entry TEXT NOT NULL,
    UNIQUE (run, seq)
) STRICT;

CREATE VIEW journal_points AS
    SELECT j.run, j.seq, p.key AS point, p.value AS point_json
    FROM journal j, json_each(j.entry) p;

CREATE VIEW journal_calls AS
    SELECT p.run, json_extract(c.value, '$.step') AS step,
           json_extract(c.value, '$.seq_no') AS seq_no, json_extract(c.value, '$.tool') AS tool,
           json_extract(c.value, '$.args') AS args
    FROM journal_points p, json_each(p.point_json, '$.sent') c;

CREATE VIEW journal_answers AS
    SELECT p.run, json_extract(a.value, '$.step') AS step,
           json_extract(a.value, '$.output') AS output, json_extract(a.value, '$.error') AS error,
           json_extract(a.value, '$.latency_ms') AS latency_ms
    FROM journal_points p, json_each(p.point_json, '$.answered') a;

CREATE VIEW journal_steps AS
    SELECT p.run, json_extract(s.value, '$.step') AS step, json_extract(s.value, '$.seq_no') AS seq_no,
           json_extract(s.value, '$.op') AS op, json_extract(s.value, '$.writes') AS writes
    FROM journal_points p, json_each(p.point_json, '$.steps') s;

-- The latest commit point of each run: the VM state to continue from.
CREATE TABLE checkpoints (
    run   TEXT PRIMARY KEY REFERENCES runs(id),
    steps INTEGER NOT NULL,
    state TEXT NOT NULL  -- plan_vm::VmState as JSON
) STRICT;

CREATE INDEX runs_by_parent ON runs(parent);
