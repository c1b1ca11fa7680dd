-- Every column that holds a run id compares byte by byte, as `runs.id` does: a column of
-- another collation compared with it cannot use its index (counting one run's calls read
-- the journal of every run).
ALTER TABLE runs ALTER COLUMN parent TYPE TEXT COLLATE "C";
ALTER TABLE journal ALTER COLUMN run TYPE TEXT COLLATE "C";
ALTER TABLE checkpoints ALTER COLUMN run TYPE TEXT COLLATE "C";
ALTER TABLE feedback ALTER COLUMN run TYPE TEXT COLLATE "C";

-- The runs a worker may take (queued, or held under a lease that may have lapsed), oldest
-- first, without reading past the runs that ended.
CREATE INDEX runs_ready ON runs(created_at, id) WHERE status = 'running';
