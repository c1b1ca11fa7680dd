-- A planvm run store in PostgreSQL: the tables of the SQLite store (migrations/, at its
-- version 9) with the same meaning (docs/durability.md, docs/scale-out.md). Times are Unix
-- milliseconds; JSON columns hold serde_json text; the journal's entries are `json` (kept
-- as written: `jsonb` would reorder the keys of the outputs a resumed run is given back)
-- so that a run's calls and tokens are counted in the server.

CREATE TABLE programs (
    hash   TEXT PRIMARY KEY,
    source TEXT,
    pbc    BYTEA NOT NULL
);

-- NB: run ids compare byte by byte (`COLLATE "C"`), as in SQLite: a batch's runs are a
-- range of ids (`ID.` up to `ID.~`), which a locale's collation would not keep together.
CREATE TABLE runs (
    id            TEXT COLLATE "C" PRIMARY KEY,
    program       TEXT NOT NULL REFERENCES programs(hash),
    plan          TEXT NOT NULL,
    parent        TEXT REFERENCES runs(id),
    branch_seq    BIGINT,
    presets       TEXT NOT NULL,
    limits        TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('running', 'ok', 'failed', 'needs_input')),
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    steps         BIGINT NOT NULL DEFAULT 0,
    final_answer  TEXT,
    error         TEXT,
    owner         TEXT,
    lease_until   BIGINT,
    tool_calls    BIGINT,
    question      TEXT,
    usage         TEXT,
    planner_usage TEXT
);

CREATE INDEX runs_by_parent ON runs(parent);
CREATE INDEX runs_by_creation ON runs(created_at, id);
CREATE INDEX runs_running_by_owner ON runs(owner) WHERE status = 'running';

CREATE TABLE journal (
    run   TEXT NOT NULL REFERENCES runs(id),
    seq   BIGINT NOT NULL,
    at    BIGINT NOT NULL,
    entry JSON NOT NULL,
    PRIMARY KEY (run, seq)
);

CREATE TABLE checkpoints (
    run   TEXT PRIMARY KEY REFERENCES runs(id),
    steps BIGINT NOT NULL,
    state TEXT NOT NULL
);

CREATE TABLE goals (
    id              TEXT PRIMARY KEY,
    goal            TEXT NOT NULL,
    response_format TEXT,
    request         TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('open', 'answered', 'failed', 'needs_input')),
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    answer          TEXT,
    error           TEXT,
    owner           TEXT,
    session         TEXT
);

CREATE INDEX goals_by_session ON goals(session, created_at) WHERE session IS NOT NULL;
CREATE INDEX goals_by_creation ON goals(created_at, id);

CREATE TABLE summaries (
    session    TEXT PRIMARY KEY,
    upto       TEXT NOT NULL REFERENCES goals(id),
    summary    TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE evals (
    id         TEXT PRIMARY KEY,
    dataset    TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    summary    TEXT
);

CREATE TABLE eval_cases (
    n       BIGSERIAL,
    eval    TEXT NOT NULL REFERENCES evals(id),
    case_id TEXT NOT NULL,
    goal    TEXT NOT NULL,
    verdict TEXT NOT NULL CHECK (verdict IN ('pass', 'fail')),
    score   DOUBLE PRECISION NOT NULL,
    reason  TEXT NOT NULL,
    report  TEXT NOT NULL,
    PRIMARY KEY (eval, case_id)
);

CREATE INDEX eval_cases_by_goal ON eval_cases(goal);

CREATE TABLE feedback (
    run        TEXT PRIMARY KEY REFERENCES runs(id),
    verdict    TEXT NOT NULL CHECK (verdict IN ('good', 'bad')),
    note       TEXT,
    updated_at BIGINT NOT NULL
);
