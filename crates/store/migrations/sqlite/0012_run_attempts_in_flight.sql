-- A run's calls of a tool that are admitted and not yet settled (see src/runs.rs): a call is
-- admitted only while failures + in_flight < max_attempts_per_tool, in one statement, so
-- concurrent calls (on any instance) can never fail more often than the budget allows. A call
-- an instance crash interrupted stays counted here: its outcome is unknown, so it is an attempt.
ALTER TABLE run_tools ADD COLUMN in_flight BIGINT NOT NULL DEFAULT 0;
