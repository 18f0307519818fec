//! `toolgate servers import`: the `mcpServers` JSON of Claude Desktop, Cursor and VS Code turned into server entries.
