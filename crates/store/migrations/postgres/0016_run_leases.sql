-- Who holds a run's reserved calls and a tool's attempts in flight (see src/run_cache.rs): one
-- lease per run and holder instance (the store's instance id), renewed by the holder while it is
-- alive, with the calls it reserved; and per tool the attempts it holds. runs.reserved_calls and
-- run_tools.in_flight stay the totals that the budget checks read (in_flight also counts the
-- durable path's attempts, which have no lease). Another instance that finds a lease expired
-- takes it back under the run's row lock: its calls are counted as used (calls lost, never
-- granted twice), its attempts freed.
CREATE TABLE run_leases (
    run_id TEXT NOT NULL,
    holder TEXT NOT NULL,
    reserved_calls BIGINT NOT NULL DEFAULT 0,
    -- Milliseconds since the epoch, by the holder's clock when it renewed.
    expires_ms BIGINT NOT NULL,
    PRIMARY KEY (run_id, holder)
);
CREATE INDEX run_leases_by_holder ON run_leases (holder);

CREATE TABLE run_lease_attempts (
    run_id TEXT NOT NULL,
    holder TEXT NOT NULL,
    tool TEXT NOT NULL,
    in_flight BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, holder, tool)
);

-- Reservations made before leases have no holder to renew them: counted as used where the run
-- has a cap on calls (lost, never granted twice), as an expired lease would be.
UPDATE runs SET tool_calls = tool_calls + CASE WHEN max_tool_calls IS NULL THEN 0 ELSE reserved_calls END,
    reserved_calls = 0
WHERE reserved_calls > 0;
