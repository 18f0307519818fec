-- toolgate store, PostgreSQL schema version 1.
-- Timestamps are TEXT in RFC 3339 UTC with microseconds ("2026-01-15T10:30:00.000000Z"): they sort
-- as text and read the same on both backends. JSON documents are TEXT.

-- Custom tool definitions (seed 003 §6 plus effect, consequence, tags, run, hash, version).
-- One row per version; the live version of a tool has superseded_at IS NULL AND deleted_at IS NULL.
CREATE TABLE tool_definitions (
    id                        BIGSERIAL PRIMARY KEY,
    name                      TEXT    NOT NULL CHECK (char_length(name) <= 64),
    version                   BIGINT  NOT NULL,
    description               TEXT    NOT NULL,
    category                  TEXT    NOT NULL,
    effect                    TEXT    NOT NULL,
    consequence               TEXT    NOT NULL,
    requires_confirmation     BOOLEAN NOT NULL DEFAULT FALSE,
    tags_json                 TEXT    NOT NULL DEFAULT '[]',
    parameters_json           TEXT    NULL,
    output_schema_json        TEXT    NULL,
    constraints_json          TEXT    NULL,
    required_permissions_json TEXT    NULL,
    metadata_json             TEXT    NULL,
    run_json                  TEXT    NULL,
    semver                    TEXT    NULL,
    definition_json           TEXT    NOT NULL,
    definition_hash           TEXT    NOT NULL,
    created_by                TEXT    NOT NULL,
    created_at                TEXT    NOT NULL,
    updated_at                TEXT    NOT NULL,
    superseded_at             TEXT    NULL,
    deleted_at                TEXT    NULL
);
CREATE UNIQUE INDEX tool_definitions_live_name ON tool_definitions (name)
    WHERE superseded_at IS NULL AND deleted_at IS NULL;
CREATE INDEX tool_definitions_name ON tool_definitions (name, id);
CREATE INDEX tool_definitions_category ON tool_definitions (category);

-- Definition events (seed 003 §11).
CREATE TABLE tool_events (
    id                  BIGSERIAL PRIMARY KEY,
    kind                TEXT NOT NULL CHECK (kind IN ('created', 'updated', 'deleted', 'validated')),
    tool                TEXT NOT NULL,
    changed_fields_json TEXT NOT NULL DEFAULT '[]',
    actor               TEXT NOT NULL,
    detail_json         TEXT NULL,
    at                  TEXT NOT NULL
);

-- The audit log: append-only, hash-chained. seq is assigned by the appender under a write lock.
-- output_sha256 is the SHA-256 of the bytes in audit_outputs when output_ref is set, so the
-- chain covers outputs kept apart too.
CREATE TABLE audit_log (
    seq             BIGINT PRIMARY KEY,
    kind            TEXT    NOT NULL CHECK (kind IN ('started', 'finished')),
    call_id         TEXT    NOT NULL,
    tool            TEXT    NOT NULL,
    definition_hash TEXT    NULL,
    principal       TEXT    NOT NULL,
    input_json      TEXT    NOT NULL,
    error_kind      TEXT    NULL,
    error           TEXT    NULL,
    data_json       TEXT    NULL,
    output_ref      TEXT    NULL,
    output_sha256   TEXT    NULL,
    attempts        BIGINT  NULL,
    duration_ms     DOUBLE PRECISION NULL,
    fetched_at      TEXT    NOT NULL,
    truncated       BOOLEAN NOT NULL DEFAULT FALSE,
    recorded_at     TEXT    NOT NULL,
    prev_hash       TEXT    NOT NULL,
    hash            TEXT    NOT NULL
);
CREATE INDEX audit_log_call ON audit_log (call_id);
CREATE INDEX audit_log_tool ON audit_log (tool, seq);

-- Outputs larger than 10 KB, kept apart from the log (seed 002).
CREATE TABLE audit_outputs (
    call_id   TEXT    PRIMARY KEY,
    bytes     BYTEA   NOT NULL,
    size      BIGINT  NOT NULL,
    sha256    TEXT    NOT NULL,
    stored_at TEXT    NOT NULL
);
