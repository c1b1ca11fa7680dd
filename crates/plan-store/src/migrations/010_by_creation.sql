-- Version 10: runs and goals by creation, so that a page of a list (newest first, from a
-- cursor: `GET /v1/runs`) reads only its rows, however many the store holds.

CREATE INDEX runs_by_creation ON runs(created_at, id);
CREATE INDEX goals_by_creation ON goals(created_at, id);
