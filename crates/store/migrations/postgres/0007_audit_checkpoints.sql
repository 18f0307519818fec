-- toolgate store, PostgreSQL schema version 7: signed checkpoints of the audit chain's head.
-- A checkpoint says "entry seq had this hash", with an HMAC-SHA256 (hex) over
-- "toolgate-audit-checkpoint/1\n<seq>\n<hash>\n<at>" keyed with a key kept outside the database,
-- so a row cannot be forged by someone who can only write to the database. `toolgate audit verify`
-- checks the chain against every checkpoint that carries a valid MAC: a checkpoint beyond the
-- newest entry means the tail was cut. The newest rows are kept (at most one a second is
-- written); a copy lives outside the database, in the checkpoint file.
CREATE TABLE audit_checkpoints (
    seq  BIGINT PRIMARY KEY,
    hash TEXT NOT NULL,
    at   TEXT NOT NULL,
    mac  TEXT NOT NULL
);
