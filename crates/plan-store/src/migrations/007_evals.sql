-- Version 7: evaluations and people's verdicts. An evaluation (`planvm eval --store`)
-- asks each case of a dataset as a goal of its own; `eval_cases` keeps each case's
-- verdict beside its goal. `feedback` is a person's verdict on a run (the latest one).

CREATE TABLE evals (
    id         TEXT PRIMARY KEY,
    dataset    TEXT NOT NULL,      -- the dataset's path, as given
    created_at INTEGER NOT NULL,
    summary    TEXT                -- the report's summary (JSON) once it ended
) STRICT;

CREATE TABLE eval_cases (
    eval       TEXT NOT NULL REFERENCES evals(id),
    case_id    TEXT NOT NULL,
    goal       TEXT NOT NULL,      -- the goal it was asked as: its runs are ID, ID.2, ...
    verdict    TEXT NOT NULL CHECK (verdict IN ('pass', 'fail')),
    score      REAL NOT NULL,
    reason     TEXT NOT NULL,
    report     TEXT NOT NULL,      -- the case's report (JSON)
    PRIMARY KEY (eval, case_id)
) STRICT;

CREATE INDEX eval_cases_by_goal ON eval_cases(goal);

CREATE TABLE feedback (
    run        TEXT PRIMARY KEY REFERENCES runs(id),
    verdict    TEXT NOT NULL CHECK (verdict IN ('good', 'bad')),
    note       TEXT,
    updated_at INTEGER NOT NULL
) STRICT;
