-- toolgate store, schema version 7: idempotency keys of calls that run at once (calls that wait
-- for an approval keep their key on the approval). One row per principal and key, claimed
-- ('running') in its own committed transaction before the tool runs and 'finished' with the
-- result envelope once it ran; a call that never reached the tool gives its key back (the row
-- is deleted). tool and arguments_sha256 (of the canonical arguments as sent) bind the key to
-- one call. Rows older than a day are purged when keys are claimed.
-- Timestamps are RFC 3339 UTC text with microseconds.
CREATE TABLE idempotency_keys (
    principal        TEXT NOT NULL,
    idem_key         TEXT NOT NULL,
    tool             TEXT NOT NULL,
    arguments_sha256 TEXT NOT NULL,
    call_id          TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('running', 'finished')),
    result_json      TEXT NULL,
    created_at       TEXT NOT NULL,
    PRIMARY KEY (principal, idem_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
