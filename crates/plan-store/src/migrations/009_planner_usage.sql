-- Version 9: the tokens the planner's reply that wrote a run's plan cost,
-- `{"input_tokens", "output_tokens", "cost"?}`: a run the planner wrote counts them with
-- its calls' (`runs.usage` keeps the calls' alone). NULL for a plan not written by the
-- planner, or when its server said nothing.

ALTER TABLE runs ADD COLUMN planner_usage TEXT;
