-- toolgate store, SQLite schema version 8: where each call came from (JSON {via, client, version}:
-- an MCP client's name and version, REST and its X-Toolgate-Client header, the command line)
-- and who cancelled it (client, client_disconnected, user:cli, shutdown, timeout). NULL when
-- unknown, and for every entry written before; the entry hash covers each column only when it
-- is set, so existing chains keep verifying.
ALTER TABLE audit_log ADD COLUMN origin_json TEXT;
ALTER TABLE audit_log ADD COLUMN cancelled_by TEXT;
