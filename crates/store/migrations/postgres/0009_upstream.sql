-- toolgate store, PostgreSQL schema version 9: the MCP gateway's state.
--
-- gateway_servers: upstream server entries added through the CLI, REST or the web UI (entries of
-- the config file are not stored). entry_json is the entry as given, `${env:NAME}` references
-- unexpanded.
--
-- gateway_pins: one row per (server, upstream tool name), kept for config-file servers too. The
-- approved definition (JSON) and its hash; a pending definition and its hash when one that was
-- not approved was seen. status is 'approved' (no pending definition), 'pending' (a new tool
-- awaiting review: no approved definition) or 'quarantined' (a definition differing from the
-- approved one awaits review). present is false once the server stopped listing the tool (the
-- approved record stays, so the same definition coming back needs no new review). Status
-- changes are made under the advisory lock that serializes events, each with its event.
--
-- tool_events: its kind CHECK gains the gateway's events.
-- Timestamps are RFC 3339 UTC text with microseconds.
CREATE TABLE gateway_servers (
    name        TEXT NOT NULL PRIMARY KEY,
    entry_json  TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    created_by  TEXT NOT NULL,
    updated_at  TEXT NOT NULL,
    updated_by  TEXT NOT NULL
);

CREATE TABLE gateway_pins (
    server         TEXT    NOT NULL,
    tool           TEXT    NOT NULL,
    status         TEXT    NOT NULL CHECK (status IN ('approved', 'pending', 'quarantined')),
    approved_hash  TEXT    NULL,
    approved_json  TEXT    NULL,
    approved_at    TEXT    NULL,
    approved_by    TEXT    NULL,
    pending_hash   TEXT    NULL,
    pending_json   TEXT    NULL,
    pending_since  TEXT    NULL,
    present        BOOLEAN NOT NULL DEFAULT TRUE,
    first_seen     TEXT    NOT NULL,
    last_seen      TEXT    NOT NULL,
    PRIMARY KEY (server, tool),
    CHECK ((status = 'approved') = (approved_hash IS NOT NULL AND pending_hash IS NULL)),
    CHECK ((status = 'pending') = (approved_hash IS NULL AND pending_hash IS NOT NULL)),
    CHECK ((status = 'quarantined') = (approved_hash IS NOT NULL AND pending_hash IS NOT NULL))
);

ALTER TABLE tool_events DROP CONSTRAINT tool_events_kind_check;
ALTER TABLE tool_events ADD CONSTRAINT tool_events_kind_check CHECK (kind IN (
    'created', 'updated', 'deleted', 'validated',
    'server_added', 'server_updated', 'server_removed',
    'pin_pending', 'pin_approved', 'quarantined', 'pin_restored'));
