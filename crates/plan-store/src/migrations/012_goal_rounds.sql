-- Version 12: each goal's planning rounds: every reply of its planner (the plan that ran,
-- or the one the compiler refused, with the diagnostics sent back), so that a goal's plan
-- versions can be shown and compared, those that never ran included. A goal asked again
-- from the start (its process died before any plan ran) writes its rounds anew.

CREATE TABLE goal_rounds (
    goal          TEXT NOT NULL REFERENCES goals(id),
    round         INTEGER NOT NULL,
    kind          TEXT NOT NULL,   -- plan, repair or replan
    reply         TEXT,            -- the planner's reply, redacted; None: the planner failed
    diagnostics   TEXT NOT NULL,   -- JSON: the compiler's diagnostics on the reply
    planner_error TEXT,
    run           TEXT,            -- the run of its plan, when the plan compiled
    created_at    INTEGER NOT NULL,
    PRIMARY KEY (goal, round)
) STRICT;
