#!/usr/bin/env bash
# Starts the MCP conformance fixtures (examples/conformance/main.rs) on 127.0.0.1:PORT, MCP at
# /mcp, building them first. Usage: examples/conformance/serve.sh PORT
set -euo pipefail
port="${1:?usage: examples/conformance/serve.sh PORT}"
cd "$(dirname "$0")/../.."
cargo build --quiet --release -p toolgate-examples --example conformance
exec target/release/examples/conformance "$port"
