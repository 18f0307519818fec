-- Rate limits and concurrency caps shared by every instance on this database (see src/quota.rs).

-- One token bucket per limit key ("principal/ID", "tool/ID/TOOL"): the tokens left at `at`, and
-- whether the last take was granted (what the one-statement upsert returns).
CREATE TABLE quota_buckets (
    key TEXT PRIMARY KEY,
    tokens DOUBLE PRECISION NOT NULL,
    at TIMESTAMPTZ NOT NULL,
    granted BOOLEAN NOT NULL
);

-- Concurrency slots per key, 0..max-1. A slot is held while `expires_at` is in the future; the
-- holding instance renews its leases, so a killed instance's slots come back when they expire.
CREATE TABLE quota_slots (
    key TEXT NOT NULL,
    slot INTEGER NOT NULL,
    lease TEXT,
    instance TEXT,
    expires_at TIMESTAMPTZ NOT NULL DEFAULT '-infinity',
    PRIMARY KEY (key, slot)
);
