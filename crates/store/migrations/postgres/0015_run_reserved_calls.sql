-- Tool calls of a run reserved in blocks by instances that count them in memory (see
-- src/run_cache.rs) and not yet reported as used or given back. A call is reserved only while
-- tool_calls + reserved_calls < max_tool_calls, so the budget holds across instances; a block an
-- instance crash left here stays reserved (calls lost, never granted twice).
ALTER TABLE runs ADD COLUMN reserved_calls BIGINT NOT NULL DEFAULT 0;
