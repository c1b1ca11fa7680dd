-- Version 5: sessions. A goal may be a round of a session: the session's earlier goals
-- are the conversation the planner is told, and `summaries` keeps the summary that stands
-- for the oldest of them.

ALTER TABLE goals ADD COLUMN session TEXT;  -- the conversation it is a round of, if any

CREATE INDEX goals_by_session ON goals(session, created_at) WHERE session IS NOT NULL;

-- The latest summary of each session's oldest rounds: it covers the goals up to `upto`
-- (by creation), which the planner is no longer told whole.
CREATE TABLE summaries (
    session    TEXT PRIMARY KEY,
    upto       TEXT NOT NULL REFERENCES goals(id),
    summary    TEXT NOT NULL,
    updated_at INTEGER NOT NULL
) STRICT;
