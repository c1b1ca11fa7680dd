-- Version 11: goals under a lease, as runs are, so that a goal whose asker died on
-- another machine reads as interrupted and a worker takes it up; goals submitted to the
-- queue (held by nobody, `lease_until` 0) wait for a worker. The goals a worker may take
-- are found without reading past the goals that ended.

ALTER TABLE goals ADD COLUMN lease_until INTEGER;
-- NB: an open goal of an older planvm has no lease: its asker is gone (a store is
-- migrated once every process of the older version has stopped), so it is ready.
UPDATE goals SET lease_until = 1 WHERE status = 'open';
CREATE INDEX goals_ready ON goals(created_at, id) WHERE status = 'open';
