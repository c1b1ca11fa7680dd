-- Version 6: a run may stop at a question to a person (`ask_user`) and wait, for days if
-- need be, until someone answers: status 'needs_input', with its question kept on the
-- row. Its goal waits with it (status 'needs_input'): a goal so marked is neither open
-- nor cut short, so nothing takes it up on its own.
--
-- A CHECK cannot be altered in place: both tables are rebuilt as in version 2, with
-- foreign keys off and checked before this commits.

CREATE TABLE runs_v6 (
    id           TEXT PRIMARY KEY,  -- UUID v7 (sortable by creation) or --run-id
    program      TEXT NOT NULL REFERENCES programs(hash),
    plan         TEXT NOT NULL,     -- the plan file as named on the command line
    parent       TEXT REFERENCES runs(id),
    branch_seq   INTEGER,           -- the parent's seq_no a branch starts at
    presets      TEXT NOT NULL,     -- JSON object: --var values (a branch: the variables at the branch point)
    limits       TEXT NOT NULL,     -- JSON: max_steps, max_total_bytes, max_value_bytes, max_concurrency
    status       TEXT NOT NULL CHECK (status = 'running' OR status = 'ok' OR status = 'failed'
                                      OR status = 'needs_input'),
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    steps        INTEGER NOT NULL DEFAULT 0,  -- instructions committed (as of the last state or the end)
    final_answer TEXT,              -- JSON, once ok
    error        TEXT,              -- JSON {code, message, seq_no, line}, once failed
    owner        TEXT,              -- host:pid of the process running it
    lease_until  INTEGER,           -- a 'running' run past this (or whose owner is gone) is interrupted
    tool_calls   INTEGER,           -- calls committed, once the run ended or stopped for input
    question     TEXT               -- JSON {question, choices, seq_no}, while 'needs_input'
) STRICT;

INSERT INTO runs_v6 (id, program, plan, parent, branch_seq, presets, limits, status,
                     created_at, updated_at, steps, final_answer, error, owner, lease_until,
                     tool_calls)
    SELECT id, program, plan, parent, branch_seq, presets, limits, status,
           created_at, updated_at, steps, final_answer, error, owner, lease_until, tool_calls
    FROM runs ORDER BY rowid;

DROP TABLE runs;
ALTER TABLE runs_v6 RENAME TO runs;
CREATE INDEX runs_by_parent ON runs(parent) WHERE parent IS NOT NULL;

CREATE TABLE goals_v6 (
    id              TEXT PRIMARY KEY,  -- also the id of its first run
    goal            TEXT NOT NULL,
    response_format TEXT,              -- JSON, as given
    request         TEXT NOT NULL,     -- JSON: the rest of what was asked (vars, limits), to ask again after a crash
    status          TEXT NOT NULL CHECK (status = 'open' OR status = 'answered' OR status = 'failed'
                                         OR status = 'needs_input'),
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    answer          TEXT,              -- JSON, once answered
    error           TEXT,              -- JSON {code, message}, once failed
    owner           TEXT,              -- the process asking (an open goal whose owner is gone was cut short)
    session         TEXT               -- the conversation it is a round of, if any
) STRICT;

INSERT INTO goals_v6 (id, goal, response_format, request, status, created_at, updated_at,
                      answer, error, owner, session)
    SELECT id, goal, response_format, request, status, created_at, updated_at,
           answer, error, owner, session
    FROM goals ORDER BY rowid;

DROP TABLE goals;
ALTER TABLE goals_v6 RENAME TO goals;
CREATE INDEX goals_by_session ON goals(session, created_at) WHERE session IS NOT NULL;
