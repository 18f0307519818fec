-- The answers an MCP 2026-07-28 input-required round carries to the next one (a JSON object:
-- the keys asked in that round and the answers given in earlier rounds), kept with the
-- requestState's hash so that the client cannot alter them.
ALTER TABLE mcp_request_states ADD COLUMN carried TEXT NOT NULL DEFAULT '{}';
