-- What one instance asks of another through the shared database (see src/cluster.rs).

-- A tasks/cancel of a call that runs on another instance: every instance reads the rows newer
-- than the last it saw and cancels the named call if it runs there. Rows older than an hour go.
CREATE TABLE cancel_requests (
    id           BIGSERIAL PRIMARY KEY,
    target       TEXT NOT NULL,
    principal    TEXT NOT NULL,
    requested_ms BIGINT NOT NULL
);

-- The requestState of an MCP 2026-07-28 input-required result (src/cluster.rs): the SHA-256 of
-- the token, the hash binding it to its principal, tool and arguments, and its expiry; taken
-- (deleted) by the call that answers it, on whichever instance that call lands.
CREATE TABLE mcp_request_states (
    token_sha256 TEXT PRIMARY KEY,
    binding      TEXT NOT NULL,
    expires_ms   BIGINT NOT NULL
);
