-- Each goal's planning rounds: every reply of its planner (the plan that ran, or the one
-- the compiler refused, with the diagnostics sent back), so that a goal's plan versions
-- can be shown and compared, those that never ran included. A goal asked again from the
-- start (its process died before any plan ran) writes its rounds anew.
CREATE TABLE goal_rounds (
    goal          TEXT NOT NULL REFERENCES goals(id),
    round         BIGINT NOT NULL,
    kind          TEXT NOT NULL,
    reply         TEXT,
    diagnostics   TEXT NOT NULL,
    planner_error TEXT,
    run           TEXT,
    created_at    BIGINT NOT NULL,
    PRIMARY KEY (goal, round)
);
