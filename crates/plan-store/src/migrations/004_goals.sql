-- Version 4: goals and sessions. A goal given to the planner (`ask` with a store, or the
-- service's `POST /v1/runs {"goal"}`) is a row of its own from the moment it is asked,
-- before any plan exists: a goal whose planner never writes a plan that runs still has
-- its outcome kept. Its runs are `id`, `id.2`, `id.3`, ... (a re-plan is the next one).
-- A goal may belong to a session: the session's earlier goals are the conversation the
-- planner is told, and `summaries` keeps the summary that stands for the oldest ones.

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
    owner           TEXT,              -- the process asking (an open goal whose owner is gone was cut short)
    session         TEXT               -- the conversation it is a round of, if any
) STRICT;

CREATE INDEX goals_by_session ON goals(session, created_at) WHERE session IS NOT NULL;

-- The latest summary of each session's oldest rounds: it covers the goals up to `upto`
-- (by creation), which the planner is no longer told whole.
CREATE TABLE summaries (
    session    TEXT PRIMARY KEY,
    upto       TEXT NOT NULL REFERENCES goals(id),
    summary    TEXT NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
