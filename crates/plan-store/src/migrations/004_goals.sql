-- Version 4: goals. A goal given to the planner (`ask` with a store, or the service's
-- `POST /v1/runs {"goal"}`) is a row of its own from the moment it is asked, before any
-- plan exists: a goal whose planner never writes a plan that runs still has its outcome
-- kept. Its runs are `id`, `id.2`, `id.3`, ... (a re-plan is the next one).

CREATE TABLE goals (
    id              TEXT PRIMARY KEY,  -- also the id of its first run
    goal            TEXT NOT NULL,
    response_format TEXT,              -- JSON, as given
    request         TEXT NOT NULL,     -- JSON: the rest of what was asked (vars, limits), to ask again after a crash
    status          TEXT NOT NULL CHECK (status = 'open' OR status = 'answered' OR status = 'failed'),
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    answer          TEXT,              -- JSON, once answered
    error           TEXT,              -- JSON {code, message}, once failed
    owner           TEXT               -- the process asking (an open goal whose owner is gone was cut short)
) STRICT;
