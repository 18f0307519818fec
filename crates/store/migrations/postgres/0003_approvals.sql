-- toolgate store, schema version 3: durable approvals.
-- One row per approval request, bound to the principal, the tool's definition hash and the
-- SHA-256 of the canonical arguments. request_json is the immutable request (arguments to run
-- with, the redacted arguments to show, reason, timestamps); the columns beside it are copies
-- for lookups. Status moves pending -> approved | denied | expired, approved -> running ->
-- executed, running -> indeterminate (a crash left no result). Every move is one conditional
-- UPDATE (WHERE status = the expected one), so two deciders or two runners never both win.
-- Timestamps are RFC 3339 UTC text with microseconds.
CREATE TABLE approvals (
    id               TEXT NOT NULL PRIMARY KEY,
    call_id          TEXT NOT NULL,
    tool             TEXT NOT NULL,
    principal        TEXT NOT NULL,
    idempotency_key  TEXT NULL,
    request_json     TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'expired', 'running', 'executed', 'indeterminate')),
    created_at       TEXT NOT NULL,
    expires_at       TEXT NOT NULL,
    decided_at       TEXT NULL,
    decided_by       TEXT NULL,
    decision_reason  TEXT NULL,
    started_at       TEXT NULL,
    finished_at      TEXT NULL,
    result_json      TEXT NULL
);
CREATE UNIQUE INDEX approvals_idempotency ON approvals (principal, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX approvals_status ON approvals (status, created_at);
CREATE INDEX approvals_call ON approvals (call_id);
