-- toolgate store, SQLite schema version 4: validate_output's named output types (seed 002).
-- One row per name; definition_json is the type's definition as registered (a JSON Schema, or
-- {"schema", "warnings", "description"}), checked by the caller before it is stored.
CREATE TABLE output_types (
    name            TEXT PRIMARY KEY,
    definition_json TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
