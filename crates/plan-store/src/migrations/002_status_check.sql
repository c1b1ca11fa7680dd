-- Version 2: the CHECK on runs.status compares instead of using IN. SQLite evaluates
-- `status IN ('running', 'ok', 'failed')` in a CHECK by building a temporary table of the
-- three strings at every insert and every status update of a run: about a tenth of what a
-- batch's store did per run (BENCHMARKS.md, "Durable runs"). Same rule, same columns.
-- The index of branches by parent now leaves out the runs without a parent (most of
-- them): it was an index entry written per run for nothing (`parent = ?` still uses it).
--
-- A CHECK cannot be altered in place: the table is rebuilt as SQLite's documentation says
-- ("Making Other Kinds Of Table Schema Changes"), with foreign keys off (the store turns
-- them on after its migrations) and checked before this commits.

CREATE TABLE runs_v2 (
    id           TEXT PRIMARY KEY,  -- UUID v7 (sortable by creation) or --run-id
    program      TEXT NOT NULL REFERENCES programs(hash),
    plan         TEXT NOT NULL,     -- the plan file as named on the command line
    parent       TEXT REFERENCES runs(id),
    branch_seq   INTEGER,           -- the parent's seq_no a branch starts at
    presets      TEXT NOT NULL,     -- JSON object: --var values (a branch: the variables at the branch point)
    limits       TEXT NOT NULL,     -- JSON: max_steps, max_total_bytes, max_value_bytes, max_concurrency
    status       TEXT NOT NULL CHECK (status = 'running' OR status = 'ok' OR status = 'failed'),
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    steps        INTEGER NOT NULL DEFAULT 0,  -- instructions committed (as of the last state or the end)
    final_answer TEXT,              -- JSON, once ok
    error        TEXT,              -- JSON {code, message, seq_no, line}, once failed
    owner        TEXT,              -- host:pid of the process running it
    lease_until  INTEGER            -- a 'running' run past this (or whose owner is gone) is interrupted
) STRICT;

INSERT INTO runs_v2 (id, program, plan, parent, branch_seq, presets, limits, status,
                     created_at, updated_at, steps, final_answer, error, owner, lease_until)
    SELECT id, program, plan, parent, branch_seq, presets, limits, status,
           created_at, updated_at, steps, final_answer, error, owner, lease_until
    FROM runs ORDER BY rowid;

DROP TABLE runs;
ALTER TABLE runs_v2 RENAME TO runs;
CREATE INDEX runs_by_parent ON runs(parent) WHERE parent IS NOT NULL;
