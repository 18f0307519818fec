-- toolgate store, SQLite schema version 2: todo_manager's plans (seed 002).
-- One row per (principal, plan key); items_json is the plan's items as a JSON array (TEXT, as
-- every JSON document in this schema). Timestamps are RFC 3339 UTC text with microseconds.
CREATE TABLE todo_plans (
    principal  TEXT NOT NULL,
    plan_key   TEXT NOT NULL,
    items_json TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    PRIMARY KEY (principal, plan_key)
);
