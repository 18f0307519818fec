-- toolgate store, PostgreSQL schema version 5: the order approvals change in, for followers in
-- other processes (a server publishing `approval` events for decisions made by the CLI or
-- another instance). Every status change (and every new approval) sets revision to one more
-- than the largest one, inside the write transaction that serializes approval changes (the
-- approvals advisory lock), so revisions grow in commit order and (revision, id) is a gap-free
-- cursor. Rows from before have revision 0.
ALTER TABLE approvals ADD COLUMN revision BIGINT NOT NULL DEFAULT 0;
CREATE INDEX approvals_revision ON approvals (revision, id);
