-- Version 3: a finished run's row keeps the number of calls it committed. `runs list`
-- used to count them from every run's journal (json_each over each entry), so its time
-- grew with the bytes stored rather than with the runs: 0.4 s for 10,000 runs of 13
-- calls. The count is written when the run ends (NULL while it runs: it is counted from
-- the journal when read, as before). Finished runs of an older store are counted here,
-- once.

ALTER TABLE runs ADD COLUMN tool_calls INTEGER;  -- calls committed, once the run ended

UPDATE runs SET tool_calls = (
    SELECT count(DISTINCT c.value)
    FROM journal j, json_each(j.entry) p, json_each(p.value, '$.committed') c
    WHERE j.run = runs.id
) WHERE status != 'running';
