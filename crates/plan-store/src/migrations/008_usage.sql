-- Version 8: the tokens a run's LLM calls cost, `{"input_tokens", "output_tokens"}`,
-- summed from its journal's answers (each keeps its own `usage`) when the run ends; NULL
-- while it runs (read from the journal then) or when no call reported any.

ALTER TABLE runs ADD COLUMN usage TEXT;
