-- Runs and their budgets (see src/runs.rs): one row per run with its budget and counters, the
-- failed calls per tool, and the calls counted against it.

CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    principal TEXT NOT NULL,
    started_at TEXT NOT NULL,
    -- The start in milliseconds since the epoch: timeout_ms is checked against it.
    started_ms BIGINT NOT NULL,
    status TEXT NOT NULL DEFAULT 'open',
    max_turns BIGINT,
    max_tool_calls BIGINT,
    timeout_ms BIGINT,
    max_attempts_per_tool BIGINT NOT NULL,
    max_output_bytes BIGINT,
    turns BIGINT NOT NULL DEFAULT 0,
    tool_calls BIGINT NOT NULL DEFAULT 0,
    output_bytes BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_principal ON runs (principal, id);

CREATE TABLE run_tools (
    run_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    failures BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, tool)
);

CREATE TABLE run_calls (
    run_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    tool TEXT NOT NULL,
    failed BOOLEAN NOT NULL,
    output_bytes BIGINT NOT NULL,
    at TEXT NOT NULL,
    PRIMARY KEY (run_id, call_id)
);
